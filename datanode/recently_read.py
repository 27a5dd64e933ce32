"""Which blocks a local read should bring into the page cache: those read again soon.

With direct I/O a block read once goes from the disk straight into the reader's
shared memory, and the page cache is spared a copy it would likely never serve again
(a file read through once, a cold scan). A block read again within WINDOW seconds is
hot: that read goes through the page cache, which then serves the reads after it.
A block read again only later (a data set read once per job) comes from the disk
again: a copy kept that long would have had to outlive everything read in between.
Hence the time limit: mount_bench's 8 readers read every file a second time about
half a minute after the first pass, and without it that pass went through the page
cache, much slower (its readers row in BENCHMARKS.md; the A/B run is in the history).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

WINDOW = 10.0  # seconds within which a second read makes a block hot
MEMORY_SHARE = 4  # remember at most as many blocks as fill 1/MEMORY_SHARE of memory
MAX_BLOCKS = 1 << 20  # and no more (about 100 MB of this process's memory)


class RecentBlocks:
    """The blocks of one volume read in the last `window` seconds, at most `capacity`
    of them (the least recently read go first); thread-safe."""

    def __init__(self, capacity: int, window: float = WINDOW) -> None:
        if capacity < 1:
            raise ValueError(f"capacity {capacity} is not positive")
        self.capacity = capacity
        self.window = window
        self._read_at: OrderedDict[int, float] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def for_host(cls, blocksize: int) -> RecentBlocks:
        """At most 1/MEMORY_SHARE of this host's physical memory in blocks, and at most
        MAX_BLOCKS."""
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return cls(min(MAX_BLOCKS, max(1, memory // MEMORY_SHARE // blocksize)))

    def read_again(self, start: int, count: int, now: float | None = None) -> bool:
        """Note a read of blocks [start, start + count) at `now` (monotonic seconds);
        True if every one of them was read within the window before it."""
        now = time.monotonic() if now is None else now
        since = now - self.window
        with self._lock:
            read_at = self._read_at
            again = all(
                read_at.get(block, since - 1) >= since for block in range(start, start + count)
            )
            for block in range(start, start + count):
                read_at[block] = now
                read_at.move_to_end(block)
            while read_at and (
                len(read_at) > self.capacity or next(iter(read_at.values())) < since
            ):
                read_at.popitem(last=False)
            return again
