"""Changing a file in place: writes at any offset, appends, holes and truncation, by
copy-on-write of the blocks they touch.

An editor keeps the blocks written since the last commit in memory, each whole (a
partly written block is first read from the committed version). `commit` writes them
to new blocks on every replica, in one transaction that also sets the size: readers
that opened the file before see their version to its end, later opens the new one,
and a failure leaves the file as it was. Blocks are never written in place. A result
no larger than the namenode's inline limit is committed as the file's inline content
instead, and an inline content that grows past it moves to blocks with that commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from plasmafs.client.datapath import DataChannels, write_range
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import MESSAGE_BYTES
from plasmafs.client.transaction import CommittedReads, Transaction, answers
from plasmafs.core.attributes import Attr, BlockList, FileKind
from plasmafs.core.errors import InvalidArgumentError, IsDirectoryError

MAX_DIRTY_BYTES = 64 * 1024 * 1024  # changed blocks kept before a commit is forced
MAX_SIZE = 2**62


class FileEditor:
    """An open file changed in place (binary; random access)."""

    def __init__(
        self,
        txn_factory: Callable[[], Awaitable[Transaction]],
        reads_factory: Callable[[], Awaitable[CommittedReads]],
        channels: DataChannels,
        ino: int,
    ) -> None:
        self._begin = txn_factory
        self._reads = reads_factory
        self._channels = channels
        self.ino = ino
        self.attr: Attr | None = None
        self.size = 0  # the size with the changes not yet committed
        self._bs = 0
        self._dirty: dict[int, bytearray] = {}  # block index -> its whole new content
        self._truncated_to: int | None = None  # lowest size set since the last commit
        self._mtime_ns: int | None = None  # set explicitly since the last commit
        self._reader: FileReader | None = None
        self._base_size = 0  # the size of the version edited (committed last)

    async def open(self) -> FileEditor:
        """Read the file's attributes and block list (the version edited)."""
        self._take(await self._open_reader())
        return self

    async def _open_reader(self) -> FileReader:
        reader = FileReader(await self._reads(), self._channels, self.ino)
        await reader.open()
        assert reader.attr is not None
        if reader.attr.kind is not FileKind.FILE:
            await reader.close()
            raise IsDirectoryError(f"inode {self.ino} is not a regular file")
        return reader

    def _take(self, reader: FileReader) -> None:
        """Edit the version `reader` holds from now on."""
        assert reader.attr is not None
        self._reader, self.attr = reader, reader.attr
        self.size = self._base_size = reader.size
        self._bs = reader.attr.blocksize

    @property
    def dirty(self) -> bool:
        """True if something changed since the last commit."""
        return bool(self._dirty) or self._truncated_to is not None or self.size != self._base_size

    async def pwrite(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Write `data` at `offset` (past the end: the gap reads as zeros)."""
        if offset < 0 or offset + len(data) > MAX_SIZE:
            raise InvalidArgumentError(f"write at {offset} of {len(data)} bytes is out of range")
        bs = self._bs
        view = memoryview(data)
        position = offset
        while view:
            index, within = divmod(position, bs)
            block = await self._block(index)
            n = min(bs - within, len(view))
            block[within : within + n] = view[:n]
            view = view[n:]
            position += n
        self.size = max(self.size, offset + len(data))
        if len(self._dirty) * bs >= MAX_DIRTY_BYTES:
            await self.commit()
        return len(data)

    async def _block(self, index: int) -> bytearray:
        """The new content of block `index`: as committed until changed here."""
        block = self._dirty.get(index)
        if block is None:
            bs = self._bs
            start = index * bs
            # What the committed version holds below the current size (a truncation
            # since cut it: the rest of that block reads as zeros).
            keep = max(0, min(bs, min(self.size, self._committed_limit()) - start))
            old = await self._committed(start, keep) if keep else b""
            block = self._dirty[index] = bytearray(bs)
            block[: len(old)] = old
        return block

    def _committed_limit(self) -> int:
        limit = self._base_size
        if self._truncated_to is not None:
            limit = min(limit, self._truncated_to)
        return limit

    async def _committed(self, offset: int, length: int) -> bytes:
        assert self._reader is not None
        return await self._reader.pread(offset, length)

    async def pread(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset+length) with the changes not yet committed."""
        end = min(self.size, offset + max(length, 0))
        if offset >= end:
            return b""
        bs = self._bs
        out = bytearray()
        position = offset
        while position < end:
            index, within = divmod(position, bs)
            n = min(bs - within, end - position)
            block = self._dirty.get(index)
            if block is not None:
                out += block[within : within + n]
            else:
                limit = self._committed_limit()
                have = max(0, min(n, limit - position))
                if have:
                    out += await self._committed(position, have)
                out += bytes(n - have)
            position += n
        return bytes(out)

    def truncate(self, size: int) -> None:
        """Set the size; bytes past it are gone, and a later extension reads zeros."""
        if not 0 <= size <= MAX_SIZE:
            raise InvalidArgumentError(f"size {size} is out of range")
        bs = self._bs
        for index in [i for i in self._dirty if i * bs >= size]:
            del self._dirty[index]
        last = self._dirty.get(size // bs)
        if last is not None:
            last[size % bs :] = bytes(bs - size % bs)
        if size < self.size:
            low = size if self._truncated_to is None else min(size, self._truncated_to)
            self._truncated_to = low
        self.size = size

    def set_mtime(self, mtime_ns: int) -> None:
        """Keep this modification time at the next commit (as utimes after writes)."""
        self._mtime_ns = mtime_ns

    async def commit(self) -> Attr:
        """Write the changed blocks to new blocks of every replica and commit them with
        the size; durable and visible to every later open when this returns."""
        assert self.attr is not None
        if not self.dirty and self._mtime_ns is None:
            return self.attr
        t = await self._begin()
        try:
            if self.size <= t.inline_limit:
                attr = await self._commit_inline(t)
            else:
                attr = await self._commit_blocks(t)
        except BaseException:
            await t.abort()
            raise
        # The new version is the one edited from now on. Until its reader is open the
        # old one still serves, with the committed changes on top (a read or a look
        # at `dirty` meanwhile sees the file as it is), then they change places at once.
        reader = await self._open_reader()
        self._dirty.clear()
        self._truncated_to = self._mtime_ns = None
        old = self._reader
        self._take(reader)
        if old is not None:
            await old.close()
        return attr

    async def _commit_inline(self, t: Transaction) -> Attr:
        """A small result: the whole content goes to the namenode, with the commit."""
        content = await self.pread(0, self.size)
        sent = (
            t.write_inline(self.ino, content),
            t.setattr(self.ino, mtime_ns=self._mtime_ns, mtime_now=self._mtime_ns is None),
            t.commit(unless_failed=True),
        )
        attr: Attr = (await answers(*sent))[1]
        return attr

    async def _commit_blocks(self, t: Transaction) -> Attr:
        """The changed blocks to new blocks of every replica, committed with the size."""
        assert self._reader is not None and self._reader.blocks is not None
        if self._reader.blocks.inline and self._committed_limit() > 0:
            await self._block(0)  # a content kept inline moves to block 0 with the rest
        end = self._committed_limit()
        if self.size > end and end % self._bs:
            # Growing past a committed end inside a block: that block may hold bytes
            # past the end (a truncation cut them, a copied range brought them), which
            # must read as zeros now. Its new version is its head and zeros.
            await self._block(end // self._bs)
        if self._truncated_to is not None:
            await t.setattr(self.ino, size=self._truncated_to)
        writes = []
        for first, blocks in _runs(self._dirty):
            covered = 0  # the namenode may grant a run in several extents
            while covered < len(blocks):
                at = first + covered
                granted = await t.allocate(self.ino, at, len(blocks) - covered)
                writes.append(self._write(granted, at, blocks[covered:]))
                covered += sum(e.block_count for e in granted.extents)
        await asyncio.gather(*writes)
        # The modification time set by the program, or the namenode's now.
        mtime = self._mtime_ns
        attr = await t.setattr(self.ino, size=self.size, mtime_ns=mtime, mtime_now=mtime is None)
        await t.commit()
        return attr

    async def _write(self, granted: BlockList, first: int, blocks: list[bytearray]) -> None:
        """Every replica of the granted extents gets its blocks, in messages of whole
        blocks as the writers send them."""
        bs = self._bs
        per_message = max(1, MESSAGE_BYTES // bs)
        streams = []
        for extent in granted.extents:
            lo = extent.file_index - first
            mine = blocks[lo : lo + extent.block_count]
            messages = [
                b"".join(mine[k : k + per_message]) for k in range(0, len(mine), per_message)
            ]
            for replica in extent.replicas:
                queue: asyncio.Queue[bytes | memoryview | None] = asyncio.Queue()
                for message in messages:
                    queue.put_nowait(message)
                queue.put_nowait(None)
                streams.append(write_range(self._channels, replica, bs, 0, len(mine), queue))
        await asyncio.gather(*streams)

    async def close(self) -> Attr:
        """Commit what changed and let go of the version read."""
        try:
            return await self.commit()
        finally:
            await self._close_reader()

    async def abort(self) -> None:
        """Drop what changed since the last commit."""
        self._dirty.clear()
        await self._close_reader()

    async def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.close()


def _runs(dirty: dict[int, bytearray]) -> list[tuple[int, list[bytearray]]]:
    """The changed blocks as runs of consecutive indexes: (first index, blocks)."""
    runs: list[tuple[int, list[bytearray]]] = []
    for index in sorted(dirty):
        if runs and runs[-1][0] + len(runs[-1][1]) == index:
            runs[-1][1].append(dirty[index])
        else:
            runs.append((index, [dirty[index]]))
    return runs
