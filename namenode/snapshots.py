"""Snapshots: read-only images of a directory's tree, sharing the live files' blocks.

`pfs snapshot create DIR NAME` copies the rows of DIR's tree (inodes, entries,
extents; O(entries) metadata work in PostgreSQL, no data copied) as ordinary inodes
numbered from SNAPSHOT_INO_BASE up, and the copy is reached as `DIR/.snapshot/NAME`:
`.snapshot` is a directory of its own that no entry names (listings of DIR do not
show it, walks of the live tree never enter it, as HDFS and ZFS hide theirs); a
lookup of that name in DIR is answered from the table here. Everything at or above
the base is read-only: `Transactions.lock` refuses an exclusive lock on such an inode
or on an entry in such a directory (EROFS), except to the namenode's own upkeep of
block lists (re-replication, the balancer), so readers, tickets and replica repair
work on snapshot files as on any file.

Blocks are freed only when no extent names them any more (`shared_blocks`): taking a
snapshot counts its blocks up, and every release of a commit, and deleting a
snapshot, counts them down. While a snapshot is taken or deleted, the allocator
defers its decisions on released blocks until the snapshot's counts are in (commits
go on; only the space they free waits), so a block a commit drops after the
snapshot's instant is not freed under it.

Who may: the superuser, or the directory's owner when no directory quota limits the
directory's tree (a snapshot keeps space that quotas do not count: an owner under a
quota could otherwise keep any amount by snapshotting and removing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import (
    InvalidArgumentError,
    NotDirectoryError,
    OperationNotPermittedError,
    ReadOnlyError,
)
from plasmafs.namenode.cache import NamespaceCache
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.inode_records import Inode, in_snapshot
from plasmafs.namenode.locks import SNAPSHOT_UPKEEP_LOCK, LockKey, LockManager, LockOwner
from plasmafs.namenode.principals import Principal
from plasmafs.namenode.shared_blocks import SharedBlocks
from plasmafs.namenode.snapshot_store import SnapshotRow, SnapshotStore
from plasmafs.namenode.store import OutcomeUnknownError

log = logging.getLogger(__name__)
T = TypeVar("T")
LOCK_WAIT = 30.0  # seconds a snapshot change waits for a directory's or upkeep's lock

MAX_SNAPSHOTS_PER_DIRECTORY = 65536  # as HDFS's limit per snapshottable directory


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """A snapshot as listed."""

    name: str
    root_ino: int
    created_ns: int
    inodes: int


class Snapshots:
    """Every directory's snapshots, and taking and deleting them."""

    def __init__(
        self,
        store: SnapshotStore,
        data: FileData,
        cache: NamespaceCache,
        term: Callable[[], int],
        limited: Callable[[int], Awaitable[bool]],
        depose: Callable[[str], None],
        locks: LockManager,
    ) -> None:
        self.store = store
        self.data = data
        self.cache = cache
        self.locks = locks
        self.depose = depose  # when PostgreSQL may have a change whose counts are not in
        self._serial = asyncio.Lock()  # one snapshot change at a time
        self.term = term  # the namenode's current term (NotActiveError if it may not write)
        self.limited = limited  # whether a quota limits a directory's tree
        self._of_dir: dict[int, dict[str, SnapshotRow]] = {}
        # Changed in place only: path resolution holds them (View.snapdirs, .snapdir_parents).
        self.snapdir_by_dir: dict[int, int] = {}
        self.dir_by_snapdir: dict[int, int] = {}

    async def load(self) -> None:
        """Read the snapshots, and count the blocks they share, from PostgreSQL."""
        for row in await self.store.all():
            self._remember(row)
        ranges = await self.store.store.extent_ranges_if_shared()
        if ranges:
            allocator = self.data.allocator
            allocator.shared = SharedBlocks.from_rows(ranges)
            allocator.keep_named(ranges)

    def listed(self, dir_ino: int) -> list[SnapshotInfo]:
        """The snapshots of a directory, oldest first."""
        rows = sorted(self._of_dir.get(dir_ino, {}).values(), key=lambda r: r.created_ns)
        return [SnapshotInfo(r.name, r.root_ino, r.created_ns, r.inodes) for r in rows]

    # --- taking and deleting ----------------------------------------------------------

    async def check_may(self, who: Principal, directory: Inode, what: str) -> None:
        """Refuse unless `who` may take or delete snapshots of `directory`."""
        if directory.kind is not FileKind.DIRECTORY:
            raise NotDirectoryError(f"{what}: not a directory")
        if in_snapshot(directory.ino):
            raise ReadOnlyError(f"{what}: a snapshot is read-only (no snapshot of it)")
        if who.superuser:
            return
        if directory.attr.uid != who.uid:
            raise OperationNotPermittedError(
                f"{what}: only the directory's owner or a superuser takes its snapshots"
            )
        if await self.limited(directory.ino):
            raise OperationNotPermittedError(
                f"{what}: a directory quota limits this tree; only a superuser takes "
                "snapshots in it"
            )

    async def create(self, directory: Inode, name: str) -> SnapshotInfo:
        """Take snapshot `name` of `directory` (permissions checked by the caller)."""
        _check_name(name)
        if len(self._of_dir.get(directory.ino, {})) >= MAX_SNAPSHOTS_PER_DIRECTORY:
            raise InvalidArgumentError(
                f"a directory has at most {MAX_SNAPSHOTS_PER_DIRECTORY} snapshots"
            )
        return await _to_the_end(self._create(directory.ino, name))

    async def _create(self, ino: int, name: str) -> SnapshotInfo:
        # The directory's lock, shared: a removal of it waits (or, first, is seen).
        async with self._changing(("i", ino), exclusive=False):
            taken = await self.store.take(
                self.term(), ino, name, self.snapdir_by_dir.get(ino), time.time_ns()
            )
            # PostgreSQL has the copies: their blocks have one more reference each.
            self._counted(lambda: self.data.allocator.shared.share_all(taken.ranges))
            row = taken.snapshot
            self._remember(row)
            epoch = self.cache.begin_commit()
            self.cache.commit_inode(row.snapdir_ino, taken.snapdir, epoch, False)
            self.cache.commit_entry(row.snapdir_ino, name, row.root_ino, epoch, True)
        log.info("snapshot %r of directory %d taken: %d inodes", name, ino, row.inodes)
        return SnapshotInfo(row.name, row.root_ino, row.created_ns, row.inodes)

    async def delete(self, directory: Inode, name: str) -> None:
        """Delete snapshot `name` of `directory`; blocks nobody else names are freed once
        read tickets for them may have expired."""
        await _to_the_end(self._delete(directory.ino, name))

    async def _delete(self, ino: int, name: str) -> None:
        data = self.data
        shared = data.allocator.shared
        # The upkeep of snapshot files' block lists waits: a replica it dropped from
        # rows deleted here would be counted down twice.
        async with self._changing(SNAPSHOT_UPKEEP_LOCK, exclusive=True):
            # Read tickets for the snapshot's files may be out: its blocks stay unused for
            # a ticket's lifetime (those issued before a restart: the horizon).
            until = max(time.time() + data.read_ticket_ttl, data.held_until(()))
            deleted = await self.store.delete(
                self.term(), ino, name, shared.freed_by, until, time.time_ns()
            )

            def count_down() -> None:
                for datanode, start, count in shared.unshare_all(deleted.ranges):
                    data.allocator.quarantine(datanode, start, count, until)

            self._counted(count_down)
            row = self._of_dir[ino].pop(name)
            epoch = self.cache.begin_commit()
            for gone in deleted.inodes:
                self.cache.commit_inode(gone, None, epoch, False)
                self.cache.extents.put(gone, (), epoch)
            self.cache.commit_entry(row.snapdir_ino, name, None, epoch, False)
            if deleted.snapdir is None:
                del self._of_dir[ino]
                self.snapdir_by_dir.pop(ino, None)
                self.dir_by_snapdir.pop(row.snapdir_ino, None)
            else:
                self.cache.commit_inode(row.snapdir_ino, deleted.snapdir, epoch, False)
        log.info("snapshot %r of directory %d deleted", name, ino)

    @contextlib.asynccontextmanager
    async def _changing(self, key: LockKey, *, exclusive: bool) -> AsyncIterator[None]:
        """One snapshot change at a time, holding `key` in the namenode's lock table,
        with the allocator's decisions on dropped references deferred until its counts
        are in. A change whose outcome in PostgreSQL is unknown leaves the counts
        unknown: this namenode stops serving, and the next one to take over counts
        again."""
        async with self._serial:
            owner = LockOwner("snapshot")
            await self.locks.acquire(owner, key, exclusive=exclusive, wait=LOCK_WAIT)
            allocator = self.data.allocator
            allocator.defer_drops()
            try:
                yield
            except OutcomeUnknownError as exc:
                self.depose(f"a snapshot change's outcome is unknown ({exc})")
                raise
            finally:
                allocator.resume_drops()
                self.locks.release_all(owner)

    def _counted(self, count: Callable[[], None]) -> None:
        """Apply a committed change's counts; if that fails they are unknown."""
        try:
            count()
        except BaseException as exc:
            self.depose(f"a snapshot's block counts could not be applied ({exc!r})")
            raise

    def _remember(self, row: SnapshotRow) -> None:
        self._of_dir.setdefault(row.dir_ino, {})[row.name] = row
        self.snapdir_by_dir[row.dir_ino] = row.snapdir_ino
        self.dir_by_snapdir[row.snapdir_ino] = row.dir_ino


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise InvalidArgumentError(f"not a snapshot name: {name!r}")
    if len(name.encode()) > 255:
        raise InvalidArgumentError("a snapshot name is at most 255 bytes")


async def _to_the_end(work: Coroutine[Any, Any, T]) -> T:
    """`work`'s result; it runs to its end even if the caller is cancelled (a client
    that went away): a change half applied in memory would leave the counts wrong."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_note_failure)
    return await asyncio.shield(task)


def _note_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.info("a snapshot change failed: %s", task.exception())
