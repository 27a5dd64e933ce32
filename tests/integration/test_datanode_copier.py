"""Copy tasks between real datanodes: the copier of an in-process target volume pulls a
replica's blocks from the datanode process holding them, as re-replication does."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from plasmafs.client import Client
from plasmafs.core import tickets
from plasmafs.core.attributes import Extent, Replica
from plasmafs.core.errors import CorruptionError
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.datanode.copier import Copier
from plasmafs.datanode.inflight import InflightWrites
from plasmafs.datanode.ratelimit import RateLimit
from plasmafs.datanode.volume import Volume
from tests.conftest import DataCluster
from tests.support.cluster import DatanodeProcess, NamenodeProcess, trust_run_ca
from tests.support.waiting import eventually

BS = 64 * 1024


@dataclass
class Target:
    """An in-process target: a volume, its in-flight registry and a copier into it."""

    volume: Volume
    inflight: InflightWrites
    copier: Copier
    results: list[pb.CopyResult] = field(default_factory=list)
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def on_end(self, result: pb.CopyResult) -> None:
        self.results.append(result)
        self.ended.set()

    async def result(self, count: int = 1) -> list[pb.CopyResult]:
        """Wait until `count` tasks have ended."""
        while len(self.results) < count:
            self.ended.clear()
            await asyncio.wait_for(self.ended.wait(), 60)
        return self.results


@pytest.fixture
def io() -> Iterator[ThreadPoolExecutor]:
    """The target's I/O threads."""
    with ThreadPoolExecutor(4) as pool:
        yield pool


def make_target(
    path: Path, blocksize: int, blocks: int, io: ThreadPoolExecutor, **copier: object
) -> Target:
    volume = Volume.open(path, blocksize, blocks * blocksize, sync=True)
    inflight = InflightWrites()
    target = Target(volume, inflight, None)  # type: ignore[arg-type]
    options: dict[str, object] = {"bandwidth": RateLimit(0), "streams": 2, **copier}
    target.copier = Copier(
        volume,
        inflight,
        io,
        options["bandwidth"],  # type: ignore[arg-type]
        options["streams"],  # type: ignore[arg-type]
        target.on_end,
        trust_run_ca(),
    )
    return target


@pytest.fixture
async def target(tmp_path: Path, io: ThreadPoolExecutor) -> AsyncIterator[Target]:
    """A target volume of 256 blocks of 64 KiB."""
    t = make_target(tmp_path / "target", BS, 256, io)
    yield t
    await t.copier.close()
    t.volume.close()


def task(task_id: int, extent: Extent, block_start: int, **change: object) -> pb.CopyTask:
    """The copy task re-replication would give for the extent's first replica."""
    replica: Replica = extent.replicas[0]
    fields: dict[str, object] = {
        "task_id": task_id,
        "source_datanode_id": replica.datanode_id,
        "source_address": replica.address,
        "source_ticket": dpb.Ticket.FromString(replica.ticket),
        "source_block_start": replica.block_start,
        "block_start": block_start,
        "block_count": extent.block_count,
        **change,
    }
    return pb.CopyTask(**fields)  # type: ignore[arg-type]


def owner(extent: Extent) -> tuple[int, int, int] | None:
    """The owner the extent's tickets name for its first block (the copy's stamps)."""
    replica = extent.replicas[0]
    return tickets.owner_at(dpb.Ticket.FromString(replica.ticket), replica.block_start)


def padded(data: bytes, blocksize: int) -> bytes:
    return data + bytes(-len(data) % blocksize)


async def single_extent_file(dfs: Client, path: str, blocks: int) -> tuple[bytes, Extent]:
    data = os.urandom(blocks * BS - 123)
    await dfs.write_file(path, data, replication=1)
    extents = (await dfs.blocks(path)).extents
    assert len(extents) == 1
    return data, extents[0]


