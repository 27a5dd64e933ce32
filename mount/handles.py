"""Open files of the mount: what one open(2) reads and writes through the library.

Reads fetch the block list when the file is opened (close-to-open: each open sees
what was committed before it) and then go straight to the datanodes. Writes stream
through a `FileWriter` of the inode, which replaces the file's content from offset 0
in one transaction; flush (close), fsync and release commit it, so the new content
is durable and visible to every later open. A write anywhere but at the end of what
this handle wrote (an overwrite inside existing data, a hole, an append to content
written before the open) is refused with EOPNOTSUPP: such writes need copy-on-write
of the touched blocks, which the library does not do yet.
"""

from __future__ import annotations

import errno
import logging

import pyfuse3

from plasmafs.client import Client
from plasmafs.client.attributes import Attr
from plasmafs.client.files import FileReader, FileWriter

log = logging.getLogger(__name__)


class OpenFile:
    """One open file description: the inode, its attributes as last known, and the
    reader and writer made for it on first use."""

    def __init__(self, fs: Client, attr: Attr, *, writable: bool) -> None:
        self.fs = fs
        self.attr = attr
        self.writable = writable
        self.reader: FileReader | None = None
        self.writer: FileWriter | None = None
        self.wrote = False  # some content written through this handle was committed

    @classmethod
    async def for_reading(cls, fs: Client, ino: int, *, writable: bool) -> OpenFile:
        """An open file whose block list is fetched now (EACCES now if not readable)."""
        reader = await fs.open(ino, "rb")
        assert isinstance(reader, FileReader) and reader.attr is not None
        handle = cls(fs, reader.attr, writable=writable)
        handle.reader = reader
        return handle

    @property
    def ino(self) -> int:
        """The inode open here."""
        return self.attr.ino

    async def read(self, offset: int, size: int) -> bytes:
        """Up to `size` bytes at `offset` of the version opened (or last committed here)."""
        if self.writer is not None:
            await self.commit()  # read what this handle wrote
        if self.reader is None:
            reader = await self.fs.open(self.ino, "rb")
            assert isinstance(reader, FileReader)
            self.reader = reader
        return await self.reader.pread(offset, size)

    async def write(self, offset: int, data: bytes) -> int:
        """Write `data` at `offset`: sequentially from 0, as a new content of the file."""
        if not self.writable:
            raise pyfuse3.FUSEError(errno.EBADF)
        if self.writer is None:
            if offset != 0 or self.wrote:
                raise _unsupported(f"a write at {offset} of inode {self.ino} not from offset 0")
            writer = await self.fs.open(self.ino, "wb")
            assert isinstance(writer, FileWriter)
            self.writer = writer
            await self._drop_reader()
        elif offset != self.writer.tell():
            at = self.writer.tell()
            raise _unsupported(f"a write at {offset} of inode {self.ino}, not at its end ({at})")
        return await self.writer.write(data)

    async def commit(self) -> None:
        """Make what was written durable and visible (flush, fsync, close)."""
        writer, self.writer = self.writer, None
        if writer is None:
            return
        self.attr = await writer.close()
        self.wrote = True
        await self._drop_reader()

    async def release(self) -> None:
        """The last descriptor closed: commit, let go of the reader."""
        try:
            await self.commit()
        finally:
            await self._drop_reader()

    async def abort(self) -> None:
        """Give up what was written and not committed (the mount is going away)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            await writer.abort()
        await self._drop_reader()

    async def _drop_reader(self) -> None:
        reader, self.reader = self.reader, None
        if reader is not None:
            await reader.close()


def _unsupported(what: str) -> pyfuse3.FUSEError:
    log.info("refused %s: overwrites inside a file are not supported yet", what)
    return pyfuse3.FUSEError(errno.EOPNOTSUPP)
