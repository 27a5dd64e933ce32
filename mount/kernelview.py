"""What the kernel believes about files while it caches writes (`-o writeback_cache`).

With FUSE's writeback cache the kernel gathers small writes into large ones, and in
exchange it keeps each regular file's size and mtime itself: it ignores the sizes
and mtimes the mount answers later, so another client's change to a file would stay
invisible here for as long as the kernel keeps that file's inode. The mount
remembers the size and mtime each kernel inode started from (or that the mount's own
commits gave it). When the namenode's differ and no descriptor of the file is open
here (so the kernel holds nothing of this mount's that is not committed):

- a lookup answers with a new generation number: the kernel then drops its inode and
  makes a new one from the fresh attributes, so `stat` is as fresh as the entry
  lifetime allows, as without the cache;
- an open fails with ESTALE, on which the kernel looks the path up again
  (LOOKUP_REVAL, so the lookup above runs) and retries the open once: every open sees
  what was committed before it (close-to-open), as without the cache.

Inode numbers are never reused, so generations only ever mark such refreshes.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

import pyfuse3

from plasmafs.core.attributes import Attr, FileKind


def _version(attr: Attr) -> tuple[int, int]:
    return attr.size, attr.mtime_ns


class KernelView:
    """The size and mtime the kernel keeps for each regular file it knows."""

    def __init__(self, open_here: Callable[[int], bool]) -> None:
        self._open_here = open_here  # True if a descriptor of the inode is open here
        self._seen: dict[int, Attr] = {}
        self._generation: dict[int, int] = {}
        self._stale: set[int] = set()  # an open found the kernel's view old
        self._refreshed: set[int] = set()  # given a new generation, not opened since

    def generation(self, ino: int) -> int:
        """The generation number the kernel knows inode `ino` by."""
        return self._generation.get(ino, 0)

    def listed(self, attr: Attr) -> None:
        """`attr` went to the kernel in a new entry (create, listing): a kernel inode
        made from it starts with its size and mtime; one it had keeps its own."""
        if attr.kind is FileKind.FILE:
            self._seen.setdefault(attr.ino, attr)

    def looked_up(self, attr: Attr) -> int:
        """The generation to answer a lookup of `attr` with: a new one if the kernel's
        view of the file is older and nothing of it is open here."""
        if attr.kind is not FileKind.FILE:
            return self.generation(attr.ino)
        seen = self._seen.get(attr.ino)
        if seen is None:
            self._seen[attr.ino] = attr
        elif (_version(seen) != _version(attr) or attr.ino in self._stale) and not self._open_here(
            attr.ino
        ):
            self._generation[attr.ino] = self.generation(attr.ino) + 1
            self._seen[attr.ino] = attr
            self._stale.discard(attr.ino)
            self._refreshed.add(attr.ino)
        return self.generation(attr.ino)

    def opening(self, attr: Attr) -> None:
        """Raise ESTALE if the kernel's view of file `attr` (just read from the
        namenode) is older and nothing of it is open here."""
        if attr.kind is not FileKind.FILE or self._open_here(attr.ino):
            return
        if attr.ino in self._refreshed:  # looked up again for this open: take it
            self._refreshed.discard(attr.ino)
            return
        seen = self._seen.get(attr.ino)
        if seen is not None and _version(seen) != _version(attr):
            self._stale.add(attr.ino)
            raise pyfuse3.FUSEError(errno.ESTALE)

    def committed(self, attr: Attr) -> None:
        """This mount changed file `attr` (the kernel made the same change itself)."""
        if attr.kind is FileKind.FILE:
            self._seen[attr.ino] = attr

    def unchanged(self, ino: int, mtime_ns: int | None) -> Attr | None:
        """The attributes of file `ino` if an mtime of `mtime_ns` (None: kept) is the
        one it has: the kernel sends its times back whenever it writes the inode out
        (after a close, an unlink, when it lets go of it), and those need no change."""
        seen = self._seen.get(ino)
        if seen is None or (mtime_ns is not None and mtime_ns != seen.mtime_ns):
            return None
        return seen

    def forget(self, inodes: list[int]) -> None:
        """The kernel let go of these inodes."""
        for ino in inodes:
            self._seen.pop(ino, None)
            self._generation.pop(ino, None)
            self._stale.discard(ino)
            self._refreshed.discard(ino)


class NoWritebackView:
    """The `KernelView` of a mount without writeback caching: the kernel takes the
    sizes and mtimes the mount answers, so there is nothing to remember."""

    def generation(self, ino: int) -> int:
        """0: the kernel never needs a fresh inode."""
        return 0

    def listed(self, attr: Attr) -> None:
        """Nothing to remember."""

    def looked_up(self, attr: Attr) -> int:
        """0: the kernel never needs a fresh inode."""
        return 0

    def opening(self, attr: Attr) -> None:
        """Every open may go on: the kernel's view is the mount's."""

    def committed(self, attr: Attr) -> None:
        """Nothing to remember."""

    def unchanged(self, ino: int, mtime_ns: int | None) -> Attr | None:
        """None: the kernel sends no times of its own."""
        return None

    def forget(self, inodes: list[int]) -> None:
        """Nothing to forget."""
