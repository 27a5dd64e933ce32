"""Block lists that came with lookups, kept for the open that follows.

A program opening a file by a name the kernel does not hold makes it send a lookup,
then the open: two namenode round trips (the name, then the block list) before the
first byte could be asked of a datanode. The mount asks for the block list of a
small regular file in the lookup itself and keeps it here a moment. An open of that
inode for reading, by the same caller, takes it: the open still asks the namenode
for the file's attributes, since it must see every version committed before it began
and a lookup may be older than the open (a stat, then an open of the cached name),
but the file's first chunk is read from the datanodes meanwhile. The list is used
only if the attributes are exactly those it came with (any change of the file moves
its ctime); otherwise the open fetches the block list as before.
"""

from __future__ import annotations

import time

from plasmafs.client.callers import LocalCaller
from plasmafs.core.attributes import BlockList

WITHIN = 4 * 1024 * 1024  # bytes a file may hold for its block list to come with a lookup
KEEP_FOR = 2.0  # s a block list waits for its open
KEPT = 1024  # block lists kept at most


class LookedUp:
    """The block lists of recent lookups, by inode and caller."""

    def __init__(self, keep_for: float = KEEP_FOR, capacity: int = KEPT) -> None:
        self.keep_for = keep_for
        self.capacity = capacity
        self._kept: dict[tuple[int, LocalCaller | None], tuple[float, BlockList]] = {}

    def keep(self, ino: int, caller: LocalCaller | None, blocks: BlockList) -> None:
        """Keep the block list a lookup of `ino` by `caller` brought."""
        now = time.monotonic()
        if len(self._kept) >= self.capacity:
            self._kept = {k: v for k, v in self._kept.items() if v[0] > now}
            while len(self._kept) >= self.capacity:  # the oldest go first
                del self._kept[next(iter(self._kept))]
        self._kept.pop((ino, caller), None)
        self._kept[(ino, caller)] = (now + self.keep_for, blocks)

    def take(self, ino: int, caller: LocalCaller | None) -> BlockList | None:
        """The block list kept for an open of `ino` by `caller`, if any and recent
        (it is kept for one open only)."""
        kept = self._kept.pop((ino, caller), None)
        if kept is None or kept[0] <= time.monotonic():
            return None
        return kept[1]
