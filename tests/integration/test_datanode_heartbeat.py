"""Datanode processes against a scripted registry: the heartbeat state machine (work
in, reports out at least once, an early heartbeat when a copy ends, registering again
when forgotten), copy tasks between two datanodes, cancellation, the scrub and
verifications reported through heartbeats, and the datanode's metrics.

The registry is a real gRPC server speaking the DatanodeRegistry protocol from this
test, so that each step of the conversation can be chosen and observed; the namenode's
own side is tested where it lives.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import grpc
import pytest

from loadtests.harness import scrape as scrape_metrics
from plasmafs.core import tickets
from plasmafs.core.errors import NotFoundError
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.proto import datanode_pb2_grpc as dpb_grpc
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import abort_with
from plasmafs.local.postgres import free_port
from tests.support.cluster import DatanodeProcess

BS = 64 * 1024
CAPACITY = 128 * BS


class Registry(pb_grpc.DatanodeRegistryServicer):
    """A namenode's registry side, scripted by the test."""

    def __init__(self, heartbeat_ms: int) -> None:
        self.secret = os.urandom(32)
        self.heartbeat_ms = heartbeat_ms
        self.ids: dict[str, int] = {}  # volume identity -> datanode id
        self.next_id = 1
        self.registrations: list[pb.RegisterRequest] = []
        self.beats: list[pb.HeartbeatRequest] = []  # answered or not
        self.replies: dict[int, list[pb.HeartbeatReply]] = {}  # next replies, by datanode
        self.fail_when: Callable[[pb.HeartbeatRequest], bool] = lambda _: False
        self.used: dict[int, list[tuple[int, int]]] = {}
        self.changed = asyncio.Condition()

    async def Register(
        self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterReply:
        if request.identity not in self.ids:
            self.ids[request.identity] = self.next_id
            self.next_id += 1
        self.registrations.append(request)
        await self._changed()
        return pb.RegisterReply(
            datanode_id=self.ids[request.identity],
            ticket_secret=self.secret,
            heartbeat_ms=self.heartbeat_ms,
        )

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        self.beats.append(request)
        await self._changed()
        if self.ids.get(request.identity) != request.datanode_id:
            await abort_with(context, NotFoundError("not registered; register again"))
        if self.fail_when(request):
            self.fail_when = lambda _: False
            await context.abort(grpc.StatusCode.UNAVAILABLE, "scripted failure")
        queue = self.replies.get(request.datanode_id)
        return queue.pop(0) if queue else pb.HeartbeatReply()

    async def UsedBlocks(
        self, request: pb.UsedBlocksRequest, context: grpc.aio.ServicerContext
    ) -> pb.UsedBlocksReply:
        ranges = [r for r in self.used.get(request.datanode_id, []) if r[0] >= request.after]
        return pb.UsedBlocksReply(
            ranges=[pb.BlockRange(block_start=s, block_count=n) for s, n in ranges]
        )

    async def _changed(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def forget(self, identity: str) -> None:
        """Forget a datanode: its heartbeats get NOT_FOUND; it gets a new id."""
        del self.ids[identity]

    def reply(self, datanode_id: int, reply: pb.HeartbeatReply) -> None:
        """Answer the datanode's next heartbeat with `reply`."""
        self.replies.setdefault(datanode_id, []).append(reply)

    async def beat(
        self, condition: Callable[[pb.HeartbeatRequest], bool], timeout: float = 60
    ) -> pb.HeartbeatRequest:
        """Wait for a heartbeat (from now on) that satisfies `condition`."""
        seen = len(self.beats)

        def found() -> pb.HeartbeatRequest | None:
            return next((b for b in self.beats[seen:] if condition(b)), None)

        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(lambda: found() is not None)
        beat = found()
        assert beat is not None
        return beat

    def ticket(self, datanode_id: int, start: int, count: int, write: bool) -> dpb.Ticket:
        return tickets.sign(self.secret, datanode_id, start, count, write=write, ttl_seconds=600)


async def serve_registry(address: str = "127.0.0.1:0") -> tuple[grpc.aio.Server, Registry, str]:
    """A scripted registry (heartbeats every 200 ms) serving on `address`."""
    servicer = Registry(heartbeat_ms=200)
    server = grpc.aio.server()
    pb_grpc.add_DatanodeRegistryServicer_to_server(servicer, server)
    port = server.add_insecure_port(address)
    await server.start()
    return server, servicer, f"127.0.0.1:{port}"


@pytest.fixture
async def registry() -> AsyncIterator[tuple[Registry, str]]:
    """The scripted registry and its address."""
    server, servicer, address = await serve_registry()
    yield servicer, address
    await server.stop(0)


async def start_datanode(path: Path, registry: str, **env: str) -> DatanodeProcess:
    """Start a plaintext datanode process (in a thread: the scripted registry answers on
    this loop)."""
    settings = {f"PFS_DATANODE_{k.upper()}": v for k, v in env.items()}
    node = DatanodeProcess(path, registry, CAPACITY, BS, env=settings, tls=False)
    return await asyncio.to_thread(node.start)


async def datanode_id(node: DatanodeProcess) -> int:
    """The id the datanode says it has."""
    return await asyncio.to_thread(lambda: node.datanode_id)


@pytest.fixture
def datanodes(tmp_path: Path) -> Iterator[list[DatanodeProcess]]:
    """Datanodes a test starts; stopped at its end."""
    started: list[DatanodeProcess] = []
    yield started
    for d in started:
        d.stop()


async def write_blocks(
    registry: Registry, node: DatanodeProcess, datanode_id: int, start: int, data: bytes
) -> None:
    count = len(data) // BS
    async with grpc.aio.insecure_channel(node.address) as channel:
        reply = await dpb_grpc.DatanodeStub(channel).WriteBlocks(
            iter(
                [
                    dpb.WriteChunk(
                        ticket=registry.ticket(datanode_id, start, count, write=True),
                        block_start=start,
                        block_count=count,
                        data=data,
                    )
                ]
            )
        )
    assert reply.bytes_written == len(data)


async def read_blocks(
    registry: Registry, node: DatanodeProcess, datanode_id: int, start: int, count: int
) -> bytes:
    async with grpc.aio.insecure_channel(node.address) as channel:
        call = dpb_grpc.DatanodeStub(channel).ReadBlocks(
            dpb.ReadRequest(
                ticket=registry.ticket(datanode_id, start, count, write=False),
                block_start=start,
                block_count=count,
            )
        )
        return b"".join([chunk.data async for chunk in call])


def identity(node: DatanodeProcess) -> str:
    import json

    return str(json.loads((node.volume / "volume.json").read_text())["identity"])


def flip(node: DatanodeProcess, block: int) -> None:
    with open(node.volume / "volume.data", "r+b") as f:
        f.seek(block * BS + 321)
        byte = f.read(1)
        f.seek(block * BS + 321)
        f.write(bytes([byte[0] ^ 0xFF]))


def copy_task(
    registry: Registry,
    task_id: int,
    source: DatanodeProcess,
    source_id: int,
    source_start: int,
    start: int,
    count: int,
) -> pb.CopyTask:
    return pb.CopyTask(
        task_id=task_id,
        source_datanode_id=source_id,
        source_address=source.address,
        source_ticket=registry.ticket(source_id, source_start, count, write=False),
        source_block_start=source_start,
        block_start=start,
        block_count=count,
    )


def scrape(port: int) -> dict[str, float]:
    """The metrics served on this host's `port`, as the benchmarks read them."""
    return scrape_metrics(f"127.0.0.1:{port}")


async def test_a_forgotten_datanode_registers_again_and_a_copy_end_beats_at_once(
    registry: tuple[Registry, str], datanodes: list[DatanodeProcess], tmp_path: Path
) -> None:
    reg, address = registry
    port = free_port()
    source = await start_datanode(tmp_path / "a", address)
    target = await start_datanode(tmp_path / "b", address, metrics_listen=f"127.0.0.1:{port}")
    datanodes += [source, target]
    source_id = await datanode_id(source)
    data = os.urandom(10 * BS)
    await write_blocks(reg, source, source_id, 20, data)

    # Forgotten: NOT_FOUND, then a new registration with a new id (and, here, a period
    # long enough that only an early heartbeat can carry what follows in time).
    reg.heartbeat_ms = 60_000
    reg.forget(identity(target))
    registrations = len(reg.registrations)
    reg.reply(
        reg.next_id, pb.HeartbeatReply(copies=[copy_task(reg, 1, source, source_id, 20, 50, 10)])
    )
    new_id = reg.next_id
    first = await reg.beat(lambda b: b.datanode_id == new_id)
    assert len(reg.registrations) > registrations
    assert await datanode_id(target) == new_id
    done = await reg.beat(lambda b: b.datanode_id == new_id and len(b.finished) > 0, timeout=30)
    assert first is not done
    [result] = done.finished
    assert (result.task_id, result.code, result.bytes) == (1, pb.OK, 10 * BS)
    assert 1 not in done.running
    # Tickets are checked against the new id.
    assert await read_blocks(reg, target, new_id, 50, 10) == data

    m = scrape(port)
    assert m["pfs_datanode_copies_started_total"] == 1
    assert m["pfs_datanode_copies_succeeded_total"] == 1
    assert m["pfs_datanode_copy_bytes_total"] == 10 * BS
    assert m["pfs_datanode_read_bytes_total"] == 10 * BS
    assert m["pfs_datanode_copies_running"] == 0
    assert m["process_cpu_seconds_total"] > 0


async def test_reports_are_sent_until_a_heartbeat_carrying_them_is_answered(
    registry: tuple[Registry, str], datanodes: list[DatanodeProcess], tmp_path: Path
) -> None:
    reg, address = registry
    source = await start_datanode(tmp_path / "a", address)
    target = await start_datanode(tmp_path / "b", address)
    datanodes += [source, target]
    source_id, target_id = await datanode_id(source), await datanode_id(target)
    await write_blocks(reg, source, source_id, 0, os.urandom(2 * BS))
    reg.fail_when = lambda b: len(b.finished) > 0
    reg.reply(target_id, pb.HeartbeatReply(copies=[copy_task(reg, 9, source, source_id, 0, 0, 2)]))
    await reg.beat(lambda b: len(b.finished) > 0)  # refused
    again = await reg.beat(lambda b: len(b.finished) > 0)  # sent again, answered
    assert [r.task_id for r in again.finished] == [9]
    later = await reg.beat(lambda b: b.datanode_id == target_id)
    assert list(later.finished) == [] and list(later.running) == []


async def test_a_cancelled_copy_leaves_running_and_reports_nothing(
    registry: tuple[Registry, str], datanodes: list[DatanodeProcess], tmp_path: Path
) -> None:
    reg, address = registry
    source = await start_datanode(tmp_path / "a", address)
    # one 4-block message a second: 40 blocks would take about 10 s
    target = await start_datanode(tmp_path / "b", address, replication_bandwidth="256K")
    datanodes += [source, target]
    source_id, target_id = await datanode_id(source), await datanode_id(target)
    await write_blocks(reg, source, source_id, 0, os.urandom(40 * BS))
    reg.reply(
        target_id,
        pb.HeartbeatReply(
            copies=[
                copy_task(reg, 3, source, source_id, 0, 0, 40),
                copy_task(reg, 4, source, source_id, 0, 40, 40),
                copy_task(reg, 5, source, source_id, 0, 80, 40),  # queued: 2 streams
            ]
        ),
    )
    running = await reg.beat(lambda b: len(b.running) == 3)
    assert sorted(running.running) == [3, 4, 5]
    reg.reply(target_id, pb.HeartbeatReply(cancel=[3, 4, 5]))
    await reg.beat(lambda b: b.datanode_id == target_id and len(b.running) == 0)
    log = (tmp_path / "b" / "datanode.log").read_text()
    assert "copy task 3 cancelled; its writes have stopped" in log
    assert "copy task 5 cancelled before it started" in log
    assert all(len(b.finished) == 0 for b in reg.beats)


async def test_the_scrub_and_verifications_report_bad_blocks(
    registry: tuple[Registry, str], datanodes: list[DatanodeProcess], tmp_path: Path
) -> None:
    reg, address = registry
    port = free_port()
    node = await start_datanode(
        tmp_path / "a",
        address,
        scrub_bandwidth="4M",
        scrub_pause="0.2",
        metrics_listen=f"127.0.0.1:{port}",
    )
    datanodes.append(node)
    node_id = await datanode_id(node)
    await write_blocks(reg, node, node_id, 0, os.urandom(16 * BS))
    reg.used[node_id] = [(0, 8), (10, 6)]
    flip(node, 3)
    flip(node, 9)  # not used: the scrub leaves it alone
    beat = await reg.beat(lambda b: len(b.corrupt) > 0)
    assert [(c.block_start, c.block_count) for c in beat.corrupt] == [(3, 1)]
    assert beat.corrupt[0].reason.startswith("scrub")

    reg.reply(node_id, pb.HeartbeatReply(verify=[pb.BlockRange(block_start=8, block_count=500)]))
    beat = await reg.beat(lambda b: len(b.verified) > 0)
    assert [(v.block_start, v.block_count) for v in beat.verified] == [(8, 500)]
    assert (9, 1) in [(c.block_start, c.block_count) for c in beat.corrupt]

    m = scrape(port)
    assert m["pfs_datanode_scrub_passes_total"] >= 1
    assert m["pfs_datanode_scrub_pass_blocks"] == 14
    assert m["pfs_datanode_corrupt_blocks_total"] >= 2
    assert m["pfs_datanode_written_bytes_total"] == 16 * BS


async def test_a_datanode_outlives_a_namenode_restart_and_registers_again(
    datanodes: list[DatanodeProcess], tmp_path: Path
) -> None:
    server, reg, address = await serve_registry()
    node = await start_datanode(tmp_path / "a", address)
    datanodes.append(node)
    await write_blocks(reg, node, await datanode_id(node), 0, b"x" * BS)
    await reg.beat(lambda b: True)
    await server.stop(0)
    log = tmp_path / "a" / "datanode.log"
    async with asyncio.timeout(60):
        while "heartbeat failed" not in log.read_text():
            await asyncio.sleep(0.05)
    # The same address, a namenode that knows nothing (and another secret).
    server, reg, _ = await serve_registry(address)
    try:
        async with asyncio.timeout(60), reg.changed:
            await reg.changed.wait_for(lambda: len(reg.registrations) > 0)
        beat = await reg.beat(lambda b: True)
        assert beat.datanode_id == 1
        assert [r.identity for r in reg.registrations] == [identity(node)]
        assert beat.identity == identity(node)
        assert await read_blocks(reg, node, 1, 0, 1) == b"x" * BS
        assert "the namenode answers again" in log.read_text()
    finally:
        await server.stop(0)
