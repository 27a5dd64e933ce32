"""Replicas across racks with real processes: placement, decommission, setrep and
healing keep a block's replicas in distinct locations, losing a whole rack loses no
file, and groups in too few locations are reported by fsck and mended."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client, DatanodeState
from plasmafs.client.admin import FsckFile
from tests.support.heal_cluster import (
    BS,
    HealCluster,
    fsck_summary,
    fully_replicated,
    heal_client,
    heal_cluster,
)
from tests.support.waiting import eventually

RACK_A, RACK_B = "/dc1/rack-a", "/dc1/rack-b"


@pytest.fixture
def racks(dsn: str, tmp_path: Path) -> Iterator[HealCluster]:
    """Two datanodes in each of two racks."""
    with heal_cluster(dsn, tmp_path, locations=(RACK_A, RACK_A, RACK_B, RACK_B)) as cluster:
        yield cluster


@pytest.fixture
def one_rack(dsn: str, tmp_path: Path) -> Iterator[HealCluster]:
    """Two datanodes, both in one rack."""
    with heal_cluster(dsn, tmp_path, locations=(RACK_A, RACK_A)) as cluster:
        yield cluster


async def places(fs: Client) -> dict[int, str]:
    """Each datanode's location, as `pfs admin datanodes` shows it."""
    return {d.datanode_id: d.location for d in await fs.datanodes()}


async def racks_of(fs: Client, path: str) -> list[set[str]]:
    """The locations of each block group's replicas."""
    where = await places(fs)
    return [{where[r.datanode_id] for r in e.replicas} for e in (await fs.blocks(path)).extents]


async def write(fs: Client, count: int, blocks: int, replication: int) -> dict[str, bytes]:
    """`count` files of `blocks` blocks (and a bit)."""
    contents = {f"/f{k}": os.urandom(blocks * BS + k) for k in range(count)}
    for path, data in contents.items():
        await fs.write_file(path, data, replication=replication)
    return contents


async def test_replicas_span_both_racks_and_a_whole_rack_can_go(racks: HealCluster) -> None:
    async with heal_client(racks) as fs:
        assert sorted((await places(fs)).values()) == [RACK_A, RACK_A, RACK_B, RACK_B]
        contents = await write(fs, 8, 6, replication=2)
        await fs.write_file("/single", os.urandom(3 * BS), replication=1)
        for path in contents:
            assert all(r == {RACK_A, RACK_B} for r in await racks_of(fs, path)), path

        # setrep adds the second replica in the other rack.
        await fs.setrep("/single", 2, wait=True, poll=0.1)
        assert all(r == {RACK_A, RACK_B} for r in await racks_of(fs, "/single"))
        contents["/single"] = await fs.read_file("/single")

        # A decommissioned datanode's replicas move within its rack (the other holds one).
        drained = next(d for d, p in (await places(fs)).items() if p == RACK_A)
        await fs.decommission(drained)

        async def decommissioned() -> bool:
            states = {d.datanode_id: d.state for d in await fs.datanodes()}
            return states[drained] is DatanodeState.DECOMMISSIONED

        await eventually(decommissioned, "decommissioned", timeout=60, interval=0.1)
        for path in contents:
            assert all(r == {RACK_A, RACK_B} for r in await racks_of(fs, path)), path
        await fs.recommission(drained)

        # Rack A goes, both its datanodes at once: every file reads back whole.
        lost = [d for d in racks.datanodes if (await places(fs))[d.datanode_id] == RACK_A]
        for datanode in lost:
            datanode.kill9()
        for path, data in contents.items():
            assert await fs.read_file(path) == data, path
        # The copies go to the only rack left, and are whole again there...
        await eventually(lambda: fully_replicated(fs, list(contents)), "re-replicated", timeout=60)
        # ...until rack A returns: then each group has a replica there again, copied
        # before one in rack B is dropped.
        for datanode in lost:
            datanode.start()

        async def spread_again() -> bool:
            spans = [r for path in contents for r in await racks_of(fs, path)]
            return all(r == {RACK_A, RACK_B} for r in spans) and await fully_replicated(
                fs, list(contents)
            )

        await eventually(spread_again, "both racks again", timeout=90, interval=0.2)
        summary = await fsck_summary(fs)
        assert (summary.mis_replicated_blocks, summary.under_replicated_blocks) == (0, 0)
        for path, data in contents.items():
            assert await fs.read_file(path) == data, path


async def test_fsck_reports_groups_in_one_rack_until_a_new_rack_gets_their_copies(
    one_rack: HealCluster,
) -> None:
    async with heal_client(one_rack) as fs:
        contents = await write(fs, 3, 3, replication=2)
        summary = await fsck_summary(fs)
        assert summary.mis_replicated_blocks == 0  # one location: as spread as it can be

        # A datanode in a second rack whose copies run at two blocks a second.
        one_rack.add_datanode("dn-b", RACK_B, {"PFS_DATANODE_REPLICATION_BANDWIDTH": "128K"})
        never_below = asyncio.create_task(_watch_live_replicas(fs, list(contents), 2))
        try:

            async def reported() -> bool:
                return (await fsck_summary(fs)).mis_replicated_blocks > 0

            await eventually(reported, "mis-replicated blocks in fsck", timeout=20, interval=0.1)
            flagged = [
                item
                async for item in fs.fsck("/", all_files=True)
                if isinstance(item, FsckFile) and item.count("mis_replicated")
            ]
            assert flagged

            async def mended() -> bool:
                if (await fsck_summary(fs)).mis_replicated_blocks:
                    return False
                spans = [r for path in contents for r in await racks_of(fs, path)]
                return all(r == {RACK_A, RACK_B} for r in spans)

            await eventually(mended, "groups in both racks", timeout=90, interval=0.2)
            assert await fully_replicated(fs, list(contents))
        finally:
            never_below.cancel()
            lowest = await asyncio.gather(never_below, return_exceptions=True)
        assert not isinstance(lowest[0], AssertionError), lowest[0]
        for path, data in contents.items():
            assert await fs.read_file(path) == data, path


async def _watch_live_replicas(fs: Client, paths: list[str], replication: int) -> None:
    """Fail if any block group of `paths` has fewer than `replication` live replicas."""
    while True:
        for path in paths:
            for extent in (await fs.blocks(path)).extents:
                assert extent.live_replicas >= replication, (path, extent)
        await asyncio.sleep(0.05)
