"""Which blocks a local read should bring into the page cache: those read again while
still among the recently read ones.

With direct I/O a block read once goes from the disk straight into the reader's
shared memory, and the page cache is spared a copy it would likely never serve again
(a file read through once, a cold scan). A block read a second time while it is still
remembered here is hot: that read goes through the page cache, which then serves the
reads after it. The memory is a bounded LRU of block numbers, sized to a share of the
host's memory, as a cache that could hold the blocks would be.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

MEMORY_SHARE = 4  # remember as many blocks as fill 1/MEMORY_SHARE of physical memory


class RecentBlocks:
    """The most recently read `capacity` block numbers of one volume (thread-safe)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity {capacity} is not positive")
        self.capacity = capacity
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def for_host(cls, blocksize: int) -> RecentBlocks:
        """Sized to 1/MEMORY_SHARE of this host's physical memory in blocks."""
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return cls(max(1, memory // MEMORY_SHARE // blocksize))

    def read_again(self, start: int, count: int) -> bool:
        """Note a read of blocks [start, start + count); True if every one of them was
        read recently already."""
        with self._lock:
            blocks = self._blocks
            again = all(block in blocks for block in range(start, start + count))
            for block in range(start, start + count):
                blocks[block] = None
                blocks.move_to_end(block)
            while len(blocks) > self.capacity:
                blocks.popitem(last=False)
            return again
