"""Coalesced reads of committed state: cache misses that happen together become one query.

When many transactions miss the cache at once (64 clients creating new names, a cold
cache after a restart), each miss joins the next batch instead of taking a pooled
connection and a round trip of its own. At most one batch per kind waits for a
connection, gathering every miss until a connection is free; the results go into the
cache with the epoch at which the query began (see cache.py).

Directories that keep missing are read whole (`directory_loads.py`), with the same
connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from plasmafs.namenode.cache import NamespaceCache
from plasmafs.namenode.directory_loads import DirectoryLoads
from plasmafs.namenode.inode_records import Inode
from plasmafs.namenode.store import Store

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


class CoalescingReader:
    """Reads inodes and entries by key, one query per batch of concurrent misses, and
    directories whole when they keep missing."""

    def __init__(
        self, store: Store, cache: NamespaceCache, concurrency: int, load_limit: int = 0
    ) -> None:
        slots = asyncio.Semaphore(concurrency)
        self.directories = DirectoryLoads(store, cache, slots, load_limit)
        self._inodes: _Batcher[int, Inode] = _Batcher(
            store.get_inodes, cache.fill_inode, cache, slots
        )
        self._entries: _Batcher[tuple[int, str], Inode] = _Batcher(
            store.get_entries, self._fill_entry, cache, slots
        )
        self._cache = cache

    def inode(self, ino: int) -> asyncio.Future[Inode | None]:
        """The committed inode `ino` (None if absent); fills the cache."""
        return self._inodes.get(ino)

    async def entry(self, parent: int, name: str) -> int | None:
        """The committed entry's inode number (None if absent); fills the cache with the
        entry and its inode."""
        inode = await self._entries.get((parent, name))
        return None if inode is None else inode.ino

    def _fill_entry(self, key: tuple[int, str], inode: Inode | None, epoch: int) -> None:
        cache = self._cache
        cache.fill_entry(key[0], key[1], None if inode is None else inode.ino, epoch)
        if inode is not None:
            cache.fill_inode(inode.ino, inode, epoch)
