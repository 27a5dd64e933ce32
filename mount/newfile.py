"""A file the mount created in a leased directory and is writing: its content stays
in memory until close. Content within the namenode's inline limit is then queued for
the namenode; bigger content (up to KEEP_BYTES, while all such files together keep
at most KEEP_TOTAL) streams to the datanodes at close, in a transaction that also
creates the file if its creation is still queued: one namenode commit per file, and
one round trip before the data moves. Content that outgrows what may be kept, a
change the namenode must make to the file, or the release of its directory turns it
into an ordinary open file (`OpenFile`) on the spot, which from then on answers for
it: the mount keeps the same handle."""

from __future__ import annotations

import asyncio
import errno
from dataclasses import replace

import pyfuse3

from plasmafs.client import At, Client
from plasmafs.core.attributes import Attr
from plasmafs.mount.handles import OpenFile
from plasmafs.mount.writebehind import WriteBehind

# Content a new file keeps in memory until close, at most, and all new files together:
# a 1 MiB file written whole then costs one namenode transaction, not two.
KEEP_BYTES = 4 * 1024 * 1024
KEEP_TOTAL = 64 * 1024 * 1024


class NewFile:
    """One open file description of a new file (see the module's docstring)."""

    def __init__(self, fs: Client, behind: WriteBehind, attr: Attr, limit: int) -> None:
        self.fs = fs
        self.behind = behind
        self.limit = limit
        # The content: the bytes of a single write from offset 0 as they came (no copy
        # for a file written in one write), else a bytearray.
        self.data: bytes | bytearray = bytearray()
        self.dirty = False  # written since its content was last queued
        self.mtime_ns: int | None = None  # set by the program (or the kernel), if it was
        self.removed = False  # unlinked through this mount: its content goes nowhere
        self.queued = False  # some content of it was queued (the namenode will have it)
        self._attr = attr
        self._open: OpenFile | None = None  # what it became once it left memory
        self._counted = 0  # bytes of `data` counted in the write-behind's kept_bytes
        self._turning = asyncio.Lock()  # orders writes with the turn into an OpenFile

    @property
    def attr(self) -> Attr:
        """The file's attributes as last known."""
        return self._attr if self._open is None else self._open.attr

    @attr.setter
    def attr(self, attr: Attr) -> None:
        if self._open is None:
            self._attr = attr
        else:
            self._open.attr = attr

    @property
    def ino(self) -> int:
        """The inode open here."""
        return self.attr.ino

    @property
    def size(self) -> int | None:
        """The size with what was written and not queued (or committed) yet; None if
        nothing."""
        if self._open is not None:
            return self._open.size
        return len(self.data) if self.dirty else None

    @property
    def writing(self) -> bool:
        """True while something written here is not queued (or committed) yet."""
        return self.size is not None

    @property
    def prefetched(self) -> bool:
        """True if reads of it were fetched ahead from the datanodes."""
        return self._open is not None and self._open.prefetched

    @property
    def locked_elsewhere(self) -> bool:
        """False: a file kept in memory here was made here, and nobody else locked it."""
        return False

    async def read(self, offset: int, size: int) -> bytes | memoryview:
        """Up to `size` bytes at `offset`, what was written here included."""
        if self._open is not None:
            return await self._open.read(offset, size)
        return bytes(self.data[offset : offset + size])

    async def write(self, offset: int, data: bytes) -> int:
        """Write `data` at `offset`: in memory while it fits (no hole before it, and
        within what may be kept), else through the ordinary open file it becomes."""
        async with self._turning:
            if self._open is None:
                if self._fits(offset, len(data)):
                    if not self.data and offset == 0 and isinstance(data, bytes):
                        self.data = data
                    else:
                        self._editable()[offset : offset + len(data)] = data
                    self._count()
                    self.dirty = True
                    return len(data)
                await self._leave_memory()
            assert self._open is not None
            return await self._open.write(offset, data)

    def _fits(self, offset: int, size: int) -> bool:
        """True if `size` bytes at `offset` keep the content in memory: no hole
        before them, and within what may be kept."""
        return offset <= len(self.data) and self._may_keep(max(len(self.data), offset + size))

    def _may_keep(self, size: int) -> bool:
        """True if a content of `size` bytes may stay in memory."""
        if size <= self.limit:
            return True
        growth = size - self._counted
        return size <= KEEP_BYTES and self.behind.kept_bytes + growth <= KEEP_TOTAL

    def _editable(self) -> bytearray:
        """The content as a bytearray (copied once from the bytes of a first write)."""
        if not isinstance(self.data, bytearray):
            self.data = bytearray(self.data)
        return self.data

    def _drop_content(self) -> None:
        """Let go of the content kept in memory (and of its share of the total)."""
        self.data = bytearray()
        self._count()

    def _count(self) -> None:
        """Count the content's bytes in the write-behind's total (0 once it is gone)."""
        self.behind.kept_bytes += len(self.data) - self._counted
        self._counted = len(self.data)

    def change_in_memory(self, size: int | None, mtime_ns: int | None) -> bool:
        """Keep a new size and/or mtime with the content in memory (with writeback
        caching the kernel sends times at every close; dd truncates what it opened).
        False, changing nothing, once the file left memory or for a size beyond what
        may be kept."""
        if self._open is not None or (size is not None and not self._may_keep(size)):
            return False
        if size is not None:
            data = self._editable()
            del data[size:]
            data.extend(bytes(size - len(data)))
            self._count()
        if mtime_ns is not None:
            self.mtime_ns = mtime_ns
            self._attr = replace(self._attr, mtime_ns=mtime_ns)
        self.dirty = True
        return True

    async def truncate(self, size: int) -> Attr:
        """Set the size, as an ordinary open file (committed with the content)."""
        return await (await self.settle()).truncate(size)

    async def setattr(self, **changes: int | None) -> Attr:
        """Change attributes along with the content, as an ordinary open file."""
        return await (await self.settle()).setattr(**changes)

    def unlinked(self) -> None:
        """Its name was removed through this mount: its content goes nowhere."""
        self.removed = True

    async def settle(self) -> OpenFile:
        """The ordinary open file it becomes now, if it is not one yet."""
        async with self._turning:
            if self._open is None:
                await self._leave_memory()
            assert self._open is not None
            return self._open

    async def revalidate(self) -> None:
        """Let go of the version read so far, once an ordinary open file (in memory,
        it is all this mount's own)."""
        if self._open is not None:
            await self._open.revalidate()

    async def _leave_memory(self, create_at: At | None = None, *, whole: bool = False) -> None:
        """Become an ordinary open file: the queue is sent (the file exists on the
        namenode then), unless the file's creation was claimed for its writer (then
        created `create_at` with the content), and what was written is written again
        from offset 0, so that the rest streams to the datanodes (`whole`: all of the
        content, at close: blocks are reserved for it alone)."""
        if self.dirty and not self.data:  # a truncation to nothing, or new times
            await self.behind.content(self.ino, self._to_queue(), self.mtime_ns)
        if create_at is None:
            await self.behind.send_reporting()
        attr = self.behind.attr(self.ino) or self._attr
        handle = OpenFile(
            self.fs,
            replace(attr, size=0) if self.data else attr,
            writable=True,
            created_empty=not self.queued,
            create_at=create_at,
            replication=self.behind.replication,
            size_hint=len(self.data) if whole else None,
        )
        self._open = handle
        data = self.data
        self._drop_content()
        if data:
            await handle.write(0, bytes(data))
            if self.mtime_ns is not None:  # set by the program: kept with the content
                await handle.setattr(mtime_ns=self.mtime_ns)

    async def commit(self) -> Attr:
        """Queue what was written (flush, fsync, close), or stream it if it is beyond
        the inline limit; its attributes then. EIO if its directory's table went with
        a lost session."""
        if self._open is not None:
            return await self._open.commit()
        if not self.dirty:
            return self._attr
        if len(self.data) > self.limit:
            return await self._commit_kept()
        self.dirty = False
        queued = await self.behind.content(self.ino, self._to_queue(), self.mtime_ns)
        if queued is not None:
            self._attr = queued
        elif not self.removed:
            raise pyfuse3.FUSEError(errno.EIO)
        return self._attr

    async def _commit_kept(self) -> Attr:
        """Stream the content kept in memory and commit it, with the file's creation
        if that is still queued (`WriteBehind.claim_create`)."""
        async with self._turning:
            if self._open is None:
                claimed = None if self.queued else await self.behind.claim_create(self.ino)
                created = False
                try:
                    await self._leave_memory(create_at=claimed, whole=True)
                    assert self._open is not None
                    attr = await self._open.commit()
                    created = True
                    return attr
                finally:
                    if claimed is not None:
                        if self._open is not None:  # created (or not) by now: never again
                            self._open.create_at = None
                        self.behind.claim_done(self.ino, created=created)
        return await self._open.commit()

    def _to_queue(self) -> bytes:
        """The content, about to be queued (the namenode will then have some of it)."""
        self.queued = True
        return bytes(self.data)

    async def release(self) -> None:
        """The last descriptor closed: queue (or commit) what was written."""
        try:
            if self._open is not None:
                await self._open.release()
            else:
                await self.commit()
        finally:
            self._drop_content()

    async def abort(self) -> None:
        """The mount is going away: content kept in memory is queued all the same
        (the write-behind sends its queue as it closes); an ordinary open file gives
        up what it did not commit."""
        try:
            if self._open is not None:
                await self._open.abort()
            else:
                await self.commit()
        finally:
            self._drop_content()
