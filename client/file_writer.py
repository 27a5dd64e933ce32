"""Writing a file: streaming to every replica, committed at close.

A writer creates (or truncates) the file in a transaction, asks the namenode for
blocks in long runs, streams the data to every replica of a run at once, and commits
when closed (and every `commit_every` bytes, so very large files become visible in
steps of whole committed prefixes). If anything fails, the transaction is aborted:
nothing of the new content becomes visible and the reserved blocks are free again.
A file closed at no more than the namenode's inline limit (4 KiB) never reaches a
datanode: its content goes to the namenode with the size and the commit, in one frame.
A writer may instead copy another file's blocks server-side (`copy_blocks`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType

from plasmafs.client.block_copies import fill_extent
from plasmafs.client.datapath import DataChannels, write_range
from plasmafs.client.file_object import FileObject
from plasmafs.client.file_reader import FileReader
from plasmafs.client.transaction import Transaction, answers
from plasmafs.core.attributes import Attr, Extent, FileKind
from plasmafs.core.errors import (
    ExistsError,
    InvalidArgumentError,
    IsDirectoryError,
    NoSpaceError,
    UnavailableError,
)
from plasmafs.core.paths import At

RUN_BLOCKS = 128  # blocks requested per allocation when the size is unknown
MAX_RUN_BLOCKS = 1024  # blocks requested per allocation at most
COMMIT_EVERY = 1 << 30
# Data goes to datanodes in messages of whole blocks, up to this size: fewer, larger
# messages and disk writes than one per 1 MiB block.
MESSAGE_BYTES = 4 * 1024 * 1024
QUEUE_BYTES = 8 * 1024 * 1024  # queued per replica stream, at most


class FileWriter(FileObject):
    """An open file being written (binary; sequential)."""

    _capabilities = frozenset({"write"})

    def __init__(
        self,
        txn_factory: Callable[[], Awaitable[Transaction]],
        channels: DataChannels,
        path: str | int | At,
        *,
        replication: int = 0,
        blocksize: int = 0,
        size_hint: int | None = None,
        commit_every: int = COMMIT_EVERY,
        inline: bool = True,
    ) -> None:
        self._begin = txn_factory
        self._channels = channels
        self.path = path
        self._replication = replication
        self._blocksize = blocksize  # of a file this writer creates (0: the default)
        self._size_hint = size_hint
        self._inline = inline  # False: even a small content goes to blocks
        self._commit_every = commit_every
        self._txn: Transaction | None = None
        self.attr: Attr | None = None
        self._bs = 0
        self._written = 0  # bytes handed to datanodes (whole file)
        self._copied = False  # the content is a server-side copy: nothing follows it
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
        # The creation or truncation open sent, not awaited yet.
        self._opening: asyncio.Future[Attr] | None = None
        self.closed = False

    async def open(
        self, *, known: Attr | None = None, empty: bool = False, new: bool = False
    ) -> FileWriter:
        """Create the file, or truncate an existing one, in a new transaction (a file
        given by inode number exists: it is truncated).

        `known`: the attributes of the file given by inode number, as the caller last
        saw them. The truncation then goes out without waiting for its answer, which
        the first request that needs it, or close, awaits (and raises its error).
        `empty` (with `known`): the caller created that file, it has no content and
        nobody else writes it, so there is nothing to truncate and none is sent.
        `new` (with `known`, the file given by name): this transaction creates it,
        as the file `known` describes (an inode number the connection reserved, its
        mode), without waiting: it exists once the content is committed with it."""
        t = await self._new_txn()
        if known is not None and new:
            assert not isinstance(self.path, int)
            created = t.create(
                self.path,
                known.mode & 0o7777,
                replication=self._replication,
                blocksize=self._blocksize,
                ino=known.ino,
            )
            self._opening = asyncio.ensure_future(self._regular_file(created))
            self.attr, self._bs = known, known.blocksize
            return self
        if known is not None and isinstance(self.path, int):
            if not (empty and known.size == 0):
                self._opening = asyncio.ensure_future(self._truncate(t, self.path))
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
        if self._copied and data:
            raise InvalidArgumentError("the content is a copy: nothing may be written after it")
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

    async def copy_blocks(
        self, source: FileReader, first: int = 0, length: int | None = None
    ) -> None:
        """Make the content a copy of the file `source` reads (of this file's blocksize,
        its content in blocks) — or of its `length` bytes from `first`, a multiple of
        the blocksize — server-side: each new replica is filled by its own datanode, no
        byte passes through this client, holes stay holes. Only before anything is
        written; close commits the copy with its size."""
        self._check_open()
        try:
            blocks = await source.current_blocks()
            bs = self._bs
            end = blocks.size if length is None else first + length
            if self._written or self._buffer or self._current is not None:
                raise InvalidArgumentError("a copy replaces the content: nothing may precede it")
            if blocks.inline is not None:
                raise InvalidArgumentError("a content kept by the namenode has no blocks to copy")
            if blocks.blocksize != bs:
                raise InvalidArgumentError(
                    f"blocks of {blocks.blocksize} bytes cannot become blocks of {bs}"
                )
            if first % bs or not 0 <= first <= end <= blocks.size:
                raise InvalidArgumentError(
                    f"bytes {first}..{end} are no range of the source starting on a block"
                )
            shift, stop = first // bs, (end + bs - 1) // bs  # source blocks [shift, stop)
            for i, extent in enumerate(blocks.extents):
                index = max(extent.file_index, shift)
                while index < min(extent.file_end, stop):
                    # Its read tickets renewed when they are about to expire.
                    extent = (await source.current_blocks()).extents[i]
                    want = min(MAX_RUN_BLOCKS, min(extent.file_end, stop) - index)
                    for target in await self._reserve(index - shift, want):
                        # The last block holds zeros past the copy's end.
                        room = target.block_count * bs
                        content = min(room, end - first - (index - shift) * bs)
                        await fill_extent(
                            self._channels, target, extent, index, content if content < room else 0
                        )
                        index += target.block_count
            self._written = end - first
            self._copied = True
        except BaseException:
            await self._fail()
            raise

    async def copy_from(
        self,
        source: FileReader,
        first: int = 0,
        length: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Write the bytes [first, first+length) of the file `source` reads (default:
        all from `first`): by the datanodes (`copy_blocks`) when its blocks allow it —
        in blocks, of this file's blocksize, `first` on a block — else streamed through
        this client. `progress` is called with the bytes each step copied."""
        self._check_open()
        blocks = source.blocks
        assert blocks is not None
        length = blocks.size - first if length is None else length
        if blocks.inline is None and blocks.blocksize == self._bs and first % self._bs == 0:
            await self.copy_blocks(source, first, length)
            if progress is not None:
                progress(length)
            return
        async for piece in source.stream(first, length):
            await self.write(piece)  # a view of a reused buffer is copied by write
            if progress is not None:
                progress(len(piece))

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
            if not queue.full():  # room: no task and no wait
                queue.put_nowait(chunk)
                continue
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
        """The creation or truncation that open sent, answered."""
        opening, self._opening = self._opening, None
        if opening is not None:
            self.attr = await opening

    async def _allocate(self) -> None:
        next_block = self._written // self._bs
        if self._size_hint is not None and self._size_hint > self._written:
            left = self._size_hint - self._written
            want = min(MAX_RUN_BLOCKS, (left + self._bs - 1) // self._bs)
        else:  # unknown, or past what was announced
            want = RUN_BLOCKS
        until_commit = self._commit_every - self._since_commit
        want = max(1, min(want, (until_commit + self._bs - 1) // self._bs))  # end at a commit
        self._runs = await self._reserve(next_block, want)

    async def _reserve(self, next_block: int, want: int) -> list[Extent]:
        """Blocks for file blocks `next_block` on, up to `want` of them (fewer on a
        nearly full cluster), as extents in file order."""
        assert self._txn is not None and self.attr is not None
        # The first allocation goes out right behind what open sent (ordered in the
        # transaction): one round trip for both.
        opening, self._opening = self._opening, None
        want = min(want, self._max_run)
        while True:
            try:
                allocation = self._txn.allocate(self.attr.ino, next_block, want)
                if opening is not None:
                    self.attr, blocks = await answers(opening, allocation)
                    opening = None
                else:
                    blocks = await allocation
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
        return list(blocks.extents)

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

    async def close(self, *, xattrs: Mapping[bytes, bytes] | None = None) -> Attr:
        """Write what is buffered, wait for every replica, set the size, commit;
        `xattrs`: extended attributes set in the same commit."""
        if self.closed:
            assert self.attr is not None
            return self.attr
        try:
            assert self._txn is not None and self.attr is not None
            t = self._txn
            nothing_sent = self._written == 0 and self._current is None
            if self._inline and nothing_sent and 0 < len(self._buffer) <= t.inline_limit:
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
            attributes = [t.setxattr(self.attr.ino, n, v) for n, v in (xattrs or {}).items()]
            attr = t.setattr(self.attr.ino, size=self._written, mtime_now=not self._times_set)
            committed = t.commit(unless_failed=True)
            opening, self._opening = self._opening, None
            sent = [x for x in (opening, inlined, *attributes) if x is not None]
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
        opening, self._opening = self._opening, None
        if opening is not None:
            await asyncio.gather(opening, return_exceptions=True)  # the abort says why
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
