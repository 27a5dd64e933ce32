"""Whole directories read into the cache, a page at a time, when they keep missing.

A namenode knows the directories it created are complete (every entry cached, so a
name missing from one does not exist). Without reading the others, every create in a
directory made before it took over (or restarted) asks PostgreSQL whether its name is
free, and every lookup there warms the cache name by name, for as long as it runs.

Reading a directory costs namenode time per entry, so it is paid for by the misses it
saves: each miss in a directory buys ENTRIES_PER_MISS entries of reading, and a page
is read once it is paid for; the first page is small and each next one twice the
last, so that a small directory is read after a few misses and a large one costs no
more than its misses. A lone lookup in a large directory (a marker file in each of
many job outputs) stays one row's read; a directory being filled or searched is read
in a few pages and then answers every name from the cache. A directory of more than
`limit` entries is left to reads by name.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

from plasmafs.namenode.cache import NamespaceCache
from plasmafs.namenode.store import Store

FIRST_PAGE = 64  # entries read by a directory's first query
PAGE = 1024  # entries read per query at most
# A read by name (batched with others in flight) costs the namenode about what this
# many listed entries cost to read and cache (profiled at 3M and 10M entries): a load
# never costs much more than the reads by name it replaces, whatever the workload, and
# uniform lookups over a namespace larger than the cache, whose loaded entries are
# evicted before anyone asks for them, stay near the cost of reads by name.
ENTRIES_PER_MISS = 8
TRACKED = 10_000  # directories whose misses (or size) are remembered, at most


@dataclass
class _Progress:
    budget: int = 0  # entries that may be read now
    after: str | None = None  # the last name read; None: no load under way
    read: int = 0
    page: int = FIRST_PAGE  # entries the next query reads


class DirectoryLoads:
    """Directories of at most `limit` entries read whole into the cache on demand."""

    def __init__(
        self, store: Store, cache: NamespaceCache, slots: asyncio.Semaphore, limit: int
    ) -> None:
        self._store = store
        self._cache = cache
        self._slots = slots
        self._limit = limit
        self._progress: dict[int, _Progress] = {}
        self._large: dict[int, None] = {}  # directories found to hold more than `limit`
        self._running: dict[int, asyncio.Future[None]] = {}

    def wanted(self, directory: int) -> bool:
        """Count a miss in `directory`; whether a page of it is paid for."""
        if self._limit == 0 or directory in self._large:
            return False
        progress = self._progress.get(directory)
        if progress is None:
            if len(self._progress) >= TRACKED:
                # The oldest eighth at once (one pass: see cache.py's eviction).
                for old in list(itertools.islice(self._progress, TRACKED // 8)):
                    self._forget(old)
            progress = self._progress[directory] = _Progress()
        progress.budget += ENTRIES_PER_MISS
        return progress.budget >= progress.page

    async def load(self, directory: int) -> None:
        """Read the pages of `directory` paid for (joining a read already under way)."""
        running = self._running.get(directory)
        if running is None:
            running = asyncio.ensure_future(self._load(directory))
            self._running[directory] = running
            running.add_done_callback(lambda _: self._running.pop(directory, None))
        await asyncio.shield(running)

    async def _load(self, directory: int) -> None:
        cache = self._cache
        progress = self._progress.get(directory)
        while progress is not None and progress.budget >= progress.page:
            if progress.after is None:
                cache.begin_load(directory)
                progress.after, progress.read = "", 0
            page = min(progress.page, self._limit + 1 - progress.read)
            try:
                async with self._slots:
                    epoch = cache.epoch
                    listed = await self._store.list_entries(
                        directory, progress.after, page, False
                    )  # entries only: a listing leaves out an inode's inline data
            except BaseException:
                self._forget(directory)
                raise
            progress.budget -= progress.page
            progress.page = min(progress.page * 2, PAGE)
            progress.read += len(listed)
            if not cache.fill_loaded(directory, listed, epoch):
                progress.after = None  # spoiled: start again when paid for
            elif progress.read > self._limit:
                self._forget(directory)
                if len(self._large) >= TRACKED:
                    for old in list(itertools.islice(self._large, TRACKED // 8)):
                        del self._large[old]
                self._large[directory] = None
            elif len(listed) < page:
                cache.finish_load(directory)
                self._forget(directory)
            else:
                progress.after = listed[-1].name
            progress = self._progress.get(directory)

    def _forget(self, directory: int) -> None:
        if self._progress.pop(directory, None) is not None:
            self._cache.end_load(directory)
