"""The parent of each directory the kernel knows through this mount, for the ".."
entry of listings.

The kernel walks ".." through its own dentries and never asks the mount; a listing
still names the parent's inode number, as a local disk's does. The mount learns
where each directory is from what it hands the kernel (lookups, listings, mkdir)
and follows the renames made through it, so ".." names the parent the kernel sees
(a directory moved on another host shows its new parent once the kernel looks it up
there again, as its path does).
"""

from __future__ import annotations

import stat
from collections.abc import Iterable

import pyfuse3

from plasmafs.core.attributes import Attr, FileKind


class DirectoryParents:
    """Where each known directory is: its parent's inode and its name there."""

    def __init__(self) -> None:
        self._where: dict[int, tuple[int, str]] = {}  # directory -> (parent, name)
        self._at: dict[tuple[int, str], int] = {}  # (parent, name) -> directory

    def saw(self, parent: int, name: str, attr: Attr) -> None:
        """The kernel got `attr` as entry `name` of directory `parent`."""
        if attr.kind is FileKind.DIRECTORY:
            self._place(attr.ino, parent, name)

    def of(self, directory: int) -> int:
        """The parent of `directory` (the root's is itself; so is that of one never
        seen, which the kernel cannot list)."""
        where = self._where.get(directory)
        return directory if where is None else where[0]

    def renamed(self, src: tuple[int, str], dst: tuple[int, str], *, exchange: bool) -> None:
        """The entry at `src` moved to `dst` (and with `exchange`, the one at `dst` to
        `src`; without it, whatever was at `dst` is gone)."""
        moved = self._at.pop(src, None)
        other = self._at.pop(dst, None)
        for directory in (moved, other):
            if directory is not None:
                self._where.pop(directory, None)
        if moved is not None:
            self._place(moved, *dst)
        if exchange and other is not None:
            self._place(other, *src)

    def removed(self, parent: int, name: str) -> None:
        """Entry `name` of `parent` is gone."""
        directory = self._at.pop((parent, name), None)
        if directory is not None:
            self._where.pop(directory, None)

    def forget(self, inodes: Iterable[int]) -> None:
        """The kernel let go of these inodes."""
        for ino in inodes:
            where = self._where.pop(ino, None)
            if where is not None and self._at.get(where) == ino:
                del self._at[where]

    def _place(self, directory: int, parent: int, name: str) -> None:
        old = self._where.get(directory)
        if old is not None and self._at.get(old) == directory:
            del self._at[old]
        self._where[directory] = (parent, name)
        self._at[(parent, name)] = directory


def dot_entry(ino: int) -> pyfuse3.EntryAttributes:
    """What a listing hands the kernel for "." or "..": the inode number and the kind
    only (the kernel takes no attributes of them, and counts no lookup)."""
    e = pyfuse3.EntryAttributes()
    e.st_ino = ino
    e.st_mode = stat.S_IFDIR | 0o755
    return e
