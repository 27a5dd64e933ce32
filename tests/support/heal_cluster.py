"""What the healing tests share: a namenode with short liveness thresholds and three
datanodes started by the test, and waits on the replicas' states."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from plasmafs.client import Client, Replica
from plasmafs.client.admin import FsckSummary
from plasmafs.core.errors import ConnectionLostError, UnavailableError
from tests.support.cluster import DatanodeProcess, NamenodeProcess

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
    datanode_env: dict[str, str]
    by_id: dict[int, DatanodeProcess] = field(default_factory=dict)

    def add_datanode(
        self, name: str, location: str = "", env: dict[str, str] | None = None
    ) -> DatanodeProcess:
        """Start one more datanode on a new volume (in `location`, default the default
        location; `env`: more settings of its own)."""
        own = {**self.datanode_env, **(env or {})}
        if location:
            own["PFS_DATANODE_LOCATION"] = location
        dn = DatanodeProcess(
            self.workdir / name, self.namenode.registry_address, CAPACITY, BS, env=own
        ).start()
        self.datanodes.append(dn)
        self.by_id[dn.datanode_id] = dn
        return dn

    def datanode(self, datanode_id: int) -> DatanodeProcess:
        """The process of a datanode id (known from its start: it may be dead now)."""
        return self.by_id[datanode_id]


@contextmanager
def heal_cluster(
    dsn: str,
    workdir: Path,
    datanode_env: dict[str, str] | None = None,
    locations: tuple[str, ...] = ("", "", ""),
) -> Iterator[HealCluster]:
    """A namenode that declares replicas lost after 2 s, and a datanode in each of
    `locations` ("": the default; three by default)."""
    namenode = NamenodeProcess(dsn, workdir, env=dict(NAMENODE_ENV)).start()
    cluster = HealCluster(namenode, [], workdir, {**DATANODE_ENV, **(datanode_env or {})})
    try:
        for k, location in enumerate(locations):
            cluster.add_datanode(f"dn{k + 1}", location)
        yield cluster
    finally:
        for d in cluster.datanodes:
            d.stop()
        namenode.stop()


@asynccontextmanager
async def heal_client(cluster: HealCluster) -> AsyncIterator[Client]:
    """A client of the cluster (local reads off: the tests corrupt volumes on disk)."""
    fs = Client(cluster.namenode.address, local_reads=False)
    await fs.connection()
    try:
        yield fs
    finally:
        await fs.close()


async def reconnected(fs: Client, timeout: float = 30.0) -> None:
    """Wait until the client reaches the namenode again (after its restart)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await fs.ping()
            return
        except (ConnectionLostError, UnavailableError):
            if time.monotonic() > deadline:
                raise
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


async def replaced(fs: Client, path: str, replica: Replica) -> bool:
    """The replica (a datanode's blocks) is no longer in the file's block list, and the
    file is fully replicated again."""
    blocks = await fs.blocks(path)
    rows = {(r.datanode_id, r.block_start) for e in blocks.extents for r in e.replicas}
    gone = (replica.datanode_id, replica.block_start) not in rows
    return gone and await fully_replicated(fs, [path])


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


async def copies_running(fs: Client) -> bool:
    """True while a datanode runs a copy."""
    return any(d.running_copies for d in await fs.datanodes())
