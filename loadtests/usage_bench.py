"""Usage kept per directory, and quotas: what they cost and what they give.

    python -m loadtests.usage_bench [--seconds 3] [--rounds 3] [--entries 1000000]
                                    [--tree-scale 1] [--update BENCHMARKS.md]

On one throw-away cluster (PostgreSQL, a namenode, no datanode: empty and small
files), in order:

  quota cost     create+commit of empty files, one per transaction, 64 in flight (each
                 writer in its own directory), into a tree whose root has a quota and
                 into one without, in `--rounds` interleaved rounds of `--seconds`
                 each; medians and their ratio (target >= 0.9x)
  du of a tree   the summary (what `du -s` and `count` print) of the mount benchmark's
                 tree (1,870 directories, 28,600 files, built through the library) from
                 the usage the namenode keeps, and the same summary by a walk of the
                 tree (forced by one hard link in it: a file with two names must be
                 counted once, which only a walk does); best of the rounds; target
                 <= 0.05 s and independent of the tree's size
  at 1M entries  /big, a directory of `--entries` empty files, bulk-inserted into
                 PostgreSQL with the namenode stopped (as scale_bench does); then the
                 namenode's cold start to a first answered lookup, the time until the
                 usage of every directory is counted (in the background: the namenode
                 serves meanwhile), and the summaries of /big and of / from the usage,
                 and of / by a walk

Prints the table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loadtests.harness import bench_cluster, scrape, timed, update_benchmarks_md
from loadtests.scale_bench import Layout, grow
from loadtests.tree_bench import ROOT, build_tree
from plasmafs.client import Client
from plasmafs.local.cluster import start_namenode_process, stop_process

CONCURRENCY = 64


async def create_rate(fs: Client, root: str, seconds: float, round_no: int) -> float:
    """Create+commit per second, CONCURRENCY writers each in a directory of its own."""
    base = f"{root}/round{round_no}"
    await fs.mkdir(base)
    for k in range(CONCURRENCY):
        await fs.mkdir(f"{base}/w{k}")

    async def worker(k: int, running: Callable[[], bool]) -> int:
        n = 0
        while running():
            async with fs.transaction() as t:
                await t.create(f"{base}/w{k}/f{n}")
            n += 1
        return n

    return (await timed(CONCURRENCY, seconds, worker)).per_second


async def best_seconds(work: Callable[[], Awaitable[Any]], runs: int) -> float:
    """The fastest of `runs` runs of `work`."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        await work()
        best = min(best, time.perf_counter() - started)
    return best


async def summary_pair(fs: Client, path: str, link_dir: str, runs: int) -> tuple[float, float]:
    """Seconds of the summary of `path` from the usage kept, and by a walk (a second
    name of one file in `link_dir` forces it)."""
    kept = await best_seconds(lambda: fs.summarize(path), runs)
    await fs.create(f"{link_dir}/linked")
    await fs.link(f"{link_dir}/linked", f"{link_dir}/second-name")
    walked = await best_seconds(lambda: fs.summarize(path), runs)
    await fs.unlink(f"{link_dir}/second-name")
    await fs.unlink(f"{link_dir}/linked")
    return kept, walked


async def quota_cost(fs: Client, seconds: float, rounds: int) -> dict[str, float]:
    """Median create+commit rates without and with a quota on the tree."""
    await fs.mkdir("/plain")
    await fs.mkdir("/limited")
    await fs.set_quota("/limited", entries=10**12, space=10**18)
    plain, limited = [], []
    for r in range(rounds):
        plain.append(await create_rate(fs, "/plain", seconds, r))
        limited.append(await create_rate(fs, "/limited", seconds, r))
    p, q = statistics.median(plain), statistics.median(limited)
    return {"create_plain_per_s": round(p), "create_quota_per_s": round(q), "ratio": q / p}


