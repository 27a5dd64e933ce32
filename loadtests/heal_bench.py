"""Self-healing benchmark: how fast a cluster restores replication after losing a datanode.

    python -m loadtests.heal_bench [--size 2G] [--files 8] [--extents 1000000]
                                   [--update BENCHMARKS.md]

Three datanodes hold files totalling --size at -rep 2; the datanode with the most data
is killed for good. Printed: the time from its death to the namenode declaring its
replicas lost (replica_lost_after is set to 5 s here; the default is 600 s), from then
to full replication, the rate data was re-replicated at, and, measured in the same run
on the same data, the rate of `pfs get` (to a local file, over gRPC and with local
reads). Then the namenode's cost of finding the under-replicated set: --extents replica
rows (rep 2, a third of them on a dead datanode) in a database of their own, scanned by
the namenode's own code in this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loadtests.harness import (
    BenchCluster,
    bench_cluster,
    cpu_seconds,
    postgres_cpu_seconds,
    scrape,
    update_benchmarks_md,
)
from plasmafs.client import Client, ReplicaState
from plasmafs.client.file_writer import FileWriter
from plasmafs.core.sizes import parse_size
from plasmafs.local.postgres import create_database

MIB = 1024**2
LOST_AFTER = 5.0
CHUNK = 4 * MIB


async def write_files(address: str, files: int, size: int) -> list[str]:
    """`files` files of size/files bytes each at -rep 2."""
    chunk = os.urandom(CHUNK)
    each = size // files
    paths = []
    async with Client(address) as fs:
        for i in range(files):
            path = f"/heal/f{i}"
            if i == 0:
                await fs.mkdir("/heal")
            writer = await fs.open(path, "wb", replication=2, size_hint=each)
            assert isinstance(writer, FileWriter)
            left = each
            while left:
                piece = chunk[: min(left, CHUNK)]
                await writer.write(piece)
                left -= len(piece)
            await writer.close()
            paths.append(path)
    return paths


def get_rate(cluster: BenchCluster, paths: list[str], size: int, *, local: bool) -> float:
    """MB/s of `pfs get` of every file to a local file (the files one after another)."""
    env = dict(os.environ, PFS_CLIENT_NAMENODE=cluster.namenode_address)
    target = cluster.workdir / "got"
    flags = [] if local else ["--no-local-reads"]
    started = time.perf_counter()
    for path in paths:
        subprocess.run(
            [sys.executable, "-m", "plasmafs.cli", *flags, "get", path, str(target)],
            env=env,
            check=True,
            capture_output=True,
        )
        target.unlink()
    return size / MIB / (time.perf_counter() - started)


async def heal(cluster: BenchCluster, paths: list[str]) -> dict[str, float]:
    """Kill the fullest datanode; time lost-declaration and re-replication."""
    async with Client(cluster.namenode_address, local_reads=False) as fs:
        nodes = await fs.datanodes()
        victim = max(nodes, key=lambda d: d.replica_blocks)
        blocksize = (await fs.fsstat()).blocksize
        moved = victim.replica_blocks * blocksize
        pid = cluster.datanode_pids[[d.datanode_id for d in nodes].index(victim.datanode_id)]
        probe = ""
        for path in paths:
            blocks = await fs.blocks(path)
            if any(r.datanode_id == victim.datanode_id for e in blocks.extents for r in e.replicas):
                probe = path
                break
        os.kill(pid, 9)
        died = time.monotonic()
        while not any(
            r.state is ReplicaState.LOST
            for e in (await fs.blocks(probe)).extents
            for r in e.replicas
        ):
            await asyncio.sleep(0.05)
        lost = time.monotonic()
        cpu_before = cpu_seconds(cluster.namenode_pid)
        survivors = [p for p in cluster.datanode_pids if p != pid]
        dn_before = sum(cpu_seconds(p) for p in survivors)
        while True:
            stat = await fs.fsstat()
            if stat.under_replicated_blocks == 0 and stat.missing_blocks == 0:
                break
            await asyncio.sleep(0.05)
        healed = time.monotonic()
        cpu = cpu_seconds(cluster.namenode_pid) - cpu_before
        dn_cpu = sum(cpu_seconds(p) for p in survivors) - dn_before
        metrics = scrape(cluster.metrics_address)
        copied = metrics["pfs_replication_bytes_total"]
        discarded = metrics["pfs_replication_discarded_total"]
    return {
        "to_lost_s": lost - died,
        "to_healed_s": healed - lost,
        "moved_mib": moved / MIB,
        "heal_mb_s": moved / MIB / (healed - lost),
        "namenode_cpu_s": cpu,
        "datanode_cpu_s_per_gib": dn_cpu / (moved / 1024**3),
        "copied_vs_needed": copied / moved,
        "copies_discarded": discarded,
    }


async def scan_cost(cluster: BenchCluster, extents: int) -> dict[str, float]:
    """The namenode's CPU (this process) and PostgreSQL's to find the under-replicated
    groups among `extents` replica rows, a third of them on a dead datanode."""
    from plasmafs.namenode import replication_monitor
    from plasmafs.namenode.allocator import Allocator
    from plasmafs.namenode.datanodes import DatanodeRegistry
    from plasmafs.namenode.migrator import migrate_database
    from plasmafs.namenode.replica_health import ReplicaHealth
    from plasmafs.namenode.replica_store import ReplicaStore
    from plasmafs.namenode.store import Store

    await create_database(cluster.pg.dsn(), "scanbench")
    dsn = cluster.dsn("scanbench")
    await migrate_database(dsn)
    groups = extents // 2
    store = Store(dsn, 2)
    await store.open()
    try:
        async with store.read_connection() as conn:
            await conn.execute(
                """INSERT INTO datanodes (identity, host, address, blocksize, capacity_blocks)
                   SELECT gen_random_uuid(), 'bench', '127.0.0.1:1', 1048576, $1
                   FROM generate_series(1, 3)""",
                4 * groups + 4,
            )
            await conn.execute(
                """INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns,
                                       nlink, replication, blocksize)
                   SELECT 1000 + f, 1, 420, 0, 0, 40 * 1048576, 0, 0, 1, 2, 1048576
                   FROM generate_series(0, $1 - 1) AS f""",
                (groups + 9) // 10,
            )
            # Group g of file g/10 at file block (g%10)*4, on datanodes p+1 and (p+1)%3+1.
            await conn.execute(
                """INSERT INTO extents (ino, file_index, datanode_id, block_start, block_count)
                   SELECT 1000 + g / 10, (g % 10) * 4, d, g * 4, 4
                   FROM generate_series(0, $1 - 1) AS g,
                        LATERAL (VALUES (g % 3 + 1), ((g % 3 + 1) % 3 + 1)) AS r(d)""",
                groups,
            )
            await conn.execute("ANALYZE")
        allocator = Allocator()
        registry = DatanodeRegistry(store, allocator, 1048576, b"x" * 32, 10.0, 1000, 0.0)
        await registry.load()
        for row in [r for r in (await store.datanodes())[1:]]:
            registry.heartbeat(row.datanode_id, row.identity)  # datanodes 2 and 3 live
        health = ReplicaHealth(registry)
        pg_before = postgres_cpu_seconds(cluster.pg.datadir)
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        found = await replication_monitor.unhealthy_groups(ReplicaStore(store), health)
        cpu = time.process_time() - cpu_before
        wall = time.perf_counter() - wall_before
        pg = postgres_cpu_seconds(cluster.pg.datadir) - pg_before
    finally:
        await store.close()
    per_million = 1_000_000 / extents
    return {
        "extents": extents,
        "under_replicated_groups": len(found),
        "namenode_cpu_s_per_million": cpu * per_million,
        "postgres_cpu_s_per_million": pg * per_million,
        "wall_s_per_million": wall * per_million,
    }


def run(size: int, files: int, extents: int, workdir: Path) -> dict[str, Any]:
    """The whole benchmark; returns its figures."""
    capacity = (size * 5 // 4 // MIB + 64) * MIB  # two datanodes must hold both replicas
    env = {
        "PFS_NAMENODE_DATANODE_DEAD_AFTER": "2",
        "PFS_NAMENODE_HEARTBEAT_MS": "200",
        "PFS_NAMENODE_REPLICA_LOST_AFTER": str(LOST_AFTER),
        "PFS_NAMENODE_REPLICATION_CHECK_INTERVAL": "0.2",
    }
    with bench_cluster(3, capacity, workdir=workdir, namenode_env=env, metrics=True) as cluster:
        paths = asyncio.run(write_files(cluster.namenode_address, files, size))
        get_grpc = get_rate(cluster, paths, size, local=False)
        get_local = get_rate(cluster, paths, size, local=True)
        healed = asyncio.run(heal(cluster, paths))
        scan = asyncio.run(scan_cost(cluster, extents))
    return {
        "size_mib": size / MIB,
        "files": files,
        "get_grpc_mb_s": get_grpc,
        "get_local_mb_s": get_local,
        **healed,
        "heal_vs_get_grpc": healed["heal_mb_s"] / get_grpc,
        "heal_vs_get_local": healed["heal_mb_s"] / get_local,
        "scan": scan,
    }


def markdown(f: dict[str, Any], command: str) -> str:
    """The BENCHMARKS.md section."""
    s = f["scan"]
    return "\n".join(
        [
            "## Self-healing (heal_bench)",
            "",
            f"`{command}`: 3 datanodes, {f['size_mib'] / 1024:.1f} GiB in {f['files']} files "
            "at -rep 2, the fullest datanode killed (SIGKILL) for good; replica_lost_after "
            f"set to {LOST_AFTER:g} s (default 600 s), dead_after 2 s.",
            "",
            "| | figure |",
            "|---|---:|",
            f"| death -> replicas declared lost | {f['to_lost_s']:.1f} s |",
            f"| lost -> full replication | {f['to_healed_s']:.1f} s |",
            f"| re-replicated | {f['moved_mib']:.0f} MiB at {f['heal_mb_s']:.0f} MB/s |",
            f"| `pfs --no-local-reads get`, same data, same run | {f['get_grpc_mb_s']:.0f} MB/s |",
            f"| `pfs get` (local reads), same run | {f['get_local_mb_s']:.0f} MB/s |",
            f"| **re-replication / get over gRPC** | **{f['heal_vs_get_grpc']:.2f}x** |",
            f"| re-replication / get with local reads | {f['heal_vs_get_local']:.2f}x |",
            f"| namenode CPU while healing | {f['namenode_cpu_s']:.2f} s |",
            f"| datanodes' CPU per GiB copied | {f['datanode_cpu_s_per_gib']:.2f} s |",
            f"| bytes copied / bytes that needed a copy | {f['copied_vs_needed']:.2f} "
            f"({f['copies_discarded']:.0f} copies discarded) |",
            "",
            f"Finding the under-replicated set among {s['extents']:,} replica rows (a third on "
            f"a dead datanode; {s['under_replicated_groups']:,} groups found), per million "
            "replica rows:",
            "",
            "| | per million extents |",
            "|---|---:|",
            f"| namenode CPU | {s['namenode_cpu_s_per_million']:.2f} s |",
            f"| PostgreSQL CPU | {s['postgres_cpu_s_per_million']:.2f} s |",
            f"| wall time | {s['wall_s_per_million']:.2f} s |",
        ]
    )


def main() -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="2G", help="data at -rep 2 (default 2G)")
    parser.add_argument("--files", type=int, default=8, help="files (default 8)")
    parser.add_argument(
        "--extents", type=int, default=1_000_000, help="replica rows to scan (default 1M)"
    )
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args()
    size = parse_size(args.size)
    if size < 16 * MIB or args.files < 1 or size // args.files < MIB:
        parser.error("--size must be at least 16M and 1M per file")
    if args.extents < 1000:
        parser.error("--extents must be at least 1000")
    workdir = Path(tempfile.mkdtemp(prefix="pfs-heal-bench-"))
    figures = run(size, args.files, args.extents, workdir)
    command = f"python -m loadtests.heal_bench --size {args.size} --files {args.files}"
    text = markdown(figures, command)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "heal_bench", text)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
