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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
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
        self.bytes = 0  # bytes written into the volume by copies, failed ones included
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
            with self.inflight.writing(task.block_start, task.block_count):
                written = await self._pull(task)
        except PlasmaError as exc:
            return _failed(task, exc)
        except OSError as exc:
            log.exception("copy task %d: volume write failed", task.task_id)
            return _failed(task, StorageError(f"volume write failed: {exc}"))
        return pb.CopyResult(task_id=task.task_id, code=pb.OK, bytes=written)

    async def _pull(self, task: pb.CopyTask) -> int:
        bs = self.volume.info.blocksize
        total = task.block_count * bs
        request = dpb.ReadRequest(
            ticket=task.source_ticket,
            block_start=task.source_block_start,
            block_count=task.block_count,
        )
        call = self._reader(task.source_address, task.source_plaintext)(request)
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
                    raise UnavailableError(
                        f"{_source(task)} sent nothing for {IDLE_TIMEOUT:g}s"
                    ) from None
                if chunk is grpc.aio.EOF:
                    break
                received += len(chunk)
                if received > total:
                    raise StorageError(f"{_source(task)} sent more than {total} bytes")
                await self.bandwidth.take(len(chunk))
                whole = whole_blocks(pending, chunk, bs)
                if not whole:
                    continue
                if disk is not None:
                    await asyncio.shield(disk)
                    self.bytes += disk_bytes
                # Around the page cache: this datanode is not expected to serve the copy
                # soon, and filling the cache would evict what clients read.
                disk = in_thread(self.io, self._write, task, written // bs, whole)
                disk_bytes = len(whole)
                written += len(whole)
            if disk is not None:
                await asyncio.shield(disk)
                self.bytes += disk_bytes
                disk = None
            if written != total:
                raise UnavailableError(
                    f"{_source(task)} ended the stream after {received} of {total} bytes"
                )
            await run_to_end(self.io, self.volume.flush)
            return written
        except grpc.RpcError as exc:
            raise _source_error(exc, task) from exc
        finally:
            call.cancel()
            await settle(disk)

    def _write(self, task: pb.CopyTask, at: int, data: bytes | bytearray | memoryview) -> None:
        """Write the copy's blocks from its `at`-th on, stamped with the owner the
        source's ticket names for them (the copy is the same file's blocks)."""
        owner = tickets.owner_at(task.source_ticket, task.source_block_start + at)
        self.volume.write_blocks(task.block_start + at, data, around_cache=True, owner=owner)

    def _reader(self, address: str, plaintext: bool) -> ReadBlocks:
        cached = self._channels.get((address, plaintext))
        if cached is None:
            channel = open_channel(address, channels.DATA_CHANNEL, None if plaintext else self.tls)
            cached = self._channels[address, plaintext] = (
                channel,
                DatanodeStub(channel).ReadBlocks,
            )
        return cached[1]


def _failed(task: pb.CopyTask, error: PlasmaError) -> pb.CopyResult:
    """The result of a task that ended with `error` (nothing it wrote counts)."""
    result = pb.CopyResult(task_id=task.task_id, message=str(error))
    result.code = error.code  # type: ignore[assignment]
    return result


def _source(task: pb.CopyTask) -> str:
    return f"source datanode {task.source_datanode_id} at {task.source_address}"


def _source_error(exc: grpc.RpcError, task: pb.CopyTask) -> PlasmaError:
    """A failed read from the source as a plasmafs error naming the source."""
    answered = any(key == ERRNO_METADATA_KEY for key, _ in exc.trailing_metadata() or ())
    if not answered:
        # No plasmafs code: the call broke in transport (the source died or vanished;
        # gRPC reports that as UNAVAILABLE, CANCELLED or INTERNAL).
        return UnavailableError(f"{_source(task)} unavailable: {exc.code()}: {exc.details()}")
    error = error_from_rpc(exc)
    return type(error)(f"{_source(task)}: {error}")
