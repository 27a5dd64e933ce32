"""File objects: streaming writes to every replica, and reads straight from datanodes.

A writer creates (or truncates) the file in a transaction, asks the namenode for
blocks in long runs, streams the data to every replica of a run at once, and commits
when closed (and every `commit_every` bytes, so very large files become visible in
steps of whole committed prefixes). If anything fails, the transaction is aborted:
nothing of the new content becomes visible and the reserved blocks are free again.
A file closed at no more than the namenode's inline limit (4 KiB) never reaches a
datanode: its content goes to the namenode with the size and the commit, in one frame.

A reader fetches the file's block list once; from then on reads go to datanodes
only, failing over to another replica when one is unreachable or returns corrupt
data. The blocks of the version it opened stay readable while its tickets live, even
if the file is overwritten meanwhile: a reader sees the old or the new content,
never a mix. Before its tickets expire it fetches new ones for the same blocks, as
long as the file is unchanged; once a changed file's old tickets expire, the reader
raises StaleFileError instead of reading blocks that may hold other data by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import operator
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import TracebackType
from typing import NoReturn

from plasmafs.client.datapath import DataChannels, read_range, write_range
from plasmafs.client.transaction import CommittedReads, Transaction, answers
from plasmafs.core.attributes import Attr, BlockList, Extent, FileKind, Replica, ReplicaState
from plasmafs.core.errors import (
    CorruptionError,
    ExistsError,
    InvalidArgumentError,
    IsDirectoryError,
    NoSpaceError,
    PermissionDeniedError,
    PlasmaError,
    StaleFileError,
    UnavailableError,
)
from plasmafs.core.proto import datanode_pb2 as dpb

RUN_BLOCKS = 128  # blocks requested per allocation when the size is unknown
MAX_RUN_BLOCKS = 1024  # blocks requested per allocation at most
COMMIT_EVERY = 1 << 30
# Data goes to datanodes in messages of whole blocks, up to this size: fewer, larger
# messages and disk writes than one per 1 MiB block.
MESSAGE_BYTES = 4 * 1024 * 1024
QUEUE_BYTES = 8 * 1024 * 1024  # queued per replica stream, at most
# A reader fetches new tickets this long before its tickets expire (at most a quarter of
# their lifetime), so that no read starts with a ticket about to lapse.
RENEW_MARGIN = 60.0


class _FileObject:
    """What Python's io objects share: ValueError once closed, io.UnsupportedOperation for
    what this kind of file cannot do, and readable()/writable()/seekable() to ask first."""

    _capabilities: frozenset[str] = frozenset()
    closed: bool

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def _unsupported(self, operation: str) -> NoReturn:
        self._check_open()
        raise io.UnsupportedOperation(f"{operation}: {type(self).__name__} cannot do that")

    def readable(self) -> bool:
        """True if read() may be used."""
        self._check_open()
        return "read" in self._capabilities

    def writable(self) -> bool:
        """True if write() may be used."""
        self._check_open()
        return "write" in self._capabilities

    def seekable(self) -> bool:
        """True if seek() may be used."""
        self._check_open()
        return "seek" in self._capabilities

    async def read(self, n: int | None = -1) -> bytes:
        """Not supported by this kind of file."""
        self._unsupported("read")

    async def readinto(self, buffer: bytearray | memoryview) -> int:
        """Not supported by this kind of file."""
        self._unsupported("readinto")

    async def write(self, data: bytes | bytearray | memoryview) -> int:
        """Not supported by this kind of file."""
        self._unsupported("write")

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Not supported by this kind of file."""
        self._unsupported("seek")


