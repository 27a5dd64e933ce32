"""Open files of the mount: what one open(2) reads and writes through the library.

Reads use the block list fetched when the file was opened (close-to-open: each open
sees what was committed before it) and go straight to the datanodes, in chunks read
ahead once they go from start to end (`prefetch.py`). A file written
from offset 0 while empty (a new file, O_TRUNC, cp, dd) streams through a
`FileWriter`, the fast path: every replica gets the data as it comes. Any other write
(inside existing content, past the end, after a seek back) goes through a
`FileEditor`, which keeps the touched blocks and writes them to new blocks at commit:
never in place. flush (close), fsync and release commit, so the content is durable
and visible to every later open; until then other clients see nothing of it (the
mount sends the reads and writes of its other opens of the file through this one:
mount/operations.py `_through`), and if the mount goes away it is dropped whole.

The kernel may send requests for one open file at the same time (with writeback
caching it writes pages back while the program closes or changes the file): whatever
changes or commits what a handle wrote runs one at a time, so that no write lands in
the middle of a commit and is then forgotten with what was committed.
"""

from __future__ import annotations

import asyncio
import errno
from typing import Protocol

import pyfuse3

from plasmafs.client import At, Client
from plasmafs.client.editing import FileEditor
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.core.attributes import Attr
from plasmafs.mount.prefetch import Prefetch


class FileHandle(Protocol):
    """What the mount asks of every open file description: an `OpenFile`, or a
    `NewFile` kept in memory until it becomes one."""

    attr: Attr

    @property
    def ino(self) -> int: ...
    @property
    def size(self) -> int | None: ...
    @property
    def writing(self) -> bool: ...
    @property
    def prefetched(self) -> bool: ...
    @property
    def locked_elsewhere(self) -> bool: ...
    async def read(self, offset: int, size: int) -> bytes | memoryview: ...
    async def write(self, offset: int, data: bytes) -> int: ...
    def change_in_memory(self, size: int | None, mtime_ns: int | None) -> bool: ...
    async def truncate(self, size: int) -> Attr: ...
    async def setattr(self, **changes: int | None) -> Attr: ...
    def unlinked(self) -> None: ...
    async def settle(self) -> OpenFile: ...
    async def revalidate(self) -> None: ...
    async def commit(self) -> Attr: ...
    async def release(self) -> None: ...
    async def abort(self) -> None: ...


