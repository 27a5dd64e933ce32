"""Copy tasks: re-replication work the namenode hands this datanode in heartbeat replies.

A task names a block range of a source datanode, a read ticket for it and where the
blocks go in this volume. The copier reads the range from the source with ReadBlocks
(the source verifies every block's checksum before sending it), writes whole blocks
into the volume on the I/O executor, makes them durable and reports a CopyResult whose
code is the wire code of what went wrong (ECORRUPT: the source had a bad block,
EUNAVAIL: the source could not be reached or died mid-stream, EINVAL: a range outside
this volume). At most `streams` tasks run at once, the rest wait here in arrival
order, and all of them together read at most the shared byte rate.

A cancelled task stops at once, except that a block write already handed to a thread
finishes first: a task counts as running, and its range as being written, until no
thread writes its blocks any more.

The same pull serves a client's server-side copy (the datanode service's CopyBlocks):
run at once rather than queued, not held to the re-replication rate, and stamped as the
new file's blocks (the write ticket's owner) rather than the source's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import grpc

from plasmafs.core import channel_options as channels
from plasmafs.core import tickets
from plasmafs.core.data_framing import DatanodeStub
from plasmafs.core.errors import (
    InvalidArgumentError,
    PlasmaError,
    StorageError,
    UnavailableError,
)
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.rpc_status import ERRNO_METADATA_KEY, error_from_rpc
from plasmafs.core.tls import ChannelTLS, open_channel
from plasmafs.datanode.inflight import InflightWrites, in_thread, run_to_end, settle
from plasmafs.datanode.ratelimit import RateLimit
from plasmafs.datanode.volume import Volume, whole_blocks

log = logging.getLogger(__name__)

IDLE_TIMEOUT = 60.0  # seconds a source may send nothing before the copy gives up on it

ReadBlocks = Callable[[dpb.ReadRequest], Any]  # a unary-stream call yielding memoryviews
Owner = tuple[int, int, int] | None


@dataclass(frozen=True, slots=True)
class Source:
    """Where a copy reads: a block range of a datanode, with a read ticket for it."""

    datanode_id: int
    address: str
    plaintext: bool
    ticket: dpb.Ticket
    block_start: int

    @classmethod
    def of_task(cls, task: pb.CopyTask) -> Source:
        """The source a namenode's copy task names."""
        return cls(
            task.source_datanode_id,
            task.source_address,
            task.source_plaintext,
            task.source_ticket,
            task.source_block_start,
        )

    def __str__(self) -> str:
        return f"source datanode {self.datanode_id} at {self.address}"