def wait_usage_ready(metrics: str, timeout: float = 600.0) -> float:
    """Seconds until the namenode reports every directory's usage counted."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if scrape(metrics).get("pfs_namenode_usage_ready") == 1:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"usage not counted within {timeout:g}s")


def run(seconds: float, rounds: int, entries: int, tree_scale: float = 1.0) -> dict[str, Any]:
    """Every figure, on one cluster (`tree_scale` shrinks the mount benchmark's tree)."""
    figures: dict[str, Any] = {"seconds": seconds, "rounds": rounds, "entries": entries}
    dirs, files = max(2, int(1870 * tree_scale)), max(1, int(28600 * tree_scale))
    figures["tree_files"] = files
    with bench_cluster(datanodes=0, metrics=True) as cluster:
        address = cluster.namenode_address
        loop = asyncio.new_event_loop()

        async def first() -> None:
            async with Client(address) as fs:
                figures.update(await quota_cost(fs, seconds, rounds))
                started = time.perf_counter()
                await build_tree(fs, dirs, files)
                figures["tree_build_s"] = round(time.perf_counter() - started, 1)
                kept, walked = await summary_pair(fs, ROOT, f"{ROOT}/top0", 5)
                figures["tree_summary_kept_s"], figures["tree_summary_walk_s"] = kept, walked

        loop.run_until_complete(first())
        stop_process(cluster.namenode_pid, "plasmafs.namenode")
        layout = Layout(big_size=entries)
        started = time.monotonic()
        loop.run_until_complete(grow(cluster.dsn(), layout, entries + 1, os.getuid()))
        figures["bulk_insert_s"] = round(time.monotonic() - started, 1)
        env = {**cluster.namenode_env, "PFS_NAMENODE_METRICS_LISTEN": cluster.metrics_address}
        started = time.monotonic()
        cluster.namenode_pid, _, _ = start_namenode_process(
            cluster.workdir, cluster.dsn(), address, cluster.registry_address, extra_env=env
        )

        async def second() -> None:
            async with Client(address, failover_timeout=120) as fs:
                await fs.stat("/big/f0000000")
                figures["cold_start_s"] = time.monotonic() - started
                figures["usage_ready_after_start_s"] = figures["cold_start_s"] + (
                    await asyncio.to_thread(wait_usage_ready, cluster.metrics_address)
                )
                values = scrape(cluster.metrics_address)
                figures["usage_count_s"] = values["pfs_namenode_usage_count_seconds"]
                figures["big_summary_kept_s"] = await best_seconds(lambda: fs.summarize("/big"), 5)
                kept, walked = await summary_pair(fs, "/", "/", 3)
                figures["root_summary_kept_s"], figures["root_summary_walk_s"] = kept, walked
                total = await fs.summarize("/")
                figures["root_entries"] = total.files + total.directories + total.symlinks

        loop.run_until_complete(second())
        loop.close()
    return figures


def report(f: dict[str, Any]) -> str:
    """The BENCHMARKS.md section."""
    return "\n".join(
        [
            "## Usage per directory and quotas (`loadtests/usage_bench.py`)",
            "",
            f"Command: `python -m loadtests.usage_bench --seconds {f['seconds']:g} --rounds "
            f"{f['rounds']} --entries {f['entries']}` — one cluster (PostgreSQL, a namenode, "
            "TLS on), every figure in the same run. The namenode keeps the usage of every "
            "directory in memory (namenode/usage.py), counted in the background when it "
            "starts and kept current by each commit; quotas are checked against it.",
            "",
            "| measurement | value | baseline in the same run | ratio | target |",
            "|---|---:|---:|---:|---|",
            f"| create+commit/s, 64 in flight, in a tree with a quota | "
            f"{f['create_quota_per_s']:,} | {f['create_plain_per_s']:,} (no quota) | "
            f"**{f['ratio']:.2f}x** | >= 0.9x |",
            f"| summary (`du -s`) of the {f['tree_files']:,}-file tree, s | "
            f"{f['tree_summary_kept_s']:.4f} | "
            f"{f['tree_summary_walk_s']:.4f} (by a walk) | "
            f"{f['tree_summary_walk_s'] / f['tree_summary_kept_s']:.0f}x faster | <= 0.05 s |",
            f"| summary of /big ({f['entries']:,} files), s | {f['big_summary_kept_s']:.4f} | "
            "| | <= 0.05 s |",
            f"| summary of / ({f['root_entries']:,} entries), s | "
            f"{f['root_summary_kept_s']:.4f} | {f['root_summary_walk_s']:.3f} (by a walk) | "
            f"{f['root_summary_walk_s'] / f['root_summary_kept_s']:.0f}x faster | "
            "<= 0.05 s |",
            f"| namenode cold start to a first lookup at {f['root_entries']:,} entries, s | "
            f"{f['cold_start_s']:.2f} | | | <= 10 s (scale_bench) |",
            f"| ... until every directory's usage is counted, s | "
            f"{f['usage_ready_after_start_s']:.2f} | | | |",
            f"| the count itself (its two scans), s | {f['usage_count_s']:.2f} | | | |",
            "",
            "Until the count is done the namenode serves as before: summaries walk, and "
            "commits wait for it only where some directory has a quota.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--tree-scale", type=float, default=1.0, help="tree size (0 < s <= 1)")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args()
    if not 0 < args.tree_scale <= 1:
        parser.error("--tree-scale must be in (0, 1]")
    figures = run(args.seconds, args.rounds, args.entries, args.tree_scale)
    text = report(figures)
    print(text)
    print(json.dumps(figures))
    if args.update:
        update_benchmarks_md(args.update, "usage_bench", text)


if __name__ == "__main__":
    main()
