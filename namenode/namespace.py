"""The namespace rules: path walk, create, remove, rename, attributes, listing.

Everything here works on a transaction's view (view.py: committed state seen through
the cache, plus the transaction's own change set) and never sees SQL. Each operation
first resolves, locks and validates, and only then changes the change set, so an
operation that fails leaves its transaction as it was. A lock conflict aborts the
transaction (its locks are released at once) and raises ConflictError.

Every operation acts for a caller: a change for its transaction's, fixed when the
transaction began; a read for the `who` it is given. What the caller may do is decided
by permissions.py; an operation checks it before it takes locks (a refused caller holds
none of another user's inodes), and again on what it locked, before any change.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Protocol

from plasmafs.core import paths
from plasmafs.core.attributes import Attr, Extent, FileKind, FsStat
from plasmafs.core.errors import (
    BusyError,
    ConflictError,
    ExistsError,
    InvalidArgumentError,
    IsDirectoryError,
    NoSpaceError,
    NotDirectoryError,
    NotEmptyError,
    NotFoundError,
    OperationNotPermittedError,
    PlasmaError,
    ShutdownError,
    StorageError,
    TransactionError,
)
from plasmafs.core.value_checks import check_blocksize, check_mode, check_replication
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.cache import NamespaceCache
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.coalescing_reader import CoalescingReader
from plasmafs.namenode.committer import Committer
from plasmafs.namenode.cursor_checks import check_cursor
from plasmafs.namenode.directory_leases import LeaseTable
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.inode_records import ROOT_INO, Inode
from plasmafs.namenode.leadership import Leadership
from plasmafs.namenode.listing import list_page
from plasmafs.namenode.locks import LockKey, LockManager, LockOwner
from plasmafs.namenode.permissions import (
    R,
    W,
    X,
    check_access,
    check_chmod,
    check_chown,
    check_create,
    check_remove,
    check_search,
    check_set_times,
    new_owner,
)
from plasmafs.namenode.principals import SUPERUSER, Principal
from plasmafs.namenode.store import Store
from plasmafs.namenode.subtree import Subtrees
from plasmafs.namenode.transaction import Txn, TxnState
from plasmafs.namenode.tree_store import TreeStore
from plasmafs.namenode.view import MAX_DEPTH, View, check_data


class ReplicaAccounting(Protocol):
    """What the namespace asks replica health."""

    def counts(self) -> tuple[int, int, int]:
        """File blocks under-replicated, missing and with a corrupt replica."""
        ...

    def request_verify(self, datanode: int, start: int, count: int) -> None:
        """Have a datanode check blocks a client could not read."""
        ...


INODE_BATCH = 1024  # the inode_numbers sequence's increment
DIRTREE_LOCK: LockKey = ("dirtree",)


class Namespace:
    """The namenode's file system rules over a store, a cache and a lock table."""

    def __init__(
        self,
        store: Store,
        cache: NamespaceCache,
        *,
        default_replication: int,
        default_blocksize: int,
        max_group: int,
        read_concurrency: int,
        data: FileData,
        leadership: Leadership,
        commit_lanes: int = 1,
        inline_limit: int = 0,
        lease_recall_timeout: float = 10.0,
    ) -> None:
        self.store = store
        self.cache = cache
        self.data = data
        self.leadership = leadership
        self.reader = CoalescingReader(store, cache, read_concurrency)
        self.leases = LeaseTable(lease_recall_timeout)
        self.view = View(store, cache, self.reader, self.leases)
        self.subtrees = Subtrees(TreeStore(store), self.view)
        self.locks = LockManager()
        self.committer = Committer(
            store,
            cache,
            max_group,
            self._count_committed,
            leadership.current_term,
            leadership.depose,
            lanes=commit_lanes,
        )
        self.default_replication = check_replication(default_replication)
        self.default_blocksize = check_blocksize(default_blocksize)
        self.inline_limit = inline_limit  # files up to this size may keep content inline
        self.counts: dict[FileKind, int] = {}
        self._ino_next = 0
        self._ino_end = 0
        self._ino_lock = asyncio.Lock()
        self._internal_txns = 0
        self.accounting: ReplicaAccounting | None = None  # set once replica health runs

    async def start(self) -> None:
        """Load the namespace counts and start the committer."""
        self.counts = await self.store.count_kinds()
        self.committer.start()

    async def stop(self) -> None:
        """Finish queued commits."""
        await self.committer.stop()

    # --- transactions ----------------------------------------------------------------

    def begin(self, txn_id: int, label: str, lock_wait: float, who: Principal) -> Txn:
        """A new open transaction whose operations act as `who`."""
        return Txn(txn_id, LockOwner(f"{label}/{txn_id}"), lock_wait, who)

    async def sync(self) -> None:
        """Make every commit acknowledged so far durable (relaxed ones included)."""
        await self.committer.sync()

    async def commit(self, txn: Txn, durable: bool = True) -> None:
        """Make the transaction's changes durable and visible, then release its locks
        (not `durable`: acknowledged before the WAL flush, durable within the
        committer's FLUSH_DELAY or at the next sync).

        Whatever raises or cancels once committing started, the transaction ends: before
        its change set is queued it is aborted here; after, `settle` ends it when the
        group commit is answered, even if the client has gone away meanwhile.
        """
        txn.check_open()
        txn.state = TxnState.COMMITTING
        try:
            if txn.cs.is_empty():
                self._finish(txn, TxnState.COMMITTED)
                return
            if txn.cs.extents_changed:
                await self.data.prepare_commit(txn)
            done = self.committer.enqueue(txn.cs, durable)
        except BaseException as exc:
            txn.abort_reason = f"the commit failed: {exc.__class__.__name__}: {exc}"
            self._finish(txn, TxnState.ABORTED)
            raise

        def settle(fut: asyncio.Future[None]) -> None:
            failed = fut.cancelled() or fut.exception() is not None
            self._finish(txn, TxnState.ABORTED if failed else TxnState.COMMITTED)

        # The locks stay until the change set is written, even if the client goes away.
        done.add_done_callback(settle)
        await asyncio.shield(done)

    def abort(self, txn: Txn, reason: str = "aborted by the client") -> None:
        """Drop the transaction's changes and release its locks (no-op once committing)."""
        if txn.state is TxnState.OPEN:
            txn.abort_reason = reason
            self._finish(txn, TxnState.ABORTED)

    def _finish(self, txn: Txn, state: TxnState) -> None:
        if txn.state in (TxnState.COMMITTED, TxnState.ABORTED):
            return  # ended already: its reservations and locks are gone
        txn.state = state
        try:
            if state is TxnState.ABORTED:
                self.data.aborted_hook(txn.cs)
        finally:
            self.locks.release_all(txn.owner)

    async def _lock(self, txn: Txn, key: LockKey, exclusive: bool) -> None:
        try:
            await self.locks.acquire(txn.owner, key, exclusive=exclusive, wait=txn.lock_wait)
        except ConflictError as exc:
            txn.conflicted = True
            self.abort(txn, f"conflict: {exc}")
            raise

    def _writable(self, txn: Txn | None) -> Txn:
        if txn is None:
            raise TransactionError("changes need a transaction")
        txn.check_open()
        self.leadership.current_term()  # no changes while this namenode may not write
        return txn

    def _count_committed(self, cs: ChangeSet) -> None:
        self.data.committed_hook(cs)
        for ino in cs.created:
            inode = cs.inodes.get(ino)
            if inode is not None:
                self.counts[inode.kind] = self.counts.get(inode.kind, 0) + 1
        for kind in cs.deleted_kinds.values():
            self.counts[kind] = self.counts.get(kind, 0) - 1

    async def _new_ino(self) -> int:
        if self._ino_next >= self._ino_end:
            async with self._ino_lock:
                if self._ino_next >= self._ino_end:
                    base = await self.store.reserve_inode_numbers()
                    self._ino_next, self._ino_end = base, base + INODE_BATCH
        ino = self._ino_next
        self._ino_next += 1
        return ino

    async def _parent_dir(self, t: Txn, where: Place) -> Inode:
        """The directory holding the last component of `where`."""
        parent = await self.view.resolve_place(t.who, t, where.parent(), follow_last=True)
        if parent.kind is not FileKind.DIRECTORY:
            raise NotDirectoryError(f"not a directory: {where.parent_shown}")
        if where.anchored:  # a path's walk searched it already
            a = parent.attr
            check_search(t.who, a.mode, a.uid, a.gid, where.parent_shown)
        return parent

    async def _lock_parent(self, t: Txn, parent: Inode, where: Place) -> Inode:
        """Lock `parent` shared and the entry `where` names in it exclusive, once the
        caller may change the directory (W and X), and return it as locked."""
        what = where.shown
        a = parent.attr
        check_create(t.who, a.mode, a.uid, a.gid, what)
        # A lease is waited for before any lock is taken: the holder's queued changes
        # take locks in the directory as they are sent.
        await self.leases.admit(parent.ino)
        await self._lock(t, ("i", parent.ino), False)
        await self._lock(t, ("e", parent.ino, where.parts[-1]), True)
        fresh = await self.view.inode(t, parent.ino)
        if fresh is None:
            raise NotFoundError(f"directory {where.parent_shown} was removed")
        a = fresh.attr
        check_create(t.who, a.mode, a.uid, a.gid, what)  # a chmod may have come first
        return fresh

    async def _has_children(self, txn: Txn, ino: int) -> bool:
        await self.leases.admit(ino)
        changed = txn.cs.children.get(ino, set())
        gone = {n for n in changed if txn.cs.entries[(ino, n)] is None}
        if len(gone) != len(changed):
            return True
        left = self.cache.entries_left(ino, gone)
        if left is not None:  # every entry is cached: no query
            return left > 0
        committed = await self.store.list_entries(ino, "", len(gone) + 1, False)
        return any(e.name not in gone for e in committed)

    async def _parent_of_dir(self, txn: Txn, ino: int) -> int | None:
        if ino in txn.cs.dir_parents:
            return txn.cs.dir_parents[ino]
        return await self.view.committed_parent(ino)

    # --- reads ---------------------------------------------------------------------------

    async def lookup(self, txn: Txn | None, where: Place, follow: bool, *, who: Principal) -> Attr:
        """Attributes of the inode at a place."""
        if txn is not None:
            txn.check_open()
        return (await self.view.resolve_place(who, txn, where, follow)).attr

    async def getattr(self, txn: Txn | None, ino: int, *, who: Principal) -> Attr:
        """Attributes of inode `ino`."""
        if txn is not None:
            txn.check_open()
        inode = await self.view.inode(txn, ino)
        if inode is None:
            raise NotFoundError(f"no inode {ino}")
        await self.view.check_ancestors(who, txn, inode)
        return inode.attr

    async def readlink(self, txn: Txn | None, where: Place | int, *, who: Principal) -> str:
        """The target of the symbolic link at a place or of inode number `where`."""
        if txn is not None:
            txn.check_open()
        if isinstance(where, int):
            inode = await self.view.inode(txn, where)
            if inode is None:
                raise NotFoundError(f"no inode {where}")
            await self.view.check_ancestors(who, txn, inode)
            shown = f"inode {where}"
        else:
            inode = await self.view.resolve_place(who, txn, where, follow_last=False)
            shown = where.shown
        if inode.target is None:
            raise InvalidArgumentError(f"not a symbolic link: {shown}")
        return inode.target

    async def readdir(
        self,
        txn: Txn | None,
        where: Place,
        after: bytes,
        limit: int,
        max_limit: int,
        *,
        plus: bool,
        who: Principal,
    ) -> tuple[list[tuple[str, Inode]], bool]:
        """One page of a directory: entries sorting after `after`, and whether more follow.
        Names need read permission on the directory; their attributes (`plus`), search
        permission too."""
        if txn is not None:
            txn.check_open()
        directory = await self.view.resolve_place(who, txn, where, follow_last=True)
        if directory.kind is not FileKind.DIRECTORY:
            raise NotDirectoryError(f"not a directory: {where.shown}")
        a = directory.attr
        check_access(who, a.mode, a.uid, a.gid, R | X if plus else R, where.shown)
        await self.leases.admit(directory.ino)
        limit = max(1, min(limit or max_limit, max_limit))
        return await list_page(
            self.store,
            lambda ino: self.view.inode(txn, ino),
            directory.ino,
            txn.cs if txn is not None else None,
            check_cursor(after),
            limit,
        )

    def fsstat(self) -> FsStat:
        """Committed namespace counts and the space of the live datanodes."""
        allocator, live = self.data.allocator, self.data.registry.live()
        capacity = allocator.capacity_blocks(live)
        free = sum(allocator.free_blocks(d) for d in live)
        bs = self.default_blocksize
        under, missing, corrupt = self.accounting.counts() if self.accounting else (0, 0, 0)
        return FsStat(
            files=self.counts.get(FileKind.FILE, 0),
            directories=self.counts.get(FileKind.DIRECTORY, 0),
            symlinks=self.counts.get(FileKind.SYMLINK, 0),
            capacity_bytes=capacity * bs,
            used_bytes=(capacity - free) * bs,
            live_datanodes=len(live),
            blocksize=bs,
            held_bytes=allocator.held_blocks(live) * bs,
            under_replicated_blocks=under,
            missing_blocks=missing,
            corrupt_blocks=corrupt,
        )

    def report_corrupt(self, datanode: int, start: int, count: int) -> None:
        """A client read failed a checksum on a replica: its datanode checks the blocks."""
        if self.accounting is None:
            raise ShutdownError("replica health is not running")
        if count < 1:
            raise InvalidArgumentError("report at least one block")
        self.accounting.request_verify(datanode, start, count)

    async def allocate(
        self, txn: Txn | None, ino: int, file_index: int, count: int
    ) -> tuple[Inode, list[Extent]]:
        """Reserve new blocks for a file range (replacing what was there at commit)."""
        t = self._writable(txn)
        inode = await self._file_to_write(t, ino)
        if inode.data is not None:
            # An inline content moves to blocks whole: block 0 is rewritten with it.
            if file_index != 0:
                raise InvalidArgumentError(
                    f"the content of inode {ino} is inline: write it to blocks from block 0"
                )
            self._put_row(t, inode, inode.attr, None)
        return inode, await self.data.allocate(t, inode, file_index, count, t.who.credential_id)

    async def write_inline(self, txn: Txn | None, ino: int, data: bytes) -> Attr:
        """Replace the whole content of a small file with `data`, kept in its inode:
        no block, no datanode. The size becomes len(data); blocks it had are released."""
        t = self._writable(txn)
        if len(data) > self.inline_limit:
            raise InvalidArgumentError(
                f"inline content is at most {self.inline_limit} bytes, not {len(data)}"
            )
        inode = await self._file_to_write(t, ino)
        await self.data.truncate(t, ino, 0, inode.attr.blocksize)
        attr = replace(inode.attr, size=len(data), ctime_ns=time.time_ns())
        return self._put_row(t, inode, attr, data or None)

    async def _file_to_write(self, t: Txn, ino: int) -> Inode:
        """The file `ino`, locked exclusively once its data may be written by the caller."""
        seen = await self.view.inode(t, ino)
        if seen is None:
            raise NotFoundError(f"no inode {ino}")
        await self.view.check_ancestors(t.who, t, seen)
        check_data(t.who, t, seen.attr, W, f"inode {ino}")
        await self._lock(t, ("i", ino), True)
        inode = await self.view.inode(t, ino)
        if inode is None:
            raise NotFoundError(f"inode {ino} was removed")
        check_data(t.who, t, inode.attr, W, f"inode {ino}")
        if inode.kind is FileKind.DIRECTORY:
            raise IsDirectoryError(f"inode {ino} is a directory")
        if inode.kind is not FileKind.FILE:
            raise InvalidArgumentError(f"inode {ino} is not a regular file")
        return inode

    @staticmethod
    def _put_row(t: Txn, inode: Inode, attr: Attr, data: bytes | None) -> Attr:
        """Write the inode's row with these attributes and inline content: a new
        version once per transaction."""
        new = replace(attr, version=attr.version + (0 if attr.ino in t.cs.inodes else 1))
        t.cs.put_inode(replace(inode, attr=new, data=data))
        return new

    async def blocks(
        self, txn: Txn | None, ino: int, file_index: int, count: int, *, who: Principal
    ) -> tuple[Inode, list[Extent]]:
        """A file's extents with read tickets, as the transaction sees them."""
        if txn is not None:
            txn.check_open()
        inode = await self.view.inode(txn, ino)
        if inode is None:
            raise NotFoundError(f"no inode {ino}")
        await self.view.check_ancestors(who, txn, inode)
        check_data(who, txn, inode.attr, R, f"inode {ino}")
        if inode.data is not None:
            return inode, []  # the content travels with the block list itself
        return inode, await self.data.blocks(txn, inode, file_index, count, who.credential_id)

    # --- changes -------------------------------------------------------------------------

    async def mkdir(
        self, txn: Txn | None, where: Place, mode: int, *, ino: int = 0, lease: bool = False
    ) -> Attr:
        """Create a directory (with inode number `ino` if nonzero: one the caller
        reserved; leased to the caller's session if `lease`)."""
        t = self._writable(txn)
        _new_name(where, ExistsError("/ exists"))
        check_mode(mode)
        parent, name = await self._free_name(t, where)
        ino = ino or await self._new_ino()
        attr = self._new_attr(t.who, parent, FileKind.DIRECTORY, ino, mode, nlink=2)
        self._link_new(t, parent, name, Inode(attr), nlink_delta=+1)
        t.cs.dir_parents[attr.ino] = parent.ino
        if lease:
            self.leases.take(attr.ino)
        return attr

    async def lease_dir(self, ino: int, who: Principal) -> None:
        """Lease existing directory `ino` to the session serving this request: its
        owner's only (in its group unless it is set-group-ID), and only while no other
        session leases it and no transaction has changes under way in it (those hold
        its inode lock shared until they end; a change that starts later waits for the
        lease as any other does)."""
        inode = await self.view.inode(None, ino)
        if inode is None:
            raise NotFoundError(f"no inode {ino}")
        if inode.kind is not FileKind.DIRECTORY:
            raise NotDirectoryError(f"inode {ino} is not a directory")
        a = inode.attr
        # The holder gives new entries its directory's owner and group: only where the
        # namenode would give them the same.
        if new_owner(who, a.mode, a.gid, False, 0)[:2] != (a.uid, a.gid):
            raise OperationNotPermittedError(
                f"only its owner, in its group, may lease directory {ino}"
            )
        if not self.leases.free_for_caller(ino):
            raise BusyError(f"directory {ino} is leased by another session")
        owner = LockOwner(f"lease/{ino}")
        try:
            # No wait: granted or refused at once, so nothing runs between the check
            # and the lease.
            await self.locks.acquire(owner, ("i", ino), exclusive=True, wait=0)
        except ConflictError:
            raise BusyError(f"directory {ino} has changes under way") from None
        try:
            self.leases.take(ino)
        finally:
            self.locks.release_all(owner)

    async def reserve_inodes(self, count: int) -> list[int]:
        """`count` new inode numbers, for a client to give the files it creates."""
        return [await self._new_ino() for _ in range(count)]

    async def create(
        self,
        txn: Txn | None,
        where: Place,
        mode: int,
        replication: int,
        blocksize: int,
        *,
        ino: int = 0,
    ) -> Attr:
        """Create an empty file (with inode number `ino` if nonzero: one the caller
        reserved); EEXIST if the name is taken."""
        t = self._writable(txn)
        _new_name(where, IsDirectoryError("/ is a directory"))
        check_mode(mode)
        replication = check_replication(replication or self.default_replication)
        blocksize = check_blocksize(blocksize or self.default_blocksize)
        if blocksize != self.default_blocksize:
            raise InvalidArgumentError(
                f"blocksize {blocksize} differs from the cluster's {self.default_blocksize}"
            )
        parent, name = await self._free_name(t, where)
        ino = ino or await self._new_ino()
        attr = self._new_attr(t.who, parent, FileKind.FILE, ino, mode, replication=replication)
        self._link_new(t, parent, name, Inode(attr))
        return attr

    async def symlink(self, txn: Txn | None, where: Place, target_raw: bytes) -> Attr:
        """Create a symbolic link to `target_raw`."""
        t = self._writable(txn)
        _new_name(where, ExistsError("/ exists"))
        target = paths.check_symlink_target(target_raw)
        parent, name = await self._free_name(t, where)
        ino = await self._new_ino()
        attr = self._new_attr(t.who, parent, FileKind.SYMLINK, ino, 0o777, size=len(target_raw))
        self._link_new(t, parent, name, Inode(attr, target))
        return attr

    # The steps every new name takes: lock its parent, check the name is free, build the
    # new inode's attributes, link it in.

    async def _free_name(self, t: Txn, where: Place) -> tuple[Inode, str]:
        parent, name = await self._parent_dir(t, where), where.parts[-1]
        # A taken name is EEXIST before any write check, as open(O_CREAT) of an existing
        # file in a directory the caller cannot write.
        if await self.view.entry(t, parent.ino, name) is not None:
            raise ExistsError(f"{where.shown} exists")
        parent = await self._lock_parent(t, parent, where)
        if await self.view.entry(t, parent.ino, name) is not None:
            raise ExistsError(f"{where.shown} exists")
        return parent, name

    def _new_attr(
        self,
        who: Principal,
        parent: Inode,
        kind: FileKind,
        ino: int,
        mode: int,
        *,
        size: int = 0,
        nlink: int = 1,
        replication: int = 0,
    ) -> Attr:
        is_dir = kind is FileKind.DIRECTORY
        uid, gid, mode = new_owner(who, parent.attr.mode, parent.attr.gid, is_dir, mode)
        now = time.time_ns()
        replication = replication or self.default_replication
        return Attr(
            ino, kind, mode, uid, gid, size, now, now, nlink, replication,
            self.default_blocksize, 1,
        )  # fmt: skip

    @staticmethod
    def _link_new(t: Txn, parent: Inode, name: str, inode: Inode, nlink_delta: int = 0) -> None:
        t.cs.put_inode(inode, created=True)
        t.cs.set_entry(parent.ino, name, inode.ino)
        t.cs.touch(parent.ino, inode.attr.mtime_ns, nlink_delta)

    async def unlink(self, txn: Txn | None, where: Place) -> None:
        """Remove a file or symbolic link."""
        t = self._writable(txn)
        _new_name(where, IsDirectoryError("/ is a directory"))
        parent = await self._lock_parent(t, await self._parent_dir(t, where), where)
        name = where.parts[-1]
        victim = await self._locked_entry_inode(t, parent, name, where)
        if victim.kind is FileKind.DIRECTORY:
            raise IsDirectoryError(f"{where.shown} is a directory")
        if victim.kind is FileKind.FILE:
            await self.data.drop_all(t, victim.ino)
        t.cs.set_entry(parent.ino, name, None)
        t.cs.delete_inode(victim.ino, victim.kind)
        t.cs.touch(parent.ino, time.time_ns())

    async def rmdir(self, txn: Txn | None, where: Place) -> None:
        """Remove an empty directory."""
        t = self._writable(txn)
        _new_name(where, BusyError("the root directory cannot be removed"))
        parent = await self._lock_parent(t, await self._parent_dir(t, where), where)
        name = where.parts[-1]
        victim = await self._locked_entry_inode(t, parent, name, where)
        if victim.kind is not FileKind.DIRECTORY:
            raise NotDirectoryError(f"{where.shown} is not a directory")
        if await self._has_children(t, victim.ino):
            raise NotEmptyError(f"{where.shown} is not empty")
        self.leases.forget(victim.ino)
        t.cs.set_entry(parent.ino, name, None)
        t.cs.delete_inode(victim.ino, victim.kind)
        t.cs.touch(parent.ino, time.time_ns(), -1)

    async def _locked_entry_inode(self, t: Txn, parent: Inode, name: str, where: Place) -> Inode:
        """The inode of entry `name` in the locked directory `parent`, locked exclusive
        once the caller may remove the entry (checked before the lock and again after
        it: the inode's owner may change meanwhile)."""
        ino = await self.view.entry(t, parent.ino, name)
        if ino is None:
            raise NotFoundError(f"no such file or directory: {where.shown}")
        seen = await self.view.inode(t, ino)
        if seen is not None:
            self._check_remove(t.who, parent, seen, where)
        await self.leases.admit(ino)  # a leased directory: its queued entries first
        await self._lock(t, ("i", ino), True)
        inode = await self.view.inode(t, ino)
        if inode is None:
            raise NotFoundError(f"no such file or directory: {where.shown}")
        self._check_remove(t.who, parent, inode, where)
        return inode

    @staticmethod
    def _check_remove(who: Principal, parent: Inode, victim: Inode, where: Place) -> None:
        p = parent.attr
        check_remove(who, p.mode, p.uid, p.gid, victim.attr.uid, where.shown)

    async def _locked_dir(self, t: Txn, ino: int, where: Place) -> Inode:
        found = await self.view.inode(t, ino)
        if found is None:
            raise NotFoundError(f"directory {where.parent_shown} was removed")
        return found

    async def rename(self, txn: Txn | None, src: Place, dst: Place, noreplace: bool) -> None:
        """Move an entry atomically, replacing the destination by POSIX rules."""
        t = self._writable(txn)
        src_parts, dst_parts = src.parts, dst.parts
        if not src_parts or not dst_parts:
            raise BusyError("the root directory cannot be renamed or replaced")
        if (
            not src.anchored
            and not dst.anchored
            and len(dst_parts) > len(src_parts)
            and dst_parts[: len(src_parts)] == src_parts
        ):
            raise InvalidArgumentError(f"cannot move {src.shown} into itself")
        who = t.who
        src_dir = await self.view.resolve_place(who, t, src.parent(), follow_last=True)
        dst_dir = await self.view.resolve_place(who, t, dst.parent(), follow_last=True)
        for d, where in ((src_dir, src), (dst_dir, dst)):
            if d.kind is not FileKind.DIRECTORY:
                raise NotDirectoryError(f"not a directory: {where.parent_shown}")
            # Both directories change: W and X on each before any lock.
            check_create(who, d.attr.mode, d.attr.uid, d.attr.gid, where.shown)
        src_name, dst_name = src_parts[-1], dst_parts[-1]
        for ino in sorted({src_dir.ino, dst_dir.ino}):
            await self._lock(t, ("i", ino), False)
        for key in sorted({(src_dir.ino, src_name), (dst_dir.ino, dst_name)}):
            await self._lock(t, ("e", *key), True)
        src_dir = await self._locked_dir(t, src_dir.ino, src)
        dst_dir = await self._locked_dir(t, dst_dir.ino, dst)
        if (src_dir.ino, src_name) == (dst_dir.ino, dst_name):
            await self._locked_entry_inode(t, src_dir, src_name, src)
            return
        moved = await self._locked_entry_inode(t, src_dir, src_name, src)
        is_dir = moved.kind is FileKind.DIRECTORY
        if is_dir and src_dir.ino != dst_dir.ino:
            m = moved.attr  # its ".." entry changes
            check_access(who, m.mode, m.uid, m.gid, W, src.shown)
            await self._lock(t, DIRTREE_LOCK, True)
            await self._check_not_ancestor(t, moved.ino, dst_dir.ino, src)
        replaced_ino = await self.view.entry(t, dst_dir.ino, dst_name)
        replaced: Inode | None = None
        if replaced_ino is not None:
            if noreplace:
                raise ExistsError(f"{dst.shown} exists")
            replaced = await self._locked_entry_inode(t, dst_dir, dst_name, dst)
            if is_dir and replaced.kind is not FileKind.DIRECTORY:
                raise NotDirectoryError(f"{dst.shown} is not a directory")
            if not is_dir and replaced.kind is FileKind.DIRECTORY:
                raise IsDirectoryError(f"{dst.shown} is a directory")
            if is_dir and await self._has_children(t, replaced.ino):
                raise NotEmptyError(f"{dst.shown} is not empty")
            if replaced.kind is FileKind.FILE:
                await self.data.drop_all(t, replaced.ino)
        else:
            at = dst_dir.attr
            check_create(who, at.mode, at.uid, at.gid, dst.shown)
        now = time.time_ns()
        cs = t.cs
        cs.set_entry(src_dir.ino, src_name, None)
        cs.set_entry(dst_dir.ino, dst_name, moved.ino)
        if replaced is not None:
            cs.delete_inode(replaced.ino, replaced.kind)
        bumped = 0 if moved.ino in cs.inodes else 1
        cs.put_inode(
            replace(
                moved, attr=replace(moved.attr, ctime_ns=now, version=moved.attr.version + bumped)
            )
        )
        src_delta = dst_delta = 0
        if is_dir and src_dir.ino != dst_dir.ino:
            cs.dir_parents[moved.ino] = dst_dir.ino
            src_delta, dst_delta = -1, +1
        if replaced is not None and replaced.kind is FileKind.DIRECTORY:
            dst_delta -= 1
        cs.touch(src_dir.ino, now, src_delta)
        cs.touch(dst_dir.ino, now, dst_delta)

    async def _check_not_ancestor(self, t: Txn, moved: int, start: int, src: Place) -> None:
        node: int | None = start
        for _ in range(MAX_DEPTH):
            if node == moved:
                raise InvalidArgumentError(f"cannot move {src.shown} into its own subtree")
            if node == ROOT_INO or node is None:
                return
            node = await self._parent_of_dir(t, node)
        raise StorageError("directory tree deeper than the namenode's walk limit")

    async def setattr(
        self,
        txn: Txn | None,
        *,
        raw: bytes | None,
        ino: int | None,
        mode: int | None,
        uid: int | None,
        gid: int | None,
        mtime_ns: int | None,
        size: int | None,
        replication: int | None,
        mtime_now: bool = False,
    ) -> Attr:
        """Change an inode's attributes; a path target follows symbolic links.
        `mtime_now` sets the mtime to the namenode's clock, which a writer of the file
        may do; any other mtime only its owner."""
        t = self._writable(txn)
        if raw is not None:
            target = await self.view.resolve(t.who, t, paths.split_canonical(raw), follow_last=True)
            what = raw.decode()
        elif ino:
            found = await self.view.inode(t, ino)
            if found is None:
                raise NotFoundError(f"no inode {ino}")
            await self.view.check_ancestors(t.who, t, found)
            target, what = found, f"inode {ino}"
        else:
            raise InvalidArgumentError("setattr needs a path or an inode number")
        if mtime_now and mtime_ns is not None:
            raise InvalidArgumentError("set the mtime to a time or to now, not both")
        if mode is not None:
            check_mode(mode)
        if size is not None or replication is not None:
            if target.kind is FileKind.DIRECTORY:
                raise IsDirectoryError("size and replication apply to files only")
            if target.kind is not FileKind.FILE:
                raise InvalidArgumentError("size and replication apply to files only")
        if size is not None and size < 0:
            raise InvalidArgumentError(f"negative size {size}")
        if replication is not None:
            check_replication(replication)
        asked = _Asked(mode, uid, gid, mtime_ns, mtime_now, size, replication)
        self._check_setattr(t, target.attr, asked, what)
        await self.leases.admit(target.ino)
        await self._lock(t, ("i", target.ino), True)
        current = await self.view.inode(t, target.ino)
        if current is None:
            raise NotFoundError(f"inode {target.ino} was removed")
        a = current.attr
        mode, uid, gid = self._check_setattr(t, a, asked, what)
        if mtime_now:
            mtime_ns = time.time_ns()
        # Only data needs the datanodes now; an empty file's writer asks for them later.
        raised = replication is not None and replication > a.replication
        if raised and await self.data.view(t, a.ino):
            self._check_replication_possible(replication or 0)
        if size is not None:  # blocks past the new end go, whatever the old size said
            await self.data.truncate(t, a.ino, size, a.blocksize)
        changed = replace(
            a,
            mode=a.mode if mode is None else mode,
            uid=a.uid if uid is None else uid,
            gid=a.gid if gid is None else gid,
            mtime_ns=a.mtime_ns if mtime_ns is None else mtime_ns,
            size=a.size if size is None else size,
            replication=a.replication if replication is None else replication,
            ctime_ns=time.time_ns(),
        )
        data = current.data
        if data is not None and size is not None:
            data = data[:size] or None  # a shorter file keeps its first bytes
        new = self._put_row(t, current, changed, data)
        if new.replication != a.replication:
            t.cs.recheck.add(a.ino)
        return new

    def _check_setattr(
        self, t: Txn, a: Attr, asked: _Asked, what: str
    ) -> tuple[int | None, int | None, int | None]:
        """The mode, uid and gid to set (None: unchanged), once the caller may make
        every change asked of inode `a`."""
        who = t.who
        mode, uid, gid = asked.mode, asked.uid, asked.gid
        if mode is not None:
            mode = check_chmod(who, a.uid, a.gid, mode, what)
        if uid is not None or gid is not None:
            uid, gid = check_chown(who, a.uid, a.gid, uid, gid, what)
        if asked.size is not None or asked.replication is not None:
            check_data(who, t, a, W, what)
        if asked.mtime_ns is not None or asked.mtime_now or asked.nothing:
            # Asking nothing still sets the ctime: as a touch to now.
            check_set_times(who, a.mode, a.uid, a.gid, what, now=asked.mtime_ns is None)
        return mode, uid, gid

    def _check_replication_possible(self, replication: int) -> None:
        placeable = len(self.data.registry.placeable())
        if replication > placeable:
            raise NoSpaceError(
                f"replication {replication} needs {replication} live datanodes, "
                f"{placeable} are live and in service"
            )

    async def change_file_blocks(
        self, label: str, ino: int, change: Callable[[Txn], Awaitable[bool]], lock_wait: float
    ) -> bool:
        """Run `change` on the block lists of file `ino` in a transaction of the namenode's
        own that holds the file's exclusive lock; commit if it returns True, else abort.
        False also when the file is gone; ConflictError when the lock stays taken."""
        self._internal_txns += 1
        txn = self.begin(self._internal_txns, label, lock_wait, SUPERUSER)
        try:
            self._writable(txn)
            await self._lock(txn, ("i", ino), True)
            inode = await self.view.inode(txn, ino)
            if inode is None or inode.kind is not FileKind.FILE or not await change(txn):
                self.abort(txn, "nothing to change")
                return False
        except BaseException:
            self.abort(txn, "failed")
            raise
        await self.commit(txn)
        return True


@dataclass(frozen=True, slots=True)
class _Asked:
    """The changes a setattr asks for (None: unchanged)."""

    mode: int | None
    uid: int | None
    gid: int | None
    mtime_ns: int | None
    mtime_now: bool
    size: int | None
    replication: int | None

    @property
    def nothing(self) -> bool:
        """No change at all is asked for."""
        return not self.mtime_now and all(
            v is None
            for v in (self.mode, self.uid, self.gid, self.mtime_ns, self.size, self.replication)
        )


def _new_name(where: Place, at_root: PlasmaError) -> None:
    """Raise `at_root` unless `where` names an entry (not the root itself)."""
    if not where.parts:
        raise at_root
