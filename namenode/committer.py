"""Group commit: change sets that are ready together go to PostgreSQL in one transaction.

A few writer loops ("lanes", each with its own PostgreSQL connection and so its own
backend process) take every change set queued while they were busy, so a single WAL
flush acknowledges many commits and the PostgreSQL work of groups proceeds in parallel.
Transactions never conflict with each other's change sets (they hold exclusive locks
on what they change until their commit is answered); the only rows two lanes may both
write are directories touched commutatively (mtime, link count), which PostgreSQL's
row locks order. After PostgreSQL acknowledged a group, its changes go into the cache,
and only then are the waiting commits answered.

A commit may ask to be acknowledged before its WAL flush (relaxed): a group of only
such commits is written with synchronous_commit off. It is atomic all the same, and
becomes durable with the next durable group, a `sync`, or the flush this committer
runs FLUSH_DELAY after the last relaxed group at the latest (`Store.unflushed` counts
what is not known to be durable yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import NotActiveError, PlasmaError, ShutdownError, StorageError
from plasmafs.namenode.cache import NamespaceCache
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.store import OutcomeUnknownError, RetryableStoreError, Store

log = logging.getLogger(__name__)


CommitObserver = Callable[[ChangeSet], None]
FLUSH_DELAY = 1.0  # seconds from the last relaxed group to the flush that makes it durable


@dataclass(slots=True)
class _Pending:
    changeset: ChangeSet
    done: asyncio.Future[None]
    durable: bool = True


@dataclass(slots=True)
class CommitStats:
    """Counters the namenode exports."""

    commits: int = 0
    groups: int = 0
    failed: int = 0


class Committer:
    """Queues change sets and writes them in groups."""

    def __init__(
        self,
        store: Store,
        cache: NamespaceCache,
        max_group: int,
        term: Callable[[], int],
        on_term_ended: Callable[[str], None],
        *,
        observers: Sequence[CommitObserver],
        on_group: Callable[[int], None] | None = None,
        lanes: int = 1,
    ) -> None:
        self._store = store
        self._cache = cache
        self._max_group = max_group
        # Told of every committed change set, in order, once the cache holds it.
        self._observers = observers
        self._on_group = on_group
        self._term = term  # the namenode's term; raises NotActiveError while it may not write
        self._on_term_ended = on_term_ended
        self._queue: list[_Pending] = []
        self._wakeup = asyncio.Event()
        self._lanes = lanes
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self.stats = CommitStats()
        self._flusher: asyncio.Task[None] | None = None
        # Told when a commit's outcome is unknown (PostgreSQL may have applied it): what
        # they keep beside the cache must be read again.
        self.on_unknown: list[Callable[[str], None]] = []
        self._running = asyncio.Event()  # clear: lanes take no new group (`quiet`)
        self._running.set()
        self._writing = 0  # groups taken and not yet answered
        self._idle = asyncio.Event()  # set whenever no group is being written
        self._idle.set()

    def start(self) -> None:
        """Start the writer loop."""
        self._tasks = [
            asyncio.create_task(self._run(lane), name=f"pfs-committer-{lane}")
            for lane in range(self._lanes)
        ]

    async def stop(self) -> None:
        """Write what is queued, make it durable, then stop the loop."""
        self._closing = True
        self._wakeup.set()
        await asyncio.gather(*self._tasks)
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        if self._store.unflushed:
            try:
                await self.sync()
            except PlasmaError as exc:
                log.error("could not flush relaxed commits at shutdown: %s", exc)

    @contextlib.asynccontextmanager
    async def quiet(self) -> AsyncIterator[None]:
        """A moment in which every commit PostgreSQL acknowledged has been applied to
        the cache and told to the observers, and no other is being written (commits
        queue meanwhile): for reading a state that the observers' next news follows
        exactly. Keep it short."""
        self._running.clear()
        try:
            await self._idle.wait()
            yield
        finally:
            self._running.set()

    def enqueue(self, changeset: ChangeSet, durable: bool = True) -> asyncio.Future[None]:
        """Queue `changeset`; the future resolves once PostgreSQL acknowledged it (and,
        if `durable`, once it is durable)."""
        if self._closing:
            raise ShutdownError("the namenode is shutting down")
        loop = asyncio.get_running_loop()
        pending = _Pending(changeset, loop.create_future(), durable)
        self._queue.append(pending)
        self._wakeup.set()
        return pending.done

    async def _run(self, lane: int) -> None:
        while True:
            while not self._queue and not self._closing:
                self._wakeup.clear()
                await self._wakeup.wait()
            if not self._queue:
                self._wakeup.set()  # let the other lanes see the closing too
                return
            if not self._running.is_set():
                await self._running.wait()
                continue
            group = self._queue[: self._max_group]
            del self._queue[: self._max_group]
            if self._queue:
                self._wakeup.set()  # more for an idle lane
            self._writing += 1
            self._idle.clear()
            try:
                await self._write(group, lane)
            except Exception as exc:  # a bug after the write must not stop the lane
                log.exception("group commit of %d failed after the write", len(group))
                _outcome_unknown(group)
                self._cache.invalidate_all()
                self._unknown(f"a group commit failed after its write: {exc}")
                self._settle_failed(group, StorageError(f"commit outcome unknown: {exc}"))
            finally:
                self._writing -= 1
                if not self._writing:
                    self._idle.set()

    async def _write(self, group: list[_Pending], lane: int, attempt: int = 1) -> None:
        try:
            term = self._term()
        except NotActiveError as exc:
            self.stats.failed += len(group)
            self._settle_failed(group, exc)
            return
        durable = any(p.durable for p in group)
        began = time.perf_counter()
        try:
            touched = await self._store.apply(
                [p.changeset for p in group], lane, term, durable=durable
            )
        except NotActiveError as exc:  # another namenode took a newer term
            self.stats.failed += len(group)
            self._on_term_ended(str(exc))
            self._settle_failed(group, exc)
            return
        except Exception as exc:
            if isinstance(exc, RetryableStoreError) and attempt < 5:
                log.info("group commit of %d: %s; retrying", len(group), exc)
                await self._write(group, lane, attempt + 1)
                return
            if isinstance(exc, OutcomeUnknownError) or len(group) == 1:
                await self._fail(group, exc, lane)
                return
            # One bad change set must not fail the others: write them one by one.
            log.warning("group commit of %d failed (%s); retrying singly", len(group), exc)
            for pending in group:
                await self._write([pending], lane)
            return
        share = (time.perf_counter() - began) / len(group)
        for pending in group:
            pending.changeset.database_seconds = share
        if not durable:
            self._schedule_flush()
        self._publish(group, touched)

    async def sync(self) -> None:
        """Make every commit acknowledged so far durable."""
        await self._store.sync()

    def _schedule_flush(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_later(), name="pfs-flush")

    async def _flush_later(self) -> None:
        while self._store.unflushed:
            await asyncio.sleep(FLUSH_DELAY)
            try:
                await self.sync()
            except PlasmaError as exc:
                log.warning("flushing relaxed commits failed: %s", exc)

    def _publish(self, group: list[_Pending], touched: list) -> None:
        cache = self._cache
        epoch = cache.begin_commit()
        for pending in group:
            cs = pending.changeset
            created = cs.created
            for ino, inode in cs.inodes.items():
                cache.commit_inode(ino, inode, epoch, ino in created)
                if ino in created and inode is not None and inode.kind is FileKind.DIRECTORY:
                    cache.mark_complete(ino)
            for (parent, name), target in cs.entries.items():
                cache.commit_entry(parent, name, target, epoch, target in created)
            for observe in self._observers:
                observe(cs)
        for inode in touched:
            # Two lanes may touch one directory; its version orders their rows.
            cache.commit_newer_inode(inode, epoch)
        stats = self.stats
        stats.commits += len(group)
        stats.groups += 1
        if self._on_group is not None:
            self._on_group(len(group))
        for pending in group:
            if not pending.done.done():
                pending.done.set_result(None)

    async def _fail(self, group: list[_Pending], exc: BaseException, lane: int) -> None:
        self.stats.failed += len(group)
        if isinstance(exc, OutcomeUnknownError):
            # PostgreSQL may or may not have committed: forget everything cached.
            log.error("commit outcome unknown, connection failed: %s", exc)
            _outcome_unknown(group)
            self._cache.invalidate_all()
            self._unknown(f"a commit's outcome is unknown: {exc}")
            await self._store.reset_writer(lane)
            error: PlasmaError = StorageError(
                f"commit outcome unknown: the metadata store connection failed ({exc})"
            )
        else:
            log.error("commit failed: %s", exc)
            error = StorageError(f"commit failed in the metadata store: {exc}")
        self._settle_failed(group, error)

    def _unknown(self, why: str) -> None:
        for tell in self.on_unknown:
            tell(why)

    @staticmethod
    def _settle_failed(group: list[_Pending], error: PlasmaError) -> None:
        for pending in group:
            if not pending.done.done():
                pending.done.set_exception(error)


def _outcome_unknown(group: list[_Pending]) -> None:
    """Mark the group's change sets: PostgreSQL may have them or not."""
    for pending in group:
        pending.changeset.outcome_unknown = True
