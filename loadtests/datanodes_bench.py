"""What many datanodes cost the namenode: heartbeats, placement, and how evenly new data
spreads over them.

    python -m loadtests.datanodes_bench [--datanodes 100] [--racks 4] [--seconds 60]
                                        [--update BENCHMARKS.md]

A namenode (default settings: a heartbeat a second from a busy datanode, every 3 s from
an idle one) and `--datanodes` datanode processes on small volumes (32 MiB of 64 KiB
blocks, no scrub), spread over `--racks` racks, all on this host. Measured in the same
run:

  idle namenode     its CPU over `--seconds` before any datanode starts (the baseline)
  heartbeats        its CPU over `--seconds` with every datanode registered and live,
                    as a share of one core, and per datanode over the baseline
  placement         namenode CPU per file while files of 4 blocks (replication 2) are
                    written until the datanodes are 60% full, 8 writers at once; then
                    the spread of the datanodes' used fractions (most minus least full)
                    and whether every block's replicas span two racks

Prints the figures and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadtests.harness import BenchCluster, bench_cluster, cpu_seconds, update_benchmarks_md
from plasmafs.client import Client
from plasmafs.local.cluster import (
    daemon_tls_env,
    launch_datanode,
    rack_of,
    stop_processes,
    wait_ready,
)

BLOCKSIZE = 64 * 1024
FILE_BLOCKS = 4
FLEET_ENV = {
    "PFS_DATANODE_SCRUB_BANDWIDTH": "0",  # no background reads: heartbeats alone
    "PFS_DATANODE_IO_THREADS": "2",
    "PFS_DATANODE_LOCAL_READ_CONNECTIONS": "4",
}


@dataclass
class Fleet:
    """Datanode processes started together."""

    pids: list[int]
    addresses: list[str]

    def stop(self) -> None:
        """End them all (SIGTERM, then SIGKILL for those left)."""
        stop_processes(self.pids, "plasmafs.datanode", timeout=30)


def start_fleet(
    workdir: Path,
    registry: str,
    count: int,
    capacity: int,
    racks: int,
    security: Callable[[str], dict[str, str]],
    timeout: float = 600,
) -> Fleet:
    """`count` datanodes on new volumes under `workdir`, registering at `registry`,
    started at once (datanode k in rack k mod `racks`, with the TLS settings
    `security(name)` gives); returns once every one serves."""
    directories = [workdir / f"fleet-{k}" for k in range(1, count + 1)]
    procs = []
    try:
        for k, directory in enumerate(directories, start=1):
            env = {
                **security(directory.name),
                **FLEET_ENV,
                "PFS_DATANODE_LOCATION": rack_of(k, racks),
            }
            procs.append(launch_datanode(directory, registry, capacity, BLOCKSIZE, env))
        addresses = [
            wait_ready(p, "datanode", d, timeout)[0]
            for p, d in zip(procs, directories, strict=True)
        ]
    except BaseException:
        stop_processes([p.pid for p in procs], "plasmafs.datanode", timeout=30)
        raise
    return Fleet([p.pid for p in procs], addresses)


async def all_live(client: Client, count: int, timeout: float = 300) -> None:
    """Wait until `count` datanodes are live."""
    async with asyncio.timeout(timeout):
        while (await client.fsstat()).live_datanodes < count:
            await asyncio.sleep(0.5)


def core_share(pid: int, seconds: float) -> float:
    """The share of one core `pid` used over the next `seconds`."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


