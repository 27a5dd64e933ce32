"""Coalesced reads of committed state: cache misses that happen together become one query.

When many transactions miss the cache at once (64 clients creating new names, a cold
cache after a restart), each miss joins the next batch instead of taking a pooled
connection and a round trip of its own. At most one batch per kind waits for a
connection, gathering every miss until a connection is free; the results go into the
cache with the epoch at which the query began (see cache.py).

A directory that keeps missing is read whole instead, once, when it is small: after
that every lookup in it, of names that exist or not, is answered from the cache. A
namenode knows the directories it created are complete; without this, every create
in a directory made before it took over (or restarted) asked PostgreSQL whether the
name was free.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from plasmafs.namenode.cache import NamespaceCache
from plasmafs.namenode.inode_records import Inode
from plasmafs.namenode.store import Store

# Misses in one directory before it is read whole: a lone lookup in a directory of
# many entries (a marker file in each of many job outputs) stays one row's read, while
# a directory being filled or searched is read once.
LOAD_AFTER_MISSES = 4
MISS_COUNTS = 10_000  # directories whose misses (or size) are remembered, at most

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Batcher(Generic[K, V]):
    def __init__(
        self,
        fetch: Callable[[list[K]], Awaitable[dict[K, V]]],
        fill: Callable[[K, V | None, int], None],
        cache: NamespaceCache,
        slots: asyncio.Semaphore,
    ) -> None:
        self._fetch = fetch
        self._fill = fill
        self._cache = cache
        self._slots = slots
        self._pending: dict[K, asyncio.Future[V | None]] = {}
        self._armed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.batches = 0
        self.keys = 0

    def get(self, key: K) -> asyncio.Future[V | None]:
        future = self._pending.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._pending[key] = future
            if not self._armed:
                self._armed = True
                task = asyncio.create_task(self._run())
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        return future

    async def _run(self) -> None:
        async with self._slots:
            pending, self._pending = self._pending, {}
            self._armed = False
            epoch = self._cache.epoch
            self.batches += 1
            self.keys += len(pending)
            try:
                found = await self._fetch(list(pending))
            except Exception as exc:
                for future in pending.values():
                    if not future.done():
                        future.set_exception(exc)
                return
            for key, future in pending.items():
                value = found.get(key)
                self._fill(key, value, epoch)
                if not future.done():
                    future.set_result(value)


class _DirectoryLoads:
    """Whole directories of at most `limit` entries read into the cache on demand."""

    def __init__(
        self, store: Store, cache: NamespaceCache, slots: asyncio.Semaphore, limit: int
    ) -> None:
        self._store = store
        self._cache = cache
        self._slots = slots
        self._limit = limit
        self._misses: dict[int, int] = {}  # directory -> misses since it was last read
        self._large: dict[int, None] = {}  # directories found to hold more than `limit`
        self._running: dict[int, asyncio.Future[None]] = {}
        self.loads = 0

    def wanted(self, directory: int) -> bool:
        """Count a miss in `directory`; whether reading it whole is due."""
        if self._limit == 0 or directory in self._large:
            return False
        misses = self._misses.get(directory, 0) + 1
        if misses < LOAD_AFTER_MISSES:
            if len(self._misses) >= MISS_COUNTS:
                self._misses.clear()
            self._misses[directory] = misses
            return False
        self._misses.pop(directory, None)
        return True

    async def load(self, directory: int) -> None:
        """Read `directory` whole into the cache (joining a read already under way)."""
        running = self._running.get(directory)
        if running is None:
            running = asyncio.ensure_future(self._load(directory))
            self._running[directory] = running
            running.add_done_callback(lambda _: self._running.pop(directory, None))
        await asyncio.shield(running)

    async def _load(self, directory: int) -> None:
        cache = self._cache
        async with self._slots:
            epoch = cache.begin_load(directory)
            try:
                # Entries only: a listing leaves out the inline data an inode holds.
                listed = await self._store.list_entries(directory, "", self._limit + 1, False)
            except BaseException:
                cache.end_load(directory)
                raise
        self.loads += 1
        if len(listed) > self._limit:
            cache.end_load(directory)
            if len(self._large) >= MISS_COUNTS:
                del self._large[next(iter(self._large))]
            self._large[directory] = None
            return
        cache.fill_directory(directory, listed, epoch)


class CoalescingReader:
    """Reads inodes and entries by key, one query per batch of concurrent misses, and
    small directories whole when they keep missing."""

    def __init__(
        self, store: Store, cache: NamespaceCache, concurrency: int, load_limit: int = 0
    ) -> None:
        slots = asyncio.Semaphore(concurrency)
        self.directories = _DirectoryLoads(store, cache, slots, load_limit)
        self._inodes: _Batcher[int, Inode] = _Batcher(
            store.get_inodes, cache.fill_inode, cache, slots
        )
        self._entries: _Batcher[tuple[int, str], int] = _Batcher(
            store.get_entries,
            lambda key, ino, epoch: cache.fill_entry(key[0], key[1], ino, epoch),
            cache,
            slots,
        )

    def inode(self, ino: int) -> asyncio.Future[Inode | None]:
        """The committed inode `ino` (None if absent); fills the cache."""
        return self._inodes.get(ino)

    def entry(self, parent: int, name: str) -> asyncio.Future[int | None]:
        """The committed entry's inode number (None if absent); fills the cache."""
        return self._entries.get((parent, name))
