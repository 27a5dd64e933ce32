"""Faults during re-replication, with real processes and copies slowed to 1 MiB/s so
that they are caught mid-way: the source or the target dies, the namenode restarts,
the file is overwritten or removed. Each ends with correct block lists and records
that agree (no block leaked or claimed twice: fsck's checks)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plasmafs.client import Client
from tests.support.heal_cluster import (
    BS,
    HealCluster,
    assert_healthy,
    copies_running,
    fully_replicated,
    heal_client,
    heal_cluster,
    reconnected,
)
from tests.support.waiting import eventually

# Each test kills, restarts or changes something under a copy: minutes in all.
pytestmark = pytest.mark.slow
SLOW = {"PFS_DATANODE_REPLICATION_BANDWIDTH": "1M"}


@pytest.fixture
def heal(dsn: str, tmp_path: Path) -> Iterator[HealCluster]:
    """Three datanodes whose copies run at 1 MiB/s."""
    with heal_cluster(dsn, tmp_path, SLOW) as cluster:
        yield cluster


@pytest.fixture
async def client(heal: HealCluster) -> AsyncIterator[Client]:
    """A client of the cluster."""
    async with heal_client(heal) as fs:
        yield fs


@dataclass
class CopyUnderway:
    """A file whose replica on `lost` is being copied from `source` to `target`."""

    data: bytes
    lost: int
    source: int
    target: int


async def copy_underway(heal: HealCluster, fs: Client) -> CopyUnderway:
    """Write a 40-block file at -rep 2, kill one holder for good and wait until the copy
    that replaces it runs (it takes about 2.5 s)."""
    data = os.urandom(40 * BS)
    await fs.write_file("/big", data, replication=2)
    holders = [r.datanode_id for r in (await fs.blocks("/big")).extents[0].replicas]
    lost, source = holders
    target = next(d.datanode_id for d in heal.datanodes if d.datanode_id not in holders)
    heal.datanode(lost).kill9()
    await eventually(lambda: copies_running(fs), "a copy running", timeout=30, interval=0.1)
    return CopyUnderway(data, lost, source, target)


async def test_the_source_dying_mid_copy(heal: HealCluster, client: Client) -> None:
    copy = await copy_underway(heal, client)
    heal.datanode(copy.source).kill9()

    async def missing() -> bool:
        return (await client.fsstat()).missing_blocks > 0

    await eventually(missing, "the block counted missing", timeout=30, interval=0.1)
    heal.datanode(copy.source).start()
    await eventually(
        lambda: fully_replicated(client, ["/big"], avoid=copy.lost),
        "re-replication",
        timeout=60,
        interval=0.1,
    )
    assert await client.read_file("/big") == copy.data
    await assert_healthy(client)


async def test_the_target_dying_mid_copy(heal: HealCluster, client: Client) -> None:
    copy = await copy_underway(heal, client)
    heal.datanode(copy.target).kill9()

    async def nothing_running() -> bool:
        return not await copies_running(client)

    await eventually(nothing_running, "the copy given up", timeout=30, interval=0.1)
    heal.datanode(copy.target).start()
    await eventually(
        lambda: fully_replicated(client, ["/big"], avoid=copy.lost),
        "re-replication",
        timeout=60,
        interval=0.1,
    )
    assert await client.read_file("/big") == copy.data
    await assert_healthy(client)


async def test_the_namenode_restarting_mid_copy(heal: HealCluster, client: Client) -> None:
    copy = await copy_underway(heal, client)
    heal.namenode.kill9()
    heal.namenode.start()  # the same address: the datanodes and the client reconnect
    await reconnected(client)
    await eventually(
        lambda: fully_replicated(client, ["/big"], avoid=copy.lost),
        "re-replication",
        timeout=60,
        interval=0.1,
    )
    assert await client.read_file("/big") == copy.data
    await assert_healthy(client)


async def test_the_file_overwritten_mid_copy(heal: HealCluster, client: Client) -> None:
    copy = await copy_underway(heal, client)
    new = os.urandom(30 * BS + 7)
    await client.write_file("/big", new, replication=2)

    async def settled() -> bool:
        return not await copies_running(client) and await fully_replicated(client, ["/big"])

    await eventually(settled, "the copy discarded", timeout=60, interval=0.1)
    assert await client.read_file("/big") == new
    blocks = await client.blocks("/big")
    assert all(r.datanode_id != copy.lost for e in blocks.extents for r in e.replicas)
    await assert_healthy(client)


async def test_the_file_removed_mid_copy(heal: HealCluster, client: Client) -> None:
    await copy_underway(heal, client)
    await client.unlink("/big")

    async def settled() -> bool:
        return not await copies_running(client)

    await eventually(settled, "the copy discarded", timeout=60, interval=0.1)
    await assert_healthy(client)
    assert (await client.fsstat()).files == 0
