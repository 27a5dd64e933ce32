"""Self-healing replication with real processes: a namenode with short liveness
thresholds and three datanodes; datanodes killed, corrupted, drained and returning."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plasmafs.client import Client, ReplicaState
from plasmafs.client.admin import FsckSummary
from plasmafs.client.errors import BusyError, NoSpaceError
from tests.cluster import DatanodeProcess, NamenodeProcess

BS = 64 * 1024
CAPACITY = 512 * BS
LOST_AFTER = 2.0
NAMENODE_ENV = {
    "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BS),
    "PFS_NAMENODE_DATANODE_DEAD_AFTER": "1",
    "PFS_NAMENODE_HEARTBEAT_MS": "100",
    "PFS_NAMENODE_REPLICA_LOST_AFTER": str(LOST_AFTER),
    "PFS_NAMENODE_REPLICATION_SCAN_INTERVAL": "3",
    "PFS_NAMENODE_REPLICATION_CHECK_INTERVAL": "0.2",
}
DATANODE_ENV = {"PFS_DATANODE_SCRUB_PAUSE": "0.5", "PFS_DATANODE_SCRUB_BANDWIDTH": "64M"}


@dataclass
class HealCluster:
    """A namenode and three datanodes started by the test."""

    namenode: NamenodeProcess
    datanodes: list[DatanodeProcess]
    workdir: Path

    def add_datanode(self, name: str) -> DatanodeProcess:
        """Start one more datanode on a new volume."""
        dn = DatanodeProcess(
            self.workdir / name, self.namenode.address, CAPACITY, BS, env=dict(DATANODE_ENV)
        ).start()
        self.datanodes.append(dn)
        return dn


@pytest.fixture
def heal(dsn: str, tmp_path: Path) -> Iterator[HealCluster]:
    """A namenode that declares replicas lost after 2 s, and three datanodes."""
    namenode = NamenodeProcess(dsn, tmp_path, env=dict(NAMENODE_ENV)).start()
    cluster = HealCluster(namenode, [], tmp_path)
    try:
        for k in range(3):
            cluster.add_datanode(f"dn{k + 1}")
        yield cluster
    finally:
        for d in cluster.datanodes:
            d.stop()
        namenode.stop()


@pytest.fixture
async def client(heal: HealCluster) -> AsyncIterator[Client]:
    """A client of the cluster (local reads off: the tests corrupt volumes on disk)."""
    fs = Client(heal.namenode.address, local_reads=False)
    await fs.connection()
    yield fs
    await fs.close()


async def wait_until(
    condition: Callable[[], Awaitable[bool]], timeout: float = 60.0, what: str = ""
) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what or condition}")
        await asyncio.sleep(0.1)


async def fully_replicated(fs: Client, paths: list[str], avoid: int | None = None) -> bool:
    """Every extent of every file has exactly its replication in live replicas, and
    none on datanode `avoid`."""
    for path in paths:
        blocks = await fs.blocks(path)
        for extent in blocks.extents:
            if extent.live_replicas != blocks.replication or len(extent.replicas) != (
                blocks.replication
            ):
                return False
            if avoid is not None and any(r.datanode_id == avoid for r in extent.replicas):
                return False
    return True


async def fsck_summary(fs: Client, path: str = "/") -> FsckSummary:
    """The summary fsck ends with."""
    summary = None
    async for item in fs.fsck(path):
        if isinstance(item, FsckSummary):
            summary = item
    assert summary is not None
    return summary


async def assert_healthy(fs: Client) -> None:
    """fsck finds nothing missing, corrupt or under-replicated, and the records agree."""
    summary = await fsck_summary(fs)
    assert list(summary.record_errors) == []
    assert (summary.under_replicated_blocks, summary.missing_blocks, summary.corrupt_blocks) == (
        0,
        0,
        0,
    )


async def write_files(fs: Client, replication: int) -> dict[str, bytes]:
    """A few files of several block groups each."""
    contents = {
        "/a": os.urandom(5 * BS + 123),
        "/b": os.urandom(40 * BS),
        "/c": os.urandom(1),
    }
    for path, data in contents.items():
        await fs.write_file(path, data, replication=replication)
    return contents


def flip_byte(datanode: DatanodeProcess, block: int, at: int = 100) -> None:
    """Change one byte of a block in the datanode's volume file, behind its back."""
    with open(datanode.volume / "volume.data", "r+b") as f:
        f.seek(block * BS + at)
        byte = f.read(1)
        f.seek(block * BS + at)
        f.write(bytes([byte[0] ^ 0xFF]))


