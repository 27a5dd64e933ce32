"""What the library's file objects share (file_writer.FileWriter,
file_reader.FileReader): Python's io conventions for closed files and unsupported
operations, and the check that an inode is a regular file."""

from __future__ import annotations

import io
import os
from typing import NoReturn

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import (
    IsDirectoryError,
)


class FileObject:
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


def check_regular(attr: Attr, path: str | int) -> Attr:
    """`attr`, unless it is not a regular file's (IsDirectoryError)."""
    if attr.kind is not FileKind.FILE:
        raise IsDirectoryError(f"{path} is not a regular file")
    return attr