async def fill(client: Client, share: float, writers: int = 8) -> int:
    """Write files of FILE_BLOCKS blocks, replication 2, until the cluster's used space
    reaches `share` of its capacity; how many were written."""
    stat = await client.fsstat()
    room = int(stat.capacity_bytes * share) - stat.used_bytes
    files = max(0, room // (2 * FILE_BLOCKS * BLOCKSIZE))
    await client.mkdir("/fill", parents=True)
    data = os.urandom(FILE_BLOCKS * BLOCKSIZE)

    async def writer(w: int) -> None:
        for n in range(w, files, writers):
            await client.write_file(f"/fill/f{n}", data, replication=2)

    await asyncio.gather(*(writer(w) for w in range(writers)))
    return files


async def spread(client: Client) -> tuple[float, float, float]:
    """(least, most) used fraction over the live datanodes, and most minus least."""
    fractions = [d.used_fraction for d in await client.datanodes() if d.alive]
    return min(fractions), max(fractions), max(fractions) - min(fractions)


async def racks_spanned(client: Client, sample: int, racks: int) -> bool:
    """Whether `sample` random written files have each block's replicas in two racks."""
    where = {d.datanode_id: d.location for d in await client.datanodes()}
    names = [e.name async for e in client.scandir("/fill")]
    for name in random.Random(5).sample(names, min(sample, len(names))):
        for extent in (await client.blocks(f"/fill/{name}")).extents:
            if len({where[r.datanode_id] for r in extent.replicas}) < min(2, racks):
                return False
    return True


def measure(cluster: BenchCluster, count: int, racks: int, seconds: float) -> dict[str, float]:
    """Every figure, on a running cluster without datanodes."""
    pid = cluster.namenode_pid
    figures: dict[str, float] = {"datanodes": count, "racks": racks, "seconds": seconds}
    figures["idle_core_share"] = core_share(pid, seconds)
    started = time.monotonic()
    fleet = start_fleet(
        cluster.workdir,
        cluster.registry_address,
        count,
        32 * 1024 * 1024,
        racks,
        lambda name: daemon_tls_env(cluster.workdir, "datanode", name),
    )
    try:

        async def live() -> None:
            async with Client(cluster.namenode_address) as client:
                await all_live(client, count)

        asyncio.run(live())
        figures["start_s"] = time.monotonic() - started
        time.sleep(5)  # registrations' owner checks and first scans done
        figures["heartbeat_core_share"] = core_share(pid, seconds)
        extra = figures["heartbeat_core_share"] - figures["idle_core_share"]
        figures["per_datanode_us_per_s"] = extra / count * 1e6

        async def place() -> None:
            async with Client(cluster.namenode_address) as client:
                before = cpu_seconds(pid)
                began = time.monotonic()
                files = await fill(client, 0.6)
                figures["files"] = files
                figures["fill_s"] = time.monotonic() - began
                figures["placement_us_per_file"] = (cpu_seconds(pid) - before) / files * 1e6
                figures["least_used"], figures["most_used"], figures["used_spread"] = await spread(
                    client
                )
                figures["racks_spanned"] = float(await racks_spanned(client, 200, racks))

        asyncio.run(place())
    finally:
        fleet.stop()
    return figures


def report(f: dict[str, float]) -> str:
    """The BENCHMARKS.md section."""
    return "\n".join(
        [
            "## Many datanodes (`python -m loadtests.datanodes_bench`)",
            "",
            f"A namenode and {f['datanodes']:.0f} datanode processes on this host (32 MiB "
            f"volumes, 64 KiB blocks, no scrub, a heartbeat a second while busy) over "
            f"{f['racks']:.0f} racks; all started together and live in {f['start_s']:.0f} s "
            "(a datanode with nothing to do beats every 3 s). "
            f"CPU measured over {f['seconds']:.0f} s; the baseline is the same namenode "
            "idle, before any datanode started, in the same run. Target: heartbeats of 100 "
            "datanodes <= 5% of a core; used fractions within 10 points.",
            "",
            "| | figure |",
            "|---|---:|",
            f"| namenode idle, share of a core | {100 * f['idle_core_share']:.2f}% |",
            f"| with every datanode heartbeating, share of a core | "
            f"{100 * f['heartbeat_core_share']:.2f}% |",
            f"| namenode CPU per datanode (idle ones beat every 3 s) | "
            f"{f['per_datanode_us_per_s']:.0f} us a second |",
            f"| placement: files of 4 blocks, replication 2, until 60% full | "
            f"{f['files']:.0f} files in {f['fill_s']:.0f} s |",
            f"| namenode CPU per file written | {f['placement_us_per_file']:.0f} us |",
            f"| used fraction, least / most full datanode | {100 * f['least_used']:.1f}% / "
            f"{100 * f['most_used']:.1f}% |",
            f"| spread (most minus least) | {100 * f['used_spread']:.1f} points |",
            "| every sampled block's replicas in two racks | "
            f"{'yes' if f['racks_spanned'] else 'NO'} |",
        ]
    )


def main() -> None:
    """Parse arguments, run, print (and write the section)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datanodes", type=int, default=100)
    parser.add_argument("--racks", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--update", type=Path, help="write the section into this file")
    args = parser.parse_args()
    with bench_cluster(blocksize=BLOCKSIZE) as cluster:
        figures = measure(cluster, args.datanodes, args.racks, args.seconds)
    text = report(figures)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "datanodes", text)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