class FileWriter(_FileObject):
    """An open file being written (binary; sequential)."""

    _capabilities = frozenset({"write"})

    def __init__(
        self,
        txn_factory: Callable[[], Awaitable[Transaction]],
        channels: DataChannels,
        path: str | int,
        *,
        replication: int = 0,
        blocksize: int = 0,
        size_hint: int | None = None,
        commit_every: int = COMMIT_EVERY,
    ) -> None:
        self._begin = txn_factory
        self._channels = channels
        self.path = path
        self._replication = replication
        self._blocksize = blocksize  # of a file this writer creates (0: the default)
        self._size_hint = size_hint
        self._commit_every = commit_every
        self._txn: Transaction | None = None
        self.attr: Attr | None = None
        self._bs = 0
        self._written = 0  # bytes handed to datanodes (whole file)
        self._since_commit = 0
        self._buffer = bytearray()
        self._runs: list[Extent] = []
        self._max_run = MAX_RUN_BLOCKS  # lowered when the cluster had less to give
        self._current: Extent | None = None
        self._current_used = 0  # bytes written into the current extent
        self._queues: list[asyncio.Queue[bytes | memoryview | None]] = []
        self._tasks: list[asyncio.Task[int]] = []
        # The previous extent's replica writes, still making their last data durable
        # while the next extent streams (for rep 1 that is another datanode).
        self._finishing: list[asyncio.Task[int]] = []
        self._times_set = False  # an mtime was set while writing: close keeps it
        self._truncation: asyncio.Future[Attr] | None = None  # sent by open, not awaited
        self.closed = False

    async def open(self, *, known: Attr | None = None, empty: bool = False) -> FileWriter:
        """Create the file, or truncate an existing one, in a new transaction (a file
        given by inode number exists: it is truncated).

        `known`: the attributes of the file given by inode number, as the caller last
        saw them. The truncation then goes out without waiting for its answer, which
        the first request that needs it, or close, awaits (and raises its error).
        `empty` (with `known`): the caller created that file, it has no content and
        nobody else writes it, so there is nothing to truncate and none is sent."""
        t = await self._new_txn()
        if known is not None and isinstance(self.path, int):
            if not (empty and known.size == 0):
                self._truncation = asyncio.ensure_future(self._truncate(t, self.path))
            self.attr, self._bs = known, known.blocksize
            return self
        try:
            if isinstance(self.path, int):
                self.attr = await self._truncate(t, self.path)
            else:
                self.attr = await t.create(
                    self.path, replication=self._replication, blocksize=self._blocksize
                )
        except ExistsError:
            assert isinstance(self.path, str)
            current = await t.stat(self.path)
            if current.kind is not FileKind.FILE:
                await t.abort()
                raise IsDirectoryError(f"{self.path} is not a regular file") from None
            self.attr = await self._truncate(t, self.path)
        except BaseException:
            await t.abort()
            raise
        self._bs = self.attr.blocksize
        return self

    def _truncate(self, t: Transaction, target: str | int) -> Awaitable[Attr]:
        """Send the truncation now (it is ordered before whatever follows in `t`); the
        awaitable answers it."""
        changes = {"size": 0}
        if self._replication:
            changes["replication"] = self._replication
        return self._regular_file(t.setattr(target, **changes))

    async def _regular_file(self, sent: Awaitable[Attr]) -> Attr:
        attr = await sent
        if attr.kind is not FileKind.FILE:
            raise IsDirectoryError(f"{self.path} is not a regular file")
        return attr

    async def _new_txn(self) -> Transaction:
        self._txn = await self._begin()
        return self._txn

    async def write(self, data: bytes | bytearray | memoryview) -> int:
        """Queue bytes; whole blocks go to the datanodes as soon as they are complete.

        `bytes` are sent without a copy; other buffers are copied first, since the caller
        may reuse them before the queued data has gone out.
        """
        self._check_open()
        bs = self._bs
        view = memoryview(data)
        if not isinstance(view.obj, bytes):
            view = memoryview(bytes(view))
        message = max(bs, MESSAGE_BYTES - MESSAGE_BYTES % bs)
        try:
            if self._buffer:  # complete the partial block first
                take = min(bs - len(self._buffer), len(view))
                self._buffer += view[:take]
                view = view[take:]
                if len(self._buffer) == bs:
                    block = bytes(self._buffer)
                    self._buffer.clear()
                    await self._send(block)
            while len(view) >= bs:  # whole blocks straight from the caller's bytes
                n = min(len(view) - len(view) % bs, message)
                await self._send(view[:n])
                view = view[n:]
            self._buffer += view
        except BaseException:
            await self._fail()
            raise
        return len(data)

    async def setattr(self, **changes: int | None) -> Attr:
        """Change the file's attributes (mode, owner, mtime) in the writing
        transaction: they become visible with the content, at close."""
        self._check_open()
        await self._opened()
        assert self._txn is not None and self.attr is not None
        self.attr = await self._txn.setattr(self.attr.ino, **changes)
        if changes.get("mtime_ns") is not None:
            self._times_set = True
        return self.attr

    def tell(self) -> int:
        """The bytes written so far."""
        self._check_open()
        return self._written + len(self._buffer)

    async def _send(self, chunk: bytes | memoryview) -> None:
        """Hand `chunk` to the current extent's replicas, splitting it where an extent
        ends."""
        view = memoryview(chunk)
        while view:
            if self._current is None or self._current_used >= self._current.block_count * self._bs:
                await self._next_extent()
            assert self._current is not None
            piece = view[: self._current.block_count * self._bs - self._current_used]
            await self._hand_over(piece)
            self._current_used += len(piece)
            self._written += len(piece)
            self._since_commit += len(piece)
            view = view[len(piece) :]

    async def _hand_over(self, chunk: bytes | memoryview | None) -> None:
        """Queue `chunk` for every replica; a replica that failed stops the write at once
        (its queue has no reader any more, so waiting on it alone would hang)."""
        for task in self._finishing:
            if task.done():
                task.result()
        for queue, task in zip(self._queues, self._tasks, strict=True):
            if task.done():
                task.result()
            put = asyncio.ensure_future(queue.put(chunk))
            done, _ = await asyncio.wait({put, task}, return_when=asyncio.FIRST_COMPLETED)
            if put not in done:
                put.cancel()
                task.result()
                raise UnavailableError("a datanode stopped taking data")

    async def _next_extent(self) -> None:
        await self._end_extent()
        if self._since_commit >= self._commit_every:
            await self._drain()
            await self._commit_step()
        if not self._runs:
            await self._allocate()
        self._current = self._runs.pop(0)
        self._current_used = 0
        size = self._current.block_count * self._bs
        depth = max(1, QUEUE_BYTES // min(size, max(self._bs, MESSAGE_BYTES)))
        self._queues = [asyncio.Queue(maxsize=depth) for _ in self._current.replicas]
        self._tasks = [
            asyncio.ensure_future(
                write_range(self._channels, replica, self._bs, 0, self._current.block_count, queue)
            )
            for replica, queue in zip(self._current.replicas, self._queues, strict=True)
        ]

    async def _opened(self) -> None:
        """The truncation that open sent, answered."""
        truncation, self._truncation = self._truncation, None
        if truncation is not None:
            self.attr = await truncation

    async def _allocate(self) -> None:
        await self._opened()
        assert self._txn is not None and self.attr is not None
        next_block = self._written // self._bs
        if self._size_hint is not None:
            left = max(self._size_hint - self._written, 1)
            want = min(MAX_RUN_BLOCKS, (left + self._bs - 1) // self._bs)
        else:
            want = RUN_BLOCKS
        until_commit = self._commit_every - self._since_commit
        want = max(1, min(want, (until_commit + self._bs - 1) // self._bs))  # end at a commit
        want = min(want, self._max_run)
        while True:
            try:
                blocks = await self._txn.allocate(self.attr.ino, next_block, want)
                break
            except NoSpaceError:
                if want == 1:
                    raise
                # A nearly full cluster may still hold fewer blocks (a write of unknown
                # size asks for a long run): ask for half. A refused allocation reserves
                # nothing and leaves the transaction usable. Later runs of this file
                # start from what was granted, not from refusals again.
                want //= 2
                self._max_run = want
        self._runs = list(blocks.extents)

    async def _end_extent(self) -> None:
        """End the current extent's streams and let them finish in the background, once
        the extent before it has finished: at most two extents are in flight."""
        if self._current is None:
            return
        await self._hand_over(None)
        await self._drain()
        self._finishing, self._current, self._queues, self._tasks = self._tasks, None, [], []

    async def _drain(self) -> None:
        """Wait until every ended extent is durable on all its replicas."""
        results = await asyncio.gather(*self._finishing, return_exceptions=True)
        self._finishing = []
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _commit_step(self) -> None:
        assert self._txn is not None and self.attr is not None
        # Unused reservations of the current allocation are dropped by the size change.
        self._runs = []
        await self._txn.setattr(self.attr.ino, size=self._written)
        await self._txn.commit()
        self._since_commit = 0
        t = await self._new_txn()
        self.attr = await t.getattr(self.attr.ino)

    async def close(self) -> Attr:
        """Write what is buffered, wait for every replica, set the size, commit."""
        if self.closed:
            assert self.attr is not None
            return self.attr
        try:
            assert self._txn is not None and self.attr is not None
            t = self._txn
            nothing_sent = self._written == 0 and self._current is None
            if nothing_sent and 0 < len(self._buffer) <= t.inline_limit:
                # A small file: its content goes to the namenode with the commit.
                self._written = len(self._buffer)
                inlined = t.write_inline(self.attr.ino, bytes(self._buffer))
                self._buffer.clear()
            else:
                inlined = None
                if self._buffer:
                    tail = bytes(self._buffer)
                    self._buffer.clear()
                    await self._send(tail)
                await self._end_extent()
                await self._drain()
            # New content, new modification time, unless the writer set one (cp -p).
            # Sent together with the content and the commit: one round trip.
            attr = t.setattr(self.attr.ino, size=self._written, mtime_now=not self._times_set)
            committed = t.commit(unless_failed=True)
            truncation, self._truncation = self._truncation, None
            sent = [x for x in (truncation, inlined) if x is not None]
            self.attr = (await answers(*sent, attr, committed))[-2]
        except BaseException:
            await self._fail()
            raise
        self.closed = True
        return self.attr

    async def _fail(self) -> None:
        self.closed = True
        tasks = self._tasks + self._finishing
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        truncation, self._truncation = self._truncation, None
        if truncation is not None:
            await asyncio.gather(truncation, return_exceptions=True)  # the abort says why
        if self._txn is not None:
            await self._txn.abort()

    async def abort(self) -> None:
        """Give up: nothing written becomes visible."""
        if not self.closed:
            await self._fail()

    async def __aenter__(self) -> FileWriter:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await self.close()
        else:
            await self.abort()


class FileReader(_FileObject):
    """An open file being read (binary; random access)."""

    _capabilities = frozenset({"read", "seek"})

    def __init__(self, reads: CommittedReads, channels: DataChannels, path: str | int) -> None:
        self._reads = reads
        self._channels = channels
        self.path = path
        self.attr: Attr | None = None
        self.blocks: BlockList | None = None
        self._position = 0
        self._turn = 0
        self._renew_at = float("inf")  # when to fetch new tickets (time.time())
        self._renewing = asyncio.Lock()
        self._reports: set[asyncio.Future[None]] = set()
        self.closed = False

    async def open(self) -> FileReader:
        """Fetch the attributes and the whole block list (the only namenode requests while
        the tickets live); by inode number, both in one round trip."""
        if isinstance(self.path, int):
            sent = self._reads.getattr(self.path), self._reads.blocks(self.path)
            attr, blocks = await asyncio.gather(*sent, return_exceptions=True)
            if isinstance(attr, BaseException):
                raise attr
            _check_regular(attr, self.path)
            if isinstance(blocks, BaseException):
                raise blocks
        else:
            attr = _check_regular(await self._reads.stat(self.path), self.path)
            blocks = await self._reads.blocks(attr.ino)
        self._take(blocks)
        self.attr = attr
        return self

    def _take(self, blocks: BlockList) -> None:
        self.blocks = blocks
        expiries = [
            dpb.Ticket.FromString(r.ticket).expires_unix_ms / 1000
            for e in blocks.extents
            for r in e.replicas
        ]
        if expiries:
            now = time.time()
            expires = min(expiries)
            self._renew_at = expires - min(RENEW_MARGIN, (expires - now) / 4)

    async def _renew_tickets(self) -> None:
        """New tickets for the same blocks once the old ones are about to expire, as long
        as the file has not changed since it was opened (its version is the same);
        otherwise the version being read may be gone, and StaleFileError says so."""
        if time.time() < self._renew_at:
            return
        async with self._renewing:
            if time.time() < self._renew_at:
                return  # another read renewed them meanwhile
            assert self.attr is not None and self.blocks is not None
            # Blocks first, then the version: an unchanged version afterwards means no
            # commit touched the file before the blocks were read either.
            blocks = await self._reads.blocks(self.attr.ino)
            attr = await self._reads.getattr(self.attr.ino)
            if attr.version != self.attr.version or len(blocks.extents) != len(self.blocks.extents):
                raise StaleFileError(
                    f"{self.path} changed after it was opened and its tickets expired: "
                    "open it again to read the new version"
                )
            self._take(blocks)

    @property
    def size(self) -> int:
        """The size of the version that was opened."""
        assert self.blocks is not None
        return self.blocks.size

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move the position, as io.RawIOBase.seek does; returns the new position."""
        self._check_open()
        offset = operator.index(offset)
        whence = operator.index(whence)
        if whence == os.SEEK_SET:
            base = 0
        elif whence == os.SEEK_CUR:
            base = self._position
        elif whence == os.SEEK_END:
            base = self.size
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        """The current position."""
        self._check_open()
        return self._position

    async def read(self, n: int | None = -1) -> bytes:
        """Up to `n` bytes from the position (all the rest with n < 0 or None)."""
        self._check_open()
        n = -1 if n is None else operator.index(n)
        end = self.size if n < 0 else min(self.size, self._position + n)
        data = await self.pread(self._position, max(end - self._position, 0))
        self._position += len(data)
        return data

    async def readinto(self, buffer: bytearray | memoryview) -> int:
        """Fill `buffer` from the position; returns the number of bytes read."""
        self._check_open()
        data = await self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    async def pread(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset+length) of the file, fewer at its end (holes read as
        zeros); the position does not move."""
        pieces: list[bytes] = []
        async for piece in self.stream(offset, length):
            pieces.append(bytes(piece))  # a piece is only valid until the next one comes
        # One piece (a read within one datanode request) is copied once, not twice.
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def stream(
        self, offset: int = 0, length: int | None = None
    ) -> AsyncGenerator[bytes | memoryview, None]:
        """The file's bytes from `offset`, as the datanodes send them."""
        self._check_open()
        offset = operator.index(offset)
        if offset < 0:
            raise InvalidArgumentError(f"negative offset {offset}")
        assert self.blocks is not None
        bs = self.blocks.blocksize
        end = self.size if length is None else min(self.size, offset + max(length, 0))
        position = offset
        inline = self.blocks.inline
        if inline is not None and position < min(end, len(inline)):  # kept by the namenode
            yield inline[position:end]
            position = min(end, len(inline))
        for index, extent in enumerate(self.blocks.extents):
            if position >= end:
                break
            ext_lo, ext_hi = extent.file_index * bs, extent.file_end * bs
            if ext_hi <= position:
                continue
            if ext_lo > position:  # a hole
                gap = min(ext_lo, end) - position
                yield bytes(gap)
                position += gap
                if position >= end:
                    break
            stop = min(ext_hi, end)
            renewed_in_vain = False
            while position < stop:
                await self._renew_tickets()
                renewed = self.blocks.extents[index]  # the same blocks, maybe new tickets
                pieces = self._extent_bytes(renewed, position - ext_lo, stop - position)
                before = position
                try:
                    async with contextlib.aclosing(pieces):
                        async for piece in pieces:
                            yield piece
                            position += len(piece)
                except PermissionDeniedError:
                    # Tickets that lapsed while this extent streamed (a slow consumer) are
                    # renewed and the read goes on; a refusal of fresh tickets, or of
                    # renewed ones with no progress since (clocks apart), is final.
                    if time.time() < self._renew_at or (renewed_in_vain and position == before):
                        raise
                    renewed_in_vain = position == before
        if position < end:
            yield bytes(end - position)

    async def _extent_bytes(
        self, extent: Extent, offset: int, length: int
    ) -> AsyncGenerator[bytes | memoryview, None]:
        assert self.blocks is not None
        bs = self.blocks.blocksize
        # Reads rotate over the live replicas; the others (a datanode that missed its
        # heartbeats may still answer) are tried last.
        live = [r for r in extent.replicas if r.state is ReplicaState.LIVE]
        others = [r for r in extent.replicas if r.state is not ReplicaState.LIVE]
        self._turn += 1
        start = self._turn % len(live) if live else 0
        order = live[start:] + live[:start] + others
        errors: list[PlasmaError] = []
        done = 0
        local = self._channels.local
        for replica in order:
            # Shared memory first when the datanode is on this host, then its gRPC
            # service; a replica that answers with an error gives way to the next one.
            for via_local in (True, False) if local.usable(replica) else (False,):
                first = (offset + done) // bs
                count = (offset + length - 1) // bs - first + 1
                skip = offset + done - first * bs
                pieces = (
                    local.read_range(replica, bs, first, count, skip, length - done)
                    if via_local
                    else read_range(self._channels, replica, first, count, skip, length - done)
                )
                try:
                    # aclosing: a caller that stops early ends the range's reads now, not
                    # whenever the generator is collected.
                    async with contextlib.aclosing(pieces):
                        async for piece in pieces:
                            done += len(piece)
                            yield piece
                    return
                except UnavailableError as exc:
                    errors.append(exc)  # the other path of this replica, then the next one
                except CorruptionError as exc:
                    errors.append(exc)
                    self._report_corrupt(replica, first, count, str(exc))
                    break
                except PlasmaError as exc:
                    errors.append(exc)
                    break
        if (
            errors
            and all(type(e) is type(errors[0]) for e in errors)
            and not isinstance(errors[0], UnavailableError)
        ):
            raise type(errors[0])("; ".join(str(e) for e in errors))
        raise UnavailableError("no replica answered: " + "; ".join(str(e) for e in errors))

    def _report_corrupt(self, replica: Replica, first: int, count: int, reason: str) -> None:
        """Tell the namenode in the background; the read goes on from another replica."""
        report = self._reads.report_corrupt(
            replica.datanode_id, replica.block_start + first, count, reason
        )
        task = asyncio.ensure_future(report)
        self._reports.add(task)
        task.add_done_callback(self._report_done)

    def _report_done(self, task: asyncio.Future[None]) -> None:
        self._reports.discard(task)
        if not task.cancelled():
            task.exception()  # a report that did not reach the namenode is only a hint

    async def close(self) -> None:
        """Nothing to release but the object."""
        self.closed = True

    async def __aenter__(self) -> FileReader:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _check_regular(attr: Attr, path: str | int) -> Attr:
    """`attr`, unless it is not a regular file's (IsDirectoryError)."""
    if attr.kind is not FileKind.FILE:
        raise IsDirectoryError(f"{path} is not a regular file")
    return attr