class OpenFile:
    """One open file description: the inode, its attributes as last known, and the
    reader, writer or editor made for it."""

    def __init__(
        self,
        fs: Client,
        attr: Attr,
        *,
        writable: bool,
        created_empty: bool = False,
        create_at: At | None = None,
        replication: int = 0,
        size_hint: int | None = None,
    ) -> None:
        self.fs = fs
        self.attr = attr
        self.writable = writable
        self.reader: FileReader | None = None
        self.writer: FileWriter | None = None
        self.editor: FileEditor | None = None
        self.prefetch: Prefetch | None = None  # with the reader: chunks read ahead
        # Made by this mount and given no content yet: the first writer has nothing to
        # truncate.
        self.created_empty = created_empty
        # Not on the namenode yet: the first writer creates it there (as `attr` says),
        # in the transaction that commits its content.
        self.create_at = create_at
        self.replication = replication  # of a file the first writer creates
        self.size_hint = size_hint  # what the first writer will write, if known
        self._changing = asyncio.Lock()  # held by whatever changes or commits the content
        # Reads under way, by reader: a reader let go of meanwhile (a commit, a lock
        # taken) is closed by the last of its reads, not under them.
        self._reads: dict[FileReader, int] = {}

    @classmethod
    async def for_reading(cls, fs: Client, ino: int, *, writable: bool) -> OpenFile:
        """An open file whose block list is fetched now (EACCES now if not readable)."""
        reader = await _reader(fs, ino)
        assert reader.attr is not None
        handle = cls(fs, reader.attr, writable=writable)
        handle.reader = reader
        return handle

    @classmethod
    def on_reader(cls, fs: Client, reader: FileReader) -> OpenFile:
        """A read-only open file of the version `reader` opened, its first chunk
        fetched from now on (the kernel's first read is about to come)."""
        assert reader.attr is not None
        handle = cls(fs, reader.attr, writable=False)
        handle.reader = reader
        handle.prefetch = Prefetch(reader.pread, reader.size)
        handle.prefetch.start()
        return handle

    @property
    def ino(self) -> int:
        """The inode open here."""
        return self.attr.ino

    @property
    def size(self) -> int | None:
        """The size with what this handle wrote and did not commit yet; None if it has
        nothing uncommitted."""
        if self.writer is not None and not self.writer.closed:  # a failed one is closed
            return self.writer.tell()
        if self.editor is not None and self.editor.dirty:
            return self.editor.size
        return None

    async def read(self, offset: int, size: int) -> bytes | memoryview:
        """Up to `size` bytes at `offset`, this handle's own writes included."""
        if self.writer is not None or self.editor is not None:
            async with self._changing:
                await self._commit_streamed()
                if self.editor is not None:
                    return await self.editor.pread(offset, size)
        if self.reader is None:
            self.reader = await _reader(self.fs, self.ino)
        if self.prefetch is None:
            self.prefetch = Prefetch(self.reader.pread, self.reader.size)
        reader, prefetch = self.reader, self.prefetch
        self._reads[reader] = self._reads.get(reader, 0) + 1
        try:
            return await prefetch.read(offset, size)
        finally:
            left = self._reads.pop(reader) - 1
            if left:
                self._reads[reader] = left
            elif reader is not self.reader:
                await _close(reader, prefetch)

    async def write(self, offset: int, data: bytes) -> int:
        """Write `data` at `offset`."""
        if not self.writable:
            raise pyfuse3.FUSEError(errno.EBADF)
        async with self._changing:
            return await self._write(offset, data)

    async def _write(self, offset: int, data: bytes) -> int:
        if self.writer is not None and offset == self.writer.tell():
            return await self.writer.write(data)
        if self.writer is None and self.editor is None and offset == 0 and self.attr.size == 0:
            if self.create_at is not None:
                writer = await self.fs.open(
                    self.create_at,
                    "wb",
                    known=self.attr,
                    new=True,
                    replication=self.replication,
                    size_hint=self.size_hint,
                )
                self.create_at = None
            else:
                writer = await self.fs.open(
                    self.ino,
                    "wb",
                    known=self.attr,
                    empty=self.created_empty,
                    size_hint=self.size_hint,
                )
            self.created_empty = False
            assert isinstance(writer, FileWriter)
            self.writer = writer
            await self._drop_reader()
            return await writer.write(data)
        editor = await self._editor()
        return await editor.pwrite(offset, data)

    async def truncate(self, size: int) -> Attr:
        """Set the size (committed with the content, at close or fsync)."""
        async with self._changing:
            editor = await self._editor()
            editor.truncate(size)
            return self.attr

    async def setattr(self, **changes: int | None) -> Attr:
        """Change attributes along with what is being written here: in the streaming
        writer's transaction (which holds the inode), or, for the editor, the mtime
        kept for its commit and the rest on the namenode at once."""
        if not changes:
            return self.attr
        async with self._changing:
            return await self._setattr(changes)

    async def _setattr(self, changes: dict[str, int | None]) -> Attr:
        if self.writer is not None:
            self.attr = await self.writer.setattr(**changes)
            return self.attr
        mtime_ns = changes.pop("mtime_ns", None)
        if self.editor is not None and mtime_ns is not None:
            self.editor.set_mtime(mtime_ns)
        if changes:
            self.attr = await self.fs.setattr(self.ino, **changes)
        return self.attr

    @property
    def writing(self) -> bool:
        """True while this handle has written something not committed yet."""
        return self.size is not None

    async def _editor(self) -> FileEditor:
        if self.editor is None:
            await self._commit_streamed()  # the editor starts from a streamed content
            editor = await self.fs.open(self.ino, "r+b")
            assert isinstance(editor, FileEditor)
            self.editor = editor
            await self._drop_reader()
        return self.editor

    @property
    def prefetched(self) -> bool:
        """True if reads went through chunks fetched ahead (the kernel caches them)."""
        return self.prefetch is not None

    @property
    def locked_elsewhere(self) -> bool:
        """Whether another mount or client held a lock on the file when it was opened.
        Hosts that share a file through locks see each other's writes once a lock
        changes hands; this host's page cache would serve what it read before, and a
        mapping shared between hosts cannot be kept coherent at all (SQLite's WAL
        index): the mount opens such a file without the page cache (FUSE direct I/O),
        and the kernel then refuses to map it shared (ENODEV)."""
        blocks = self.reader.blocks if self.reader is not None else None
        return blocks is not None and blocks.locked_elsewhere

    def change_in_memory(self, size: int | None, mtime_ns: int | None) -> bool:
        """False: an ordinary open file keeps no content in memory (see `NewFile`)."""
        return False

    def unlinked(self) -> None:
        """Its name was removed: nothing changes, it stays readable and writable."""

    async def settle(self) -> OpenFile:
        """Itself: it is an ordinary open file already."""
        return self

    async def revalidate(self) -> None:
        """Let go of the version read so far (a lock was taken: what its last holder
        wrote must show); what this handle wrote and did not commit stays."""
        async with self._changing:
            if self.editor is not None and not self.editor.dirty:
                editor, self.editor = self.editor, None
                await editor.abort()
            if self.writer is None and self.editor is None:
                await self._drop_reader()

    async def commit(self) -> Attr:
        """Make what was written durable and visible (flush, fsync, close); the
        attributes then."""
        async with self._changing:
            await self._commit_streamed()
            if self.editor is not None:
                self.attr = await self.editor.commit()
            return self.attr

    async def _commit_streamed(self) -> None:
        """Close the streaming writer, if there is one (its content is committed)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            self.attr = await writer.close()
            await self._drop_reader()  # it holds the version before

    async def release(self) -> None:
        """The last descriptor closed: commit, let go of everything."""
        try:
            await self.commit()
        finally:
            editor, self.editor = self.editor, None
            if editor is not None:
                await editor.abort()
            await self._drop_reader()

    async def abort(self) -> None:
        """Give up what was written and not committed (the mount is going away)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            await writer.abort()
        editor, self.editor = self.editor, None
        if editor is not None:
            await editor.abort()
        await self._drop_reader()

    async def _drop_reader(self) -> None:
        prefetch, self.prefetch = self.prefetch, None
        reader, self.reader = self.reader, None
        if reader is None:
            if prefetch is not None:
                await prefetch.close()
        elif reader not in self._reads:  # else the last of its reads closes it
            await _close(reader, prefetch)


async def _close(reader: FileReader, prefetch: Prefetch | None) -> None:
    if prefetch is not None:
        await prefetch.close()
    await reader.close()


async def _reader(fs: Client, ino: int) -> FileReader:
    """The committed version of inode `ino`, its block list fetched."""
    reader = await fs.open(ino, "rb")
    assert isinstance(reader, FileReader)
    return reader