class Copier:
    """Runs copy tasks into `volume`; `on_end` receives each task's result (never for a
    cancelled task)."""

    def __init__(
        self,
        volume: Volume,
        inflight: InflightWrites,
        io: Executor,
        bandwidth: RateLimit,
        streams: int,
        on_end: Callable[[pb.CopyResult], None],
        tls: ChannelTLS | None = None,
    ) -> None:
        self.tls = tls  # how to reach source datanodes
        self.volume = volume
        self.inflight = inflight
        self.io = io
        self.bandwidth = bandwidth
        self.streams = streams
        self.on_end = on_end
        self.started = 0
        self.succeeded = 0
        self.failed = 0
        self.cancelled = 0
        self.bytes = 0  # bytes written into the volume by copies of both kinds, failed ones too
        self.client_copies = 0  # clients' server-side copies that ended durable
        self.client_bytes = 0  # bytes those wrote
        self._queue: dict[int, pb.CopyTask] = {}  # in arrival order
        self._running: dict[int, asyncio.Task[None]] = {}
        self._channels: dict[tuple[str, bool], tuple[grpc.aio.Channel, ReadBlocks]] = {}

    @property
    def running(self) -> int:
        """Tasks running now."""
        return len(self._running)

    @property
    def queued(self) -> int:
        """Tasks waiting for a free stream."""
        return len(self._queue)

    def active_ids(self) -> list[int]:
        """Tasks accepted and not ended: running ones (their writes may still be under
        way) and queued ones."""
        return [*self._running, *self._queue]

    def submit(self, task: pb.CopyTask) -> None:
        """Accept a task: start it if a stream is free, else queue it. A task id already
        running or queued is ignored (a repeated heartbeat reply)."""
        if task.task_id in self._running or task.task_id in self._queue:
            return
        self._queue[task.task_id] = task
        self._fill()

    def cancel(self, task_ids: list[int]) -> None:
        """Drop queued tasks and cancel running ones; a running one stays in
        `active_ids` until its last block write has finished."""
        for task_id in task_ids:
            if self._queue.pop(task_id, None) is not None:
                self.cancelled += 1
                log.info("copy task %d cancelled before it started", task_id)
            elif (running := self._running.get(task_id)) is not None:
                running.cancel()

    async def close(self) -> None:
        """Cancel everything, wait until no copy writes, close the source channels."""
        self._queue.clear()
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel, _ in self._channels.values():
            await channel.close()
        self._channels.clear()

    def _fill(self) -> None:
        while self._queue and len(self._running) < self.streams:
            task_id = next(iter(self._queue))
            task = self._queue.pop(task_id)
            self._running[task_id] = asyncio.create_task(self._run(task), name=f"copy-{task_id}")

    async def _run(self, task: pb.CopyTask) -> None:
        self.started += 1
        log.info(
            "copy task %d started: blocks %d+%d of datanode %d at %s -> blocks %d",
            task.task_id,
            task.source_block_start,
            task.block_count,
            task.source_datanode_id,
            task.source_address,
            task.block_start,
        )
        loop = asyncio.get_running_loop()
        began = loop.time()
        result = None
        try:
            result = await self.copy(task)
        except asyncio.CancelledError:
            self.cancelled += 1
            log.info("copy task %d cancelled; its writes have stopped", task.task_id)
        except Exception as exc:  # a bug must still end the task with a result
            log.exception("copy task %d failed", task.task_id)
            result = _failed(task, StorageError(f"copy failed: {exc!r}"))
        finally:
            del self._running[task.task_id]
            self._fill()
        if result is None:
            return
        if result.code == pb.OK:
            self.succeeded += 1
            log.info(
                "copy task %d ended: OK, %d bytes in %.2fs",
                task.task_id,
                result.bytes,
                loop.time() - began,
            )
        else:
            self.failed += 1
            log.warning(
                "copy task %d ended: %s: %s",
                task.task_id,
                pb.ErrorCode.Name(result.code),
                result.message,
            )
        self.on_end(result)

    async def copy(self, task: pb.CopyTask) -> pb.CopyResult:
        """Run one task to its end and return its result (cancellation propagates, once
        no thread writes its blocks any more)."""
        try:
            if task.block_count < 1:
                raise InvalidArgumentError("a copy task of no blocks")
            self.volume.check_range(task.block_start, task.block_count)
            ticket, base = task.source_ticket, task.source_block_start
            with self.inflight.writing(task.block_start, task.block_count):
                written = await self._pull(
                    Source.of_task(task),
                    task.block_start,
                    task.block_count,
                    # The copy is the same file's blocks: stamped as the source's.
                    lambda at: tickets.owner_at(ticket, base + at),
                    self.bandwidth,
                )
        except PlasmaError as exc:
            return _failed(task, exc)
        except OSError as exc:
            log.exception("copy task %d: volume write failed", task.task_id)
            return _failed(task, StorageError(f"volume write failed: {exc}"))
        return pb.CopyResult(task_id=task.task_id, code=pb.OK, bytes=written)

    async def copy_for_client(self, request: dpb.CopyRequest, source: Source) -> int:
        """A client's server-side copy from `source` into the range its write ticket
        (checked by the caller, as the source's ticket) allows: the bytes made durable.
        Raises a PlasmaError naming the source when reading it fails, or an OSError
        from the volume."""
        if request.block_count < 1:
            raise InvalidArgumentError("a copy of no blocks")
        ticket, base = request.ticket, request.block_start
        total = request.block_count * self.volume.info.blocksize
        if request.content_bytes > total:
            raise InvalidArgumentError(
                f"a copy of {request.block_count} blocks holds at most {total} bytes, "
                f"not {request.content_bytes}"
            )
        with self.inflight.writing(request.block_start, request.block_count):
            written = await self._pull(
                source,
                request.block_start,
                request.block_count,
                lambda at: tickets.owner_at(ticket, base + at),  # the new file's blocks
                None,
                content=request.content_bytes or total,
            )
        self.client_copies += 1
        self.client_bytes += written
        return written

    async def _pull(
        self,
        source: Source,
        block_start: int,
        block_count: int,
        owner_of: Callable[[int], Owner],
        bandwidth: RateLimit | None,
        content: int | None = None,
    ) -> int:
        """Read `block_count` blocks from `source` into this volume from `block_start`
        on, the copy's k-th block stamped `owner_of(k)` (None: no rate limit), zeros
        written for what lies past `content` bytes; the bytes made durable."""
        bs = self.volume.info.blocksize
        total = block_count * bs
        content = total if content is None else content
        request = dpb.ReadRequest(
            ticket=source.ticket,
            block_start=source.block_start,
            block_count=block_count,
        )
        call = self._reader(source.address, source.plaintext)(request)
        received = written = 0
        pending = bytearray()
        # One block write runs in a thread while the next message arrives.
        disk: asyncio.Future[None] | None = None
        disk_bytes = 0
        try:
            while True:
                try:
                    # Not asyncio.wait_for: on Python 3.11 it loses a cancel that arrives
                    # as the message does, and the cancelled copy would go on writing.
                    async with asyncio.timeout(IDLE_TIMEOUT):
                        chunk = await call.read()
                except TimeoutError:
                    raise UnavailableError(f"{source} sent nothing for {IDLE_TIMEOUT:g}s") from None
                if chunk is grpc.aio.EOF:
                    break
                received += len(chunk)
                if received > total:
                    raise StorageError(f"{source} sent more than {total} bytes")
                if bandwidth is not None:
                    await bandwidth.take(len(chunk))
                whole = whole_blocks(pending, chunk, bs)
                if not whole:
                    continue
                if disk is not None:
                    await asyncio.shield(disk)
                    self.bytes += disk_bytes
                if written + len(whole) > content:
                    whole = _zeroed_past(whole, content - written)
                at = written // bs
                disk = in_thread(self.io, self._write, block_start + at, whole, owner_of(at))
                disk_bytes = len(whole)
                written += len(whole)
            if disk is not None:
                await asyncio.shield(disk)
                self.bytes += disk_bytes
                disk = None
            if written != total:
                raise UnavailableError(
                    f"{source} ended the stream after {received} of {total} bytes"
                )
            await run_to_end(self.io, self.volume.flush)
            return written
        except grpc.RpcError as exc:
            raise _source_error(exc, source) from exc
        finally:
            call.cancel()
            await settle(disk)

    def _write(self, block: int, data: bytes | bytearray | memoryview, owner: Owner) -> None:
        """Write whole blocks from volume block `block` on, the first stamped `owner`
        (the volume advances the stamp's block index along the range)."""
        # Around the page cache: this datanode is not expected to serve the copy soon,
        # and filling the cache would evict what clients read.
        self.volume.write_blocks(block, data, around_cache=True, owner=owner)

    def _reader(self, address: str, plaintext: bool) -> ReadBlocks:
        cached = self._channels.get((address, plaintext))
        if cached is None:
            channel = open_channel(address, channels.DATA_CHANNEL, None if plaintext else self.tls)
            cached = self._channels[address, plaintext] = (
                channel,
                DatanodeStub(channel).ReadBlocks,
            )
        return cached[1]


def _zeroed_past(data: bytes | bytearray | memoryview, keep: int) -> bytearray:
    """`data` with zeros from byte `keep` on."""
    copy = bytearray(data)
    copy[max(0, keep) :] = bytes(len(copy) - max(0, keep))
    return copy


def _failed(task: pb.CopyTask, error: PlasmaError) -> pb.CopyResult:
    """The result of a task that ended with `error` (nothing it wrote counts)."""
    result = pb.CopyResult(task_id=task.task_id, message=str(error))
    result.code = error.code  # type: ignore[assignment]
    return result


def _source_error(exc: grpc.RpcError, source: Source) -> PlasmaError:
    """A failed read from the source as a plasmafs error naming the source."""
    answered = any(key == ERRNO_METADATA_KEY for key, _ in exc.trailing_metadata() or ())
    if not answered:
        # No plasmafs code: the call broke in transport (the source died or vanished;
        # gRPC reports that as UNAVAILABLE, CANCELLED or INTERNAL).
        return UnavailableError(f"{source} unavailable: {exc.code()}: {exc.details()}")
    error = error_from_rpc(exc)
    return type(error)(f"{source}: {error}")
