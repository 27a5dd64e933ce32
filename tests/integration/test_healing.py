"""Self-healing replication with real processes: datanodes killed, corrupted, drained
and returning."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client, ReplicaState
from plasmafs.core.errors import BusyError, NoSpaceError
from tests.support.heal_cluster import (
    BS,
    HealCluster,
    assert_healthy,
    flip_byte,
    fully_replicated,
    heal_client,
    heal_cluster,
    replaced,
    write_files,
)
from tests.support.waiting import eventually


@pytest.fixture
def heal(dsn: str, tmp_path: Path) -> Iterator[HealCluster]:
    """A namenode that declares replicas lost after 2 s, and three datanodes."""
    with heal_cluster(dsn, tmp_path) as cluster:
        yield cluster


@pytest.fixture
async def client(heal: HealCluster) -> AsyncIterator[Client]:
    """A client of the cluster."""
    async with heal_client(heal) as fs:
        yield fs


async def test_a_datanode_killed_for_good_is_replaced(heal: HealCluster, client: Client) -> None:
    contents = await write_files(client, replication=2)
    vid = (await client.blocks("/b")).extents[0].replicas[0].datanode_id
    victim = next(d for d in heal.datanodes if d.datanode_id == vid)
    victim.kill9()

    async def marked(state: ReplicaState) -> bool:
        blocks = await client.blocks("/b")
        return any(r.state is state for e in blocks.extents for r in e.replicas)

    await eventually(
        lambda: marked(ReplicaState.SUSPECT), "suspect replicas", timeout=10, interval=0.1
    )

    async def counted() -> bool:
        return (await client.fsstat()).under_replicated_blocks > 0

    await eventually(counted, "under-replicated blocks counted", timeout=10, interval=0.1)

    async def lost_or_replaced() -> bool:
        # A lost replica is copied anew at once: the copy may already have replaced it
        # (the victim is gone from the list) by the time a poll looks.
        blocks = await client.blocks("/b")
        replicas = [r for e in blocks.extents for r in e.replicas]
        return any(r.state is ReplicaState.LOST for r in replicas) or all(
            r.datanode_id != vid for r in replicas
        )

    await eventually(lost_or_replaced, "lost replicas", timeout=10, interval=0.1)
    await eventually(
        lambda: fully_replicated(client, list(contents), avoid=vid),
        "re-replication",
        timeout=60,
        interval=0.1,
    )
    for path, data in contents.items():
        assert await client.read_file(path) == data
    await assert_healthy(client)
    stat = await client.fsstat()
    assert (stat.under_replicated_blocks, stat.missing_blocks) == (0, 0)


async def test_a_corrupt_replica_found_by_a_read_is_replaced(
    heal: HealCluster, client: Client
) -> None:
    data = os.urandom(6 * BS)
    await client.write_file("/x", data, replication=2)
    bad = (await client.blocks("/x")).extents[0].replicas[0]
    flip_byte(heal.datanode(bad.datanode_id), bad.block_start + 2)
    # Every read returns the right bytes; reads that hit the bad replica report it.
    for _ in range(4):
        assert await client.read_file("/x") == data

    await eventually(
        lambda: replaced(client, "/x", bad),
        "the corrupt replica replaced",
        timeout=60,
        interval=0.1,
    )
    assert await client.read_file("/x") == data
    await assert_healthy(client)


async def test_the_scrub_finds_a_flipped_byte_and_it_is_repaired(
    heal: HealCluster, client: Client
) -> None:
    data = os.urandom(3 * BS)
    await client.write_file("/s", data, replication=2)
    bad = (await client.blocks("/s")).extents[0].replicas[1]
    flip_byte(heal.datanode(bad.datanode_id), bad.block_start + 1)
    await eventually(
        lambda: replaced(client, "/s", bad), "the scrub's find repaired", timeout=60, interval=0.1
    )
    assert await client.read_file("/s") == data
    await assert_healthy(client)


async def test_setrep_adds_and_removes_copies(heal: HealCluster, client: Client) -> None:
    data = os.urandom(10 * BS + 5)
    await client.write_file("/r", data, replication=1)
    await client.setrep("/r", 3, wait=True)
    assert await fully_replicated(client, ["/r"])
    assert len((await client.blocks("/r")).extents[0].replicas) == 3
    await client.setrep("/r", 1, wait=True)
    assert await fully_replicated(client, ["/r"])
    assert await client.read_file("/r") == data
    with pytest.raises(NoSpaceError):
        await client.setrep("/r", 4)
    await assert_healthy(client)


async def test_decommission_drains_a_datanode_under_reads(
    heal: HealCluster, client: Client
) -> None:
    contents = await write_files(client, replication=2)
    drained = heal.datanodes[1].datanode_id
    stop = asyncio.Event()

    async def keep_reading() -> int:
        reads = 0
        while not stop.is_set():
            for path, data in contents.items():
                assert await client.read_file(path) == data
                reads += 1
        return reads

    reader = asyncio.create_task(keep_reading())
    await client.decommission(drained)

    async def decommissioned() -> bool:
        states = {d.datanode_id: d.state.name for d in await client.datanodes()}
        return states[drained] == "DECOMMISSIONED"

    await eventually(decommissioned, "decommissioned", timeout=60, interval=0.1)
    stop.set()
    assert await reader > 0
    assert await fully_replicated(client, list(contents), avoid=drained)
    await assert_healthy(client)
    # Nothing new goes to it; recommission puts it back in service.
    await client.write_file("/new", os.urandom(20 * BS), replication=2)
    blocks = await client.blocks("/new")
    assert all(r.datanode_id != drained for e in blocks.extents for r in e.replicas)
    await client.recommission(drained)
    states = {d.datanode_id: d.state.name for d in await client.datanodes()}
    assert states[drained] == "LIVE"


async def test_decommissioning_the_last_datanodes_holding_data_is_refused(
    heal: HealCluster, client: Client
) -> None:
    await client.write_file("/one", os.urandom(BS), replication=1)
    ids = [d.datanode_id for d in heal.datanodes]
    await client.decommission(ids[0])
    await client.decommission(ids[1])
    with pytest.raises(BusyError, match="no other live datanode"):
        await client.decommission(ids[2])

    async def drained_onto_the_last() -> bool:
        replicas = (await client.blocks("/one")).extents[0].replicas
        return [(r.datanode_id, r.state) for r in replicas] == [(ids[2], ReplicaState.LIVE)]

    await eventually(
        drained_onto_the_last, "drained onto the last datanode", timeout=60, interval=0.1
    )
    assert await client.read_file("/one")


async def test_a_returning_datanode_reconciles(heal: HealCluster, client: Client) -> None:
    contents = await write_files(client, replication=2)
    victim = heal.datanodes[2]
    vid = victim.datanode_id
    victim.stop()
    await eventually(
        lambda: fully_replicated(client, list(contents), avoid=vid),
        "re-replication",
        timeout=60,
        interval=0.1,
    )
    victim.start()  # its replicas were replaced: the blocks held for it are free again

    async def back() -> bool:
        return any(d.datanode_id == vid and d.alive for d in await client.datanodes())

    await eventually(back, "the datanode back", timeout=30, interval=0.1)
    await assert_healthy(client)
    free_before = (await client.fsstat()).used_bytes
    # The returned datanode takes new data and its space was not leaked.
    await client.write_file("/after", os.urandom(30 * BS), replication=3)
    assert await fully_replicated(client, ["/after"])
    assert (await client.fsstat()).used_bytes > free_before
    for path, data in contents.items():
        assert await client.read_file(path) == data


async def test_a_dead_datanode_can_be_removed_once_replaced(
    heal: HealCluster, client: Client
) -> None:
    contents = await write_files(client, replication=2)
    victim = heal.datanodes[0]
    vid = victim.datanode_id
    with pytest.raises(BusyError, match="is live"):
        await client.remove_datanode(vid)
    victim.kill9()
    await eventually(
        lambda: fully_replicated(client, list(contents), avoid=vid),
        "re-replication",
        timeout=60,
        interval=0.1,
    )
    left = await client.remove_datanode(vid)
    assert vid not in [d.datanode_id for d in left]
    await assert_healthy(client)
