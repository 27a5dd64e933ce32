"""Namenode backpressure: a client that sends requests and stops reading the answers is
held back by HTTP/2 flow control once its connection has `max_inflight_per_session`
requests in flight, and the namenode's memory stays bounded meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from tests.support.cluster import NamenodeProcess, aio_channel, bearer

MAX_INFLIGHT = 64
FRAME_REQUESTS = 256
# Pings in a row during which neither the namenode took a request nor the client's
# write completed: each Ping is a turn of the namenode's event loop on the same HTTP/2
# connection, so a namenode still reading the stream would have taken some.
QUIET_PINGS = 300
# What the namenode may take beyond the bound: the responses the client's 64 KiB
# receive window holds (no bandwidth probing on the test's channel), one batch more.
HANDLED_LIMIT = MAX_INFLIGHT + 20_000
RSS_GROWTH_LIMIT_KIB = 64 * 1024
# The test's side: a receive window that stays at HTTP/2's initial 64 KiB.
TEST_CHANNEL = [("grpc.http2.bdp_probe", 0)]


@pytest.fixture
def small_namenode(dsn: str, tmp_path: Path) -> Iterator[NamenodeProcess]:
    """A namenode that lets a connection have MAX_INFLIGHT requests in flight."""
    process = NamenodeProcess(
        dsn, tmp_path, env={"PFS_NAMENODE_MAX_INFLIGHT_PER_SESSION": str(MAX_INFLIGHT)}
    ).start()
    yield process
    process.stop()


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


async def _handled(stub: pb_grpc.NamenodeStub) -> int:
    reply = await stub.Ping(pb.PingRequest(), timeout=30, metadata=bearer())
    return int(reply.requests.get("getattr", 0))


def _getattr_frame() -> pb.ClientFrame:
    frame = pb.ClientFrame()
    for k in range(FRAME_REQUESTS):
        request = frame.requests.add(id=k + 1, txn=0)
        request.getattr.ino = 1
    return frame


async def test_a_client_that_stops_reading_is_held_back(
    small_namenode: NamenodeProcess,
) -> None:
    assert small_namenode.proc is not None
    pid = small_namenode.proc.pid
    async with aio_channel(small_namenode.address, options=TEST_CHANNEL) as ch:
        stub = pb_grpc.NamenodeStub(ch)
        await _handled(stub)  # connected, the namenode warm
        baseline = _rss_kib(pid)
        call = stub.Session(metadata=bearer())
        frame = _getattr_frame()
        sent = 0
        stop = asyncio.Event()

        async def writer() -> None:
            nonlocal sent
            while not stop.is_set():
                await call.write(frame)
                sent += FRAME_REQUESTS
            await call.done_writing()

        writer_task = asyncio.create_task(writer())
        try:
            # Phase 1: the client never reads. Wait until the namenode has taken its
            # bound and then nothing more over QUIET_PINGS pings, while the client's
            # write stays blocked; the namenode's count and memory stay bounded throughout.
            quiet, last, last_sent, peak = 0, -1, -1, baseline
            async with asyncio.timeout(120):
                while quiet < QUIET_PINGS:
                    handled = await _handled(stub)
                    peak = max(peak, _rss_kib(pid))
                    assert not writer_task.done(), writer_task
                    assert handled <= HANDLED_LIMIT, f"the namenode kept reading: {handled}"
                    assert peak - baseline <= RSS_GROWTH_LIMIT_KIB, (baseline, peak)
                    steady = handled == last and sent == last_sent and handled >= MAX_INFLIGHT
                    quiet = quiet + 1 if steady else 0
                    last, last_sent = handled, sent
            assert sent > handled  # the client got more written than the namenode took

            # Phase 2: the client reads again, and its blocked write goes through.
            stop.set()
            answered = 0
            async with asyncio.timeout(60):
                async for reply in call:
                    assert not any(r.HasField("error") for r in reply.responses)
                    answered += len(reply.responses)
                    if writer_task.done():
                        break
            await writer_task
            assert answered > 0
        finally:
            writer_task.cancel()
            call.cancel()
            await asyncio.gather(writer_task, return_exceptions=True)