async def test_a_datanode_killed_for_good_is_replaced(heal: HealCluster, client: Client) -> None:
    contents = await write_files(client, replication=2)
    vid = (await client.blocks("/b")).extents[0].replicas[0].datanode_id
    victim = next(d for d in heal.datanodes if d.datanode_id == vid)
    victim.kill9()

    async def marked(state: ReplicaState) -> bool:
        blocks = await client.blocks("/b")
        return any(r.state is state for e in blocks.extents for r in e.replicas)

    await wait_until(lambda: marked(ReplicaState.SUSPECT), 10, "suspect replicas")

    async def counted() -> bool:
        return (await client.fsstat()).under_replicated_blocks > 0

    await wait_until(counted, 10, "under-replicated blocks counted")
    await wait_until(lambda: marked(ReplicaState.LOST), 10, "lost replicas")
    await wait_until(
        lambda: fully_replicated(client, list(contents), avoid=vid), 60, "re-replication"
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
    extent = (await client.blocks("/x")).extents[0]
    bad = extent.replicas[0]
    holder = next(d for d in heal.datanodes if d.datanode_id == bad.datanode_id)
    flip_byte(holder, bad.block_start + 2)
    # Every read returns the right bytes; reads that hit the bad replica report it.
    for _ in range(4):
        assert await client.read_file("/x") == data

    async def replaced() -> bool:
        blocks = await client.blocks("/x")
        rows = {(r.datanode_id, r.block_start) for e in blocks.extents for r in e.replicas}
        return (bad.datanode_id, bad.block_start) not in rows and await fully_replicated(
            client, ["/x"]
        )

    await wait_until(replaced, 60, "the corrupt replica replaced")
    assert await client.read_file("/x") == data
    await assert_healthy(client)


async def test_the_scrub_finds_a_flipped_byte_and_it_is_repaired(
    heal: HealCluster, client: Client
) -> None:
    data = os.urandom(3 * BS)
    await client.write_file("/s", data, replication=2)
    bad = (await client.blocks("/s")).extents[0].replicas[1]
    holder = next(d for d in heal.datanodes if d.datanode_id == bad.datanode_id)
    flip_byte(holder, bad.block_start + 1)

    async def replaced() -> bool:
        blocks = await client.blocks("/s")
        rows = {(r.datanode_id, r.block_start) for e in blocks.extents for r in e.replicas}
        return (bad.datanode_id, bad.block_start) not in rows and await fully_replicated(
            client, ["/s"]
        )

    await wait_until(replaced, 60, "the scrub's find repaired")
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

    await wait_until(decommissioned, 60, "decommissioned")
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

    await wait_until(drained_onto_the_last, 60, "drained onto the last datanode")
    assert await client.read_file("/one")


async def test_a_returning_datanode_reconciles(heal: HealCluster, client: Client) -> None:
    contents = await write_files(client, replication=2)
    victim = heal.datanodes[2]
    vid = victim.datanode_id
    victim.stop()
    await wait_until(
        lambda: fully_replicated(client, list(contents), avoid=vid), 60, "re-replication"
    )
    victim.start()  # its replicas were replaced: the blocks held for it are free again

    async def back() -> bool:
        return any(d.datanode_id == vid and d.alive for d in await client.datanodes())

    await wait_until(back, 30, "the datanode back")
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
    await wait_until(
        lambda: fully_replicated(client, list(contents), avoid=vid), 60, "re-replication"
    )
    left = await client.remove_datanode(vid)
    assert vid not in [d.datanode_id for d in left]
    await assert_healthy(client)
