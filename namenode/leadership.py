"""One active namenode per database: the active lock, the term, and what happens when
the lock is lost.

The active namenode holds a PostgreSQL session advisory lock and, with it, takes the
next term; every group commit carries the term and PostgreSQL refuses it once another
namenode took a newer one (sql/0004), so a deposed namenode can never commit. The lock
lives as long as its connection: if PostgreSQL restarts or the connection breaks, this
namenode stops serving writes at once and tries to take the lock again. If nobody else
led meanwhile (the term is still its own) and every acknowledged commit was durable
(no relaxed commit awaited its WAL flush), it takes the next term and serves again;
otherwise its cache and allocator may be stale, so it is deposed and the daemon exits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from plasmafs.core.errors import BusyError, NotActiveError, StorageError
from plasmafs.namenode.store import Store

log = logging.getLogger(__name__)

# An arbitrary constant shared by every namenode of a database: "pfs-actv" in ASCII.
ACTIVE_LOCK_KEY = 0x7066732D61637476


class Leadership:
    """This namenode's claim to be the active one."""

    def __init__(
        self,
        store: Store,
        check_interval: float,
        on_deposed: Callable[[str], None],
    ) -> None:
        self._store = store
        self._check_interval = check_interval
        self._on_deposed = on_deposed
        self.term = 0
        self.leading = False
        self.deposed = ""
        self._watch: asyncio.Task[None] | None = None

    async def take(self) -> None:
        """Take the active lock and a new term; BusyError if another namenode is active."""
        if not await self._store.hold_active_lock(ACTIVE_LOCK_KEY):
            raise BusyError("another namenode is already serving this database")
        self.term = await self._store.take_term()
        self.leading = True
        log.info("active namenode, term %d", self.term)

    def start(self) -> None:
        """Watch the lock's connection from now on."""
        self._watch = asyncio.create_task(self._watch_lock(), name="pfs-leadership")

    async def stop(self) -> None:
        """Stop watching."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)

    def current_term(self) -> int:
        """The term to commit with; NotActiveError while this namenode may not write."""
        if not self.leading:
            raise NotActiveError(self.deposed or "this namenode lost its active lock; retry")
        return self.term

    def depose(self, reason: str) -> None:
        """Stop writing for good (another namenode took a newer term)."""
        if self.deposed:
            return
        self.leading = False
        self.deposed = f"this namenode is no longer the active one: {reason}"
        log.error("%s", self.deposed)
        self._on_deposed(self.deposed)

    async def _watch_lock(self) -> None:
        while not self.deposed:
            await asyncio.sleep(self._check_interval)
            if await self._store.holder_alive(timeout=max(self._check_interval, 1.0)):
                continue
            self.leading = False
            log.error("the active lock's PostgreSQL session ended; writes stop until retaken")
            await self._retake()

    async def _retake(self) -> None:
        while True:
            try:
                if not await self._store.hold_active_lock(ACTIVE_LOCK_KEY):
                    self.depose("another namenode holds the active lock")
                    return
                current = await self._store.current_term()
                if current != self.term:
                    self.depose(f"another namenode took term {current} meanwhile")
                    return
                if self._store.unflushed:
                    # PostgreSQL restarted: commits acknowledged before their WAL flush
                    # may be gone, and the cache and allocator would still hold them.
                    self.depose("PostgreSQL restarted before relaxed commits were flushed")
                    return
                self.term = await self._store.take_term()
            except StorageError as exc:
                log.warning("cannot retake the active lock yet: %s", exc)
                await asyncio.sleep(self._check_interval)
                continue
            self.leading = True
            log.info("active lock retaken, term %d", self.term)
            return