def node(cluster: DataCluster, datanode_id: int) -> DatanodeProcess:
    return next(d for d in cluster.datanodes if d.datanode_id == datanode_id)


async def test_a_copy_reproduces_the_source_blocks(
    dfs: Client, data_cluster: DataCluster, target: Target
) -> None:
    data, extent = await single_extent_file(dfs, "/f", 20)
    target.copier.submit(task(1, extent, block_start=100))
    [result] = await target.result()
    assert result.code == pb.OK, result.message
    assert result.bytes == 20 * BS
    assert target.volume.read_blocks(100, 20, owner(extent)) == padded(data, BS)
    with pytest.raises(CorruptionError, match="reused since"):  # stamped as the file's
        target.volume.read_blocks(100, 20, (999, 1, 0))
    assert target.copier.succeeded == 1 and target.copier.bytes == 20 * BS
    assert target.copier.active_ids() == [] and target.inflight.active == 0


async def test_a_corrupt_source_block_fails_the_copy(
    dfs: Client, data_cluster: DataCluster, target: Target
) -> None:
    _, extent = await single_extent_file(dfs, "/f", 12)
    replica = extent.replicas[0]
    source = node(data_cluster, replica.datanode_id)
    with open(source.volume / "volume.data", "r+b") as volume:  # noqa: ASYNC230
        at = (replica.block_start + 9) * BS + 77
        volume.seek(at)
        byte = volume.read(1)
        volume.seek(at)
        volume.write(bytes([byte[0] ^ 0xFF]))
    target.copier.submit(task(7, extent, block_start=0))
    [result] = await target.result()
    assert result.code == pb.ECORRUPT
    assert "checksum" in result.message
    assert result.bytes == 0  # nothing claimed copied
    assert target.copier.failed == 1


async def test_a_range_outside_the_volume_or_a_bad_ticket_fails_the_copy(
    dfs: Client, data_cluster: DataCluster, target: Target
) -> None:
    _, extent = await single_extent_file(dfs, "/f", 4)
    forged = dpb.Ticket.FromString(extent.replicas[0].ticket)
    forged.block_count += 1
    target.copier.submit(task(1, extent, block_start=254))
    target.copier.submit(task(2, extent, block_start=0, block_count=0))
    target.copier.submit(task(3, extent, block_start=0, source_ticket=forged))
    results = {r.task_id: r for r in await target.result(3)}
    assert results[1].code == pb.EINVAL and "outside" in results[1].message
    assert results[2].code == pb.EINVAL
    assert results[3].code == pb.ETICKET
    assert target.inflight.active == 0


async def test_streams_bound_the_copies_running_and_the_rest_wait(
    dfs: Client, data_cluster: DataCluster, tmp_path: Path, io: ThreadPoolExecutor
) -> None:
    data, extent = await single_extent_file(dfs, "/f", 8)
    t = make_target(tmp_path / "t", BS, 256, io, streams=1)
    try:
        for k in range(4):
            t.copier.submit(task(10 + k, extent, block_start=8 * k))
        t.copier.submit(task(10, extent, block_start=200))  # a repeated task: ignored
        assert t.copier.running == 1 and t.copier.queued == 3
        assert sorted(t.copier.active_ids()) == [10, 11, 12, 13]
        results = await t.result(4)
        assert [r.task_id for r in results] == [10, 11, 12, 13]  # in arrival order
        assert all(r.code == pb.OK for r in results)
        for k in range(4):
            assert t.volume.read_blocks(8 * k, 8, owner(extent)) == padded(data, BS)
        assert t.copier.started == 4
    finally:
        await t.copier.close()
        t.volume.close()


