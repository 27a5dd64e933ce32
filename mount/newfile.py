"""A file the mount created in a leased directory and is writing: its content stays
in memory, and is queued for the namenode at close, as long as it fits the namenode's
inline limit (bigger content turns it into an ordinary open file first)."""

from __future__ import annotations

from dataclasses import replace

from plasmafs.core.attributes import Attr


class NewFile:
    """One open file description of a new small file (see the module's docstring)."""

    def __init__(self, attr: Attr, limit: int) -> None:
        self.attr = attr
        self.limit = limit
        self.data = bytearray()
        self.dirty = False  # written since its content was last queued
        self.mtime_ns: int | None = None  # set by the program (or the kernel), if it was
        self.removed = False  # unlinked through this mount: its content goes nowhere
        self.queued = False  # some content of it was queued (the namenode will have it)

    @property
    def ino(self) -> int:
        """The inode open here."""
        return self.attr.ino

    @property
    def size(self) -> int | None:
        """The size with what was written and not queued yet; None if nothing."""
        return len(self.data) if self.dirty else None

    @property
    def writing(self) -> bool:
        """True while something written here is not queued yet."""
        return self.dirty

    def fits(self, offset: int, size: int) -> bool:
        """True if writing `size` bytes at `offset` keeps the content in memory (no
        hole before it, and within the inline limit)."""
        return offset <= len(self.data) and max(len(self.data), offset + size) <= self.limit

    def write(self, offset: int, data: bytes) -> int:
        """Write `data` at `offset` (where `fits` said yes)."""
        self.data[offset : offset + len(data)] = data
        self.dirty = True
        return len(data)

    def to_queue(self) -> bytes:
        """The content, about to be queued (the namenode will then have some of it)."""
        self.queued = True
        return bytes(self.data)

    def read(self, offset: int, size: int) -> bytes:
        """Up to `size` bytes at `offset`."""
        return bytes(self.data[offset : offset + size])

    def set_mtime(self, mtime_ns: int) -> None:
        """The mtime the content is to be queued with."""
        self.mtime_ns = mtime_ns
        self.attr = replace(self.attr, mtime_ns=mtime_ns)
        self.dirty = True

    def truncate(self, size: int) -> None:
        """Cut or zero-extend the content to `size` bytes (size within the limit)."""
        del self.data[size:]
        self.data.extend(bytes(size - len(self.data)))
        self.dirty = True
