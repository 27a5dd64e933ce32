"""Snapshots of a large tree: how long taking and deleting one takes, against a plain
copy of the same rows in the same PostgreSQL, and what other users see meanwhile.

    python -m loadtests.snapshot_bench [--entries 1000000] [--data-every 10]
                                       [--update BENCHMARKS.md]

A local cluster (PostgreSQL, a namenode with its default settings, one datanode, TLS
on). The tree /bulk is bulk-inserted into PostgreSQL while the namenode is stopped
(scale_bench's directories of 1,000 empty files), and every `--data-every`-th file
gets a one-block extent (rows only: the benchmark reads no data, and the datanode is
stopped, so that nobody checks blocks it never wrote). Then, with the namenode
started cold:

  baseline        the same inodes, entries and extents copied into scratch tables by
                  one `CREATE TABLE ... AS SELECT` each (PostgreSQL's own bulk copy,
                  no namenode): the floor a row copy costs on this machine today
  create          `snapshot create /bulk` through the library, wall time
  delete          `snapshot delete` of it, wall time
  lookups         stat of random names of /bulk, 8 in flight, alone and while a
                  snapshot is taken (a second snapshot), as a ratio
  creates         create+commit of empty files elsewhere, 8 in flight, the same way

Prints the table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

from loadtests.dump_bench import wait_live
from loadtests.harness import BenchCluster, bench_cluster, timed, update_benchmarks_md
from loadtests.scale_bench import PER_DIR, Layout, grow
from plasmafs.client import Client
from plasmafs.local.cluster import start_namenode_process, stop_process

BLOCKSIZE = 64 * 1024
IN_FLIGHT = 8


async def add_extents(dsn: str, every: int) -> int:
    """A one-block extent for every `every`-th bulk file (on the one datanode); how many."""
    conn = await asyncpg.connect(dsn)
    try:
        datanode = await conn.fetchval("SELECT min(datanode_id) FROM datanodes")
        status = await conn.execute(
            """INSERT INTO extents (ino, file_index, datanode_id, block_start, block_count,
                                    generation)
               SELECT ino, 0, $1, row_number() OVER (ORDER BY ino) - 1, 1, 1
               FROM inodes WHERE kind = 1 AND ino >= $2 AND ino % $3 = 0""",
            datanode,
            Layout().next_ino,
            every,
        )
        await conn.execute(
            "UPDATE inodes i SET size = $1 FROM extents x WHERE x.ino = i.ino", BLOCKSIZE
        )
        await conn.execute("VACUUM ANALYZE")
        return int(status.split()[-1])
    finally:
        await conn.close()


async def row_copy_seconds(dsn: str) -> float:
    """PostgreSQL copying the inodes, entries and extents into scratch tables."""
    conn = await asyncpg.connect(dsn)
    try:
        started = time.perf_counter()
        async with conn.transaction():
            for table in ("inodes", "entries", "extents"):
                await conn.execute(f"CREATE TABLE scratch_{table} AS SELECT * FROM {table}")
        seconds = time.perf_counter() - started
        for table in ("inodes", "entries", "extents"):
            await conn.execute(f"DROP TABLE scratch_{table}")
        return seconds
    finally:
        await conn.close()


async def rate(
    address: str, op: Callable[[Client, int, int], Awaitable[None]], seconds: float
) -> float:
    """Operations per second, IN_FLIGHT at once over one client."""
    async with Client(address) as client:

        async def worker(k: int, running: Callable[[], bool]) -> int:
            n = 0
            while running():
                await op(client, k, n)
                n += 1
            return n

        return (await timed(IN_FLIGHT, seconds, worker)).per_second


async def run(cluster: BenchCluster, entries: int, every: int) -> dict[str, float]:
    """Build, measure; the figures."""
    address = cluster.namenode_address
    await (await wait_live(address, 1)).close()  # registered: its id is in PostgreSQL
    stop_process(cluster.namenode_pid, "plasmafs.namenode")
    for pid in cluster.datanode_pids:  # it holds none of the blocks the extents name
        stop_process(pid, "plasmafs.datanode")
    cluster.datanode_pids.clear()
    layout = Layout(big_size=1 << 62)  # directories of 1,000 files only
    started = time.monotonic()
    await grow(cluster.dsn(), layout, entries, os.getuid())
    with_data = await add_extents(cluster.dsn(), every)
    print(f"built {layout.entries:,} entries, {with_data:,} with a block, "
          f"in {time.monotonic() - started:.0f} s", flush=True)  # fmt: skip
    f: dict[str, float] = {"entries": layout.entries, "extents": with_data}
    f["row_copy_s"] = await row_copy_seconds(cluster.dsn())
    cluster.namenode_pid, _, _ = start_namenode_process(
        cluster.workdir, cluster.dsn(), address, cluster.registry_address,
        extra_env=cluster.namenode_env,
    )  # fmt: skip
    rng = random.Random(5)
    files = layout.bulk_dirs * PER_DIR

    async def lookup(client: Client, k: int, n: int) -> None:
        i = rng.randrange(files)
        await client.stat(f"/bulk/d{i // PER_DIR:06d}/f{i % PER_DIR:03d}")

    async def create(client: Client, k: int, n: int) -> None:
        await client.create(f"/elsewhere/w{k}-{n}-{time.monotonic_ns()}")

    async with Client(address) as fs:
        await fs.mkdir("/elsewhere")
        snaps = await fs.snapshots()
        started = time.perf_counter()
        taken = await snaps.create("/bulk", "first")
        f["create_s"] = time.perf_counter() - started
        assert taken.inodes == layout.entries - 1, (taken.inodes, layout.entries)
        f["lookups_alone"] = await rate(address, lookup, 5)
        f["creates_alone"] = await rate(address, create, 5)
        for key, op in (("lookups_during", lookup), ("creates_during", create)):
            taking = asyncio.create_task(snaps.create("/bulk", f"during-{key}"))
            began = time.perf_counter()
            counted = await rate(address, op, min(5.0, f["create_s"] * 0.8))
            await taking
            f[key] = counted
            f[f"{key}_snapshot_s"] = time.perf_counter() - began
        started = time.perf_counter()
        await snaps.delete("/bulk", "first")
        f["delete_s"] = time.perf_counter() - started
        for key in ("lookups_during", "creates_during"):
            await snaps.delete("/bulk", f"during-{key}")
    return f


def report(f: dict[str, float]) -> str:
    """The BENCHMARKS.md section."""
    base = f["row_copy_s"]
    rows = [
        ("PostgreSQL copying the same rows (baseline), s", f["row_copy_s"], ""),
        ("snapshot create, s", f["create_s"], f"{f['create_s'] / base:.1f}x the baseline"),
        ("snapshot delete, s", f["delete_s"], f"{f['delete_s'] / base:.1f}x the baseline"),
        (
            f"lookups/s ({IN_FLIGHT} in flight) while a snapshot is taken",
            f["lookups_during"],
            f"{f['lookups_during'] / f['lookups_alone']:.2f}x alone ({f['lookups_alone']:,.0f}/s)",
        ),
        (
            f"create+commit/s ({IN_FLIGHT} in flight) while a snapshot is taken",
            f["creates_during"],
            f"{f['creates_during'] / f['creates_alone']:.2f}x alone ({f['creates_alone']:,.0f}/s)",
        ),
    ]
    lines = [
        "## Snapshots of a large tree (`python -m loadtests.snapshot_bench`)",
        "",
        f"A snapshot of /bulk: {f['entries']:,.0f} entries (directories of 1,000 files, "
        f"{f['extents']:,.0f} of them with a block), bulk-inserted into PostgreSQL, the "
        "namenode started cold. The baseline is PostgreSQL copying the same inodes, "
        "entries and extents into scratch tables (CREATE TABLE AS) in the same run. "
        "Taking a snapshot copies the rows in one statement (one instant of the tree) and "
        "counts the shared blocks; other users go on meanwhile (rates over the same "
        "client, alone and during a second snapshot of the same tree).",
        "",
        "| | figure | ratio |",
        "|---|---:|---|",
    ]
    for label, value, ratio in rows:
        shown = f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
        lines.append(f"| {label} | {shown} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, run, print (and write the section)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--data-every", type=int, default=10, help="a block every N files")
    parser.add_argument("--update", type=Path, help="write the section into this file")
    args = parser.parse_args()
    blocks = args.entries // args.data_every + 1024
    with bench_cluster(datanodes=1, capacity=blocks * BLOCKSIZE, blocksize=BLOCKSIZE) as cluster:
        try:
            figures = asyncio.run(run(cluster, args.entries, args.data_every))
        except BaseException:
            log = cluster.workdir / "namenode.log"
            if log.exists():  # why, before the run's directory goes
                lines = log.read_text(errors="replace").splitlines(True)
                print("".join(line for line in lines if "WARNING" in line or "ERROR" in line))
            raise
    text = report(figures)
    print(text)
    print(json.dumps(figures))
    if args.update:
        update_benchmarks_md(args.update, "snapshots", text)


if __name__ == "__main__":
    main()