async def test_the_bandwidth_is_shared_by_all_copies(
    dfs: Client, data_cluster: DataCluster, tmp_path: Path, io: ThreadPoolExecutor
) -> None:
    _, extent = await single_extent_file(dfs, "/f", 16)
    clock = [0.0]

    async def sleep(seconds: float) -> None:
        clock[0] += seconds
        await asyncio.sleep(0)

    rate = 1024 * 1024
    limit = RateLimit(rate, clock=lambda: clock[0], sleep=sleep)
    t = make_target(tmp_path / "t", BS, 256, io, bandwidth=limit)
    try:
        t.copier.submit(task(1, extent, block_start=0))
        t.copier.submit(task(2, extent, block_start=100))
        results = await t.result(2)
        assert all(r.code == pb.OK for r in results)
        total = 2 * 16 * BS
        assert limit.taken == total == t.copier.bytes
        # every byte but the last message's waited for its share of the rate
        assert clock[0] >= (total - 4 * BS) / rate
        assert clock[0] <= total / rate
    finally:
        await t.copier.close()
        t.volume.close()


class Gate(RateLimit):
    """A byte budget the test opens: takes wait while the budget is spent."""

    def __init__(self, budget: int) -> None:
        super().__init__(0)
        self.budget = budget
        self.opened = asyncio.Event()
        self.waiting = asyncio.Event()

    async def take(self, nbytes: int) -> None:
        while self.taken + nbytes > self.budget and not self.opened.is_set():
            self.waiting.set()
            await self.opened.wait()
        await super().take(nbytes)


async def test_a_cancelled_copy_stops_writing_before_it_stops_being_listed(
    dfs: Client, data_cluster: DataCluster, tmp_path: Path, io: ThreadPoolExecutor
) -> None:
    _, extent = await single_extent_file(dfs, "/f", 40)
    gate = Gate(budget=8 * BS)
    t = make_target(tmp_path / "t", BS, 256, io, bandwidth=gate)
    try:
        t.copier.submit(task(5, extent, block_start=0))
        t.copier.submit(task(6, extent, block_start=100))
        t.copier.submit(task(7, extent, block_start=200))  # queued (2 streams)
        await asyncio.wait_for(gate.waiting.wait(), 60)
        assert t.inflight.active == 2
        t.copier.cancel([5, 6, 7, 99])
        assert t.copier.active_ids() == [5, 6]  # 7 was queued: gone at once
        await eventually(lambda: not t.copier.active_ids(), timeout=60.0, interval=0.01)
        written = t.copier.bytes
        assert t.inflight.active == 0  # no range registered: no write under way
        gate.opened.set()
        assert t.copier.cancelled == 3
        assert t.results == []  # a cancelled task has no result
        assert written <= 8 * BS and t.copier.bytes == written
    finally:
        await t.copier.close()
        t.volume.close()


async def test_a_source_killed_mid_copy_fails_it_unavailable(
    dsn: str, tmp_path: Path, io: ThreadPoolExecutor
) -> None:
    mib = 1024 * 1024
    namenode = NamenodeProcess(
        dsn,
        tmp_path,
        env={"PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(mib), "PFS_NAMENODE_HEARTBEAT_MS": "200"},
    ).start()
    source = DatanodeProcess(tmp_path / "dn", namenode.registry_address, 256 * mib, mib).start()
    fs = Client(namenode.address)
    gate = Gate(budget=2 * mib)
    t = make_target(tmp_path / "t", mib, 64, io, bandwidth=gate)
    try:
        await fs.write_file("/big", os.urandom(40 * mib), replication=1)
        [extent] = (await fs.blocks("/big")).extents  # more than the stream's window
        t.copier.submit(task(1, extent, block_start=0))
        await asyncio.wait_for(gate.waiting.wait(), 60)
        source.kill9()
        gate.opened.set()
        [result] = await t.result()
        assert result.code == pb.EUNAVAIL, result.message
        assert f"source datanode {extent.replicas[0].datanode_id}" in result.message
        assert t.inflight.active == 0
    finally:
        await t.copier.close()
        t.volume.close()
        await fs.close()
        source.stop()
        namenode.stop()
