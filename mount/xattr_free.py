"""Inodes the mount told the kernel, moments ago, have no extended attributes.

`ls -l` asks every file it lists for an extended attribute (security.selinux), one
request to the mount each; a tree of 30,000 entries listed through a mount that did
not just write it asked the namenode 30,000 times. The attributes the mount hands the
kernel (a listing, a lookup, a getattr) say whether the inode has any; for as long as
the kernel may keep those attributes (attr_timeout), the mount answers "none" from
them, no staler than the `stat` the kernel answers itself. A change of an inode's
extended attributes through this mount forgets it at once.
"""

from __future__ import annotations

import time

from plasmafs.core.attributes import Attr

CAPACITY = 1 << 17  # inodes remembered at most (the oldest go first)


class WithoutXattrs:
    """When each inode was last answered to the kernel as having no extended
    attributes (kept in that order), for `lifetime` seconds."""

    def __init__(self, lifetime: float, capacity: int = CAPACITY) -> None:
        self.lifetime = lifetime
        self.capacity = capacity
        self._at: dict[int, float] = {}

    def saw(self, attr: Attr) -> None:
        """`attr` was handed to the kernel now."""
        if self.lifetime <= 0:
            return
        at = self._at
        at.pop(attr.ino, None)  # re-inserted last: the dict stays in time order
        if attr.has_xattrs:
            return
        now = time.monotonic()
        at[attr.ino] = now
        if len(at) > self.capacity:
            self._prune(now)

    def known(self, ino: int) -> bool:
        """Whether `ino` was answered as having none within the lifetime."""
        at = self._at.get(ino)
        return at is not None and time.monotonic() - at < self.lifetime

    def forget(self, ino: int) -> None:
        """`ino`'s extended attributes changed (or may have)."""
        self._at.pop(ino, None)

    def _prune(self, now: float) -> None:
        """Drop what has expired, then the oldest until a tenth below capacity."""
        at = self._at
        keep = self.capacity - self.capacity // 10
        for ino, when in list(at.items()):
            if now - when < self.lifetime and len(at) <= keep:
                break
            del at[ino]
