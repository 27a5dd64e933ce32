"""Whole-subtree operations against walking directory by directory.

Builds the tree of the mount benchmark (1,870 directories, 28,600 files of 100-700
bytes at scale 1) on a throw-away cluster through the library, then times, best of
`--runs` interleaved rounds: the namenode's summary and walk through the library next
to the same totals and listing gathered directory by directory (one readdir with
attributes per directory, as a client without them must), and the CLI commands the
subtree issue sets targets for (`pfs du -s`, `pfs find`, `pfs ls -lR`, `pfs count`),
whole processes, start-up included.

    python -m loadtests.tree_bench [--scale 1] [--runs 3] [--update BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loadtests.harness import bench_cluster, update_benchmarks_md
from loadtests.walk_by_directory import by_directory
from plasmafs.client import Client

ROOT = "/tree"
BUILDERS = 32  # requests in flight while building


async def build_tree(fs: Client, dirs: int, files: int) -> None:
    """`dirs` directories in two levels and `files` files of 100-700 bytes spread over
    them, as the mount benchmark's tree."""
    rng = random.Random(7)
    tops = max(1, int(dirs**0.5))
    await fs.mkdir(ROOT)
    made = [f"{ROOT}/top{k}" for k in range(tops)]
    for path in made:
        await fs.mkdir(path)
    below = [f"{ROOT}/top{k % tops}/d{k}" for k in range(tops, dirs)]
    room = asyncio.Semaphore(BUILDERS)

    async def limited(work: Callable[[], Awaitable[Any]]) -> None:
        async with room:
            await work()

    await asyncio.gather(*(limited(functools.partial(fs.mkdir, p)) for p in below))
    made += below
    contents = [rng.randbytes(rng.randint(100, 700)) for _ in range(files)]
    await asyncio.gather(
        *(
            limited(functools.partial(fs.write_file, f"{made[k % len(made)]}/file{k}", contents[k]))
            for k in range(files)
        )
    )


async def listing_by_walk(fs: Client, root: str) -> int:
    """Entries under `root` (the root included) through the namenode's walk."""
    return sum([1 async for _ in fs.walk(root)])


def _seconds(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _cli(*args: str) -> float:
    """Seconds a `pfs` command takes, output discarded."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "plasmafs.cli", *args],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def run(scale: float, runs: int) -> dict[str, Any]:
    """Build the tree on a throw-away cluster and time every row."""
    dirs, files = max(2, int(1870 * scale)), max(1, int(28600 * scale))
    figures: dict[str, Any] = {"dirs": dirs, "files": files, "runs": runs}
    with bench_cluster(datanodes=0) as cluster:  # small files are kept inline
        os.environ["PFS_CLIENT_NAMENODE"] = cluster.namenode_address
        loop = asyncio.new_event_loop()
        fs = Client(cluster.namenode_address)
        try:
            started = time.perf_counter()
            loop.run_until_complete(build_tree(fs, dirs, files))
            figures["build_seconds"] = round(time.perf_counter() - started, 1)
            best: dict[str, float] = {}
            checks: dict[str, int] = {}

            def timed(name: str, work: Callable[[], Any]) -> None:
                seconds = _seconds(work)
                best[name] = min(best.get(name, seconds), seconds)

            def library(name: str, make: Callable[[], Awaitable[Any]]) -> None:
                def work() -> None:
                    checks[name] = _count(loop.run_until_complete(make()))

                timed(name, work)

            for _ in range(runs):
                library("summary", lambda: fs.summarize(ROOT))
                library("walk", lambda: listing_by_walk(fs, ROOT))
                library("by directory", lambda: by_directory(fs, ROOT))
                timed("pfs du -s", lambda: _cli("du", "-s", ROOT))
                timed("pfs count", lambda: _cli("count", ROOT))
                timed("pfs find", lambda: _cli("find", ROOT, "-type", "f"))
                timed("pfs ls -lR", lambda: _cli("ls", "-lR", ROOT))
                timed("python -c pass", lambda: _python_start())
                timed("by directory, a process", lambda: _by_directory_process())
            figures["seconds"] = {k: round(v, 6) for k, v in best.items()}
            figures["entries"] = checks
        finally:
            loop.run_until_complete(fs.close())
            loop.close()
            os.environ.pop("PFS_CLIENT_NAMENODE", None)
    return figures


def _count(result: Any) -> int:
    if isinstance(result, tuple):
        return int(result[0])
    if isinstance(result, int):
        return result
    return int(result.entries)


def _by_directory_process() -> None:
    subprocess.run(
        [sys.executable, "-m", "loadtests.walk_by_directory", ROOT],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _python_start() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


ROWS = [  # (row, its key, the directory-by-directory key it is compared with, target)
    ("summary (library)", "summary", "by directory", ""),
    ("walk of every entry (library)", "walk", "by directory", ""),
    ("`pfs du -s`", "pfs du -s", "by directory, a process", "< 0.3 s, >= 5x"),
    ("`pfs count`", "pfs count", "by directory, a process", ""),
    ("`pfs find` of every file", "pfs find", "by directory, a process", "< 1 s, >= 5x"),
    ("`pfs ls -lR`", "pfs ls -lR", "by directory, a process", "< 2 s, >= 5x"),
]


def markdown(f: dict[str, Any], command: str) -> str:
    """The BENCHMARKS.md section for these figures."""
    s = f["seconds"]
    lines = [
        "## Subtrees: du, count, find, ls -lR (`loadtests/tree_bench.py`)",
        "",
        f"Command: `{command}` — a tree of {f['dirs']:,} directories and {f['files']:,} "
        f"files of 100-700 bytes (built in {f['build_seconds']} s through the library), a "
        "namenode on this machine's PostgreSQL, TLS on; best of "
        f"{f['runs']} interleaved rounds. Directory by directory: the same totals or "
        "listing gathered with one readdir with attributes per directory through the "
        "library (`loadtests/walk_by_directory.py`): in this process for the library rows, "
        "as a process of its own for the `pfs` rows, which are whole processes too, "
        f"start-up included (`python -c pass` took {s['python -c pass']:.3f} s).",
        "",
        "| operation | seconds | directory by directory | speed-up | target |",
        "|---|---:|---:|---:|---|",
    ]
    for label, key, baseline, target in ROWS:
        speedup = s[baseline] / max(s[key], 1e-6)
        lines.append(
            f"| {label} | {_seconds_text(s[key])} | {s[baseline]:.3f} | {speedup:,.1f}x "
            f"| {target} |"
        )
    return "\n".join(lines)


def _seconds_text(seconds: float) -> str:
    """Three decimals, or two significant digits below a hundredth of a second."""
    return f"{seconds:.3f}" if seconds >= 0.01 else f"{seconds:.2g}"


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="tree size (0 < s <= 1)")
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds (best kept)")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1:
        parser.error("--scale must be in (0, 1]")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    figures = run(args.scale, args.runs)
    figures["date"] = time.strftime("%Y-%m-%d")
    text = markdown(
        figures, f"python -m loadtests.tree_bench --scale {args.scale:g} --runs {args.runs}"
    )
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "tree_bench", text)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
