"""The namespace rules: path walk, lookup, listing, create, remove, rename, leases.

Everything here works on a transaction's view (view.py: committed state seen through
the cache, plus the transaction's own change set) and never sees SQL. Each operation
first resolves, locks and validates, and only then changes the change set, so an
operation that fails leaves its transaction as it was. A lock conflict aborts the
transaction (its locks are released at once) and raises ConflictError.

Every operation acts for a caller: a change for its transaction's, fixed when the
transaction began; a read for the `who` it is given. What the caller may do is decided
by permissions.py; an operation checks it before it takes locks (a refused caller holds
none of another user's inodes), and again on what it locked, before any change.
Changes of attributes follow the same rules in attribute_rules.py, those of a file's
content in file_rules.py; transactions themselves begin and end in transactions.py.
"""

from __future__ import annotations

import time
from collections.abc import Container
from dataclasses import replace

from plasmafs.core import paths
from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import (
    BusyError,
    ConflictError,
    ExistsError,
    InvalidArgumentError,
    IsDirectoryError,
    NotDirectoryError,
    NotEmptyError,
    NotFoundError,
    OperationNotPermittedError,
    PlasmaError,
    ReadOnlyError,
    StorageError,
    TooManyLinksError,
)
from plasmafs.core.trash_names import TRASH_NAME
from plasmafs.core.value_checks import check_blocksize, check_mode, check_replication
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.cache import NamespaceCache
from plasmafs.namenode.cursor_checks import check_cursor
from plasmafs.namenode.directory_leases import LeaseTable
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.inode_numbers import InodeNumbers
from plasmafs.namenode.inode_records import ROOT_INO, SNAPSHOT_DIR_NAME, Inode, in_snapshot
from plasmafs.namenode.listing import list_page
from plasmafs.namenode.locks import DIRTREE_LOCK, LockOwner
from plasmafs.namenode.permissions import (
    R,
    W,
    X,
    check_access,
    check_create,
    check_remove,
    check_search,
    new_owner,
)
from plasmafs.namenode.principals import Principal
from plasmafs.namenode.store import Store
from plasmafs.namenode.transaction import Txn
from plasmafs.namenode.transactions import Transactions
from plasmafs.namenode.trash_moves import check_removable_tree
from plasmafs.namenode.view import MAX_DEPTH, View, check_data

MAX_LINKS = 65000  # hard links of one inode at most (ext4's limit)
MAX_CONCAT = 10000  # files appended by one concatenation (S3's parts of an upload)


class Namespace:
    """The namenode's file system rules over a transaction's view of the namespace."""

    def __init__(
        self,
        store: Store,
        cache: NamespaceCache,
        view: View,
        transactions: Transactions,
        inode_numbers: InodeNumbers,
        leases: LeaseTable,
        data: FileData,
        *,
        default_replication: int,
        default_blocksize: int,
    ) -> None:
        self.store = store
        self.cache = cache
        self.view = view
        self.transactions = transactions
        self.inode_numbers = inode_numbers
        self.leases = leases
        self.data = data
        # Directories with a quota (or getting one): no lease in their trees, so that
        # every change there reaches the namenode, which checks it, before it is done.
        self.no_leases_below: Container[int] = ()
        # Directories with snapshots: not removed (delete the snapshots first).
        self.snapshotted: Container[int] = ()
        self.default_replication = check_replication(default_replication)
        self.default_blocksize = check_blocksize(default_blocksize)

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
        await self.transactions.lock(t, ("i", parent.ino), False)
        await self.transactions.lock(t, ("e", parent.ino, where.parts[-1]), True)
        fresh = await self.view.inode(t, parent.ino)
        if fresh is None:
            raise NotFoundError(f"directory {where.parent_shown} was removed")
        a = fresh.attr
        check_create(t.who, a.mode, a.uid, a.gid, what)  # a chmod may have come first
        return fresh

    async def _has_children(self, txn: Txn, ino: int) -> bool:
        if ino in self.snapshotted:
            return True  # its snapshots hang below it
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

    # --- changes -------------------------------------------------------------------------

    async def mkdir(
        self, txn: Txn | None, where: Place, mode: int, *, ino: int = 0, lease: bool = False
    ) -> Attr:
        """Create a directory (with inode number `ino` if nonzero: one the caller
        reserved; leased to the caller's session if `lease`)."""
        t = self.transactions.writable(txn)
        _new_name(where, ExistsError("/ exists"))
        check_mode(mode)
        parent, name = await self._free_name(t, where)
        ino = ino or await self.inode_numbers.next()
        attr = self._new_attr(t.who, parent, FileKind.DIRECTORY, ino, mode, nlink=2)
        self._link_new(t, parent, name, Inode(attr), nlink_delta=+1)
        t.cs.dir_parents[attr.ino] = parent.ino
        # Under a directory the session leases: the holder's own queued mkdir, granted
        # as the parent's lease was (even while a quota is being set: it recalls both).
        if lease and (
            self.leases.held_by_caller(parent.ino) or await self._leasable(t, parent.ino)
        ):
            self.leases.take(attr.ino)
        return attr

    async def _leasable(self, t: Txn | None, ino: int) -> bool:
        """True unless directory `ino` or one above it has a quota."""
        if not self.no_leases_below:
            return True
        node: int | None = ino
        for _ in range(MAX_DEPTH):
            if node is None:
                return True
            if node in self.no_leases_below:
                return False
            if node == ROOT_INO:
                return True
            node = (
                await self._parent_of_dir(t, node) if t else await self.view.committed_parent(node)
            )
        return False

    async def lease_dir(self, ino: int, who: Principal) -> None:
        """Lease existing directory `ino` to the session serving this request: its
        owner's only (in its group unless it is set-group-ID), and only while no other
        session leases it and no transaction has changes under way in it (those hold
        its inode lock shared until they end; a change that starts later waits for the
        lease as any other does)."""
        if in_snapshot(ino):
            raise ReadOnlyError(f"directory {ino} is in a snapshot: it is not leased")
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
        if not await self._leasable(None, ino):
            raise BusyError(f"directory {ino} is in a tree with a quota: it is not leased")
        owner = LockOwner(f"lease/{ino}")
        try:
            # No wait: granted or refused at once, so nothing runs between the check
            # and the lease.
            await self.transactions.locks.acquire(owner, ("i", ino), exclusive=True, wait=0)
        except ConflictError:
            raise BusyError(f"directory {ino} has changes under way") from None
        try:
            self.leases.take(ino)
        finally:
            self.transactions.locks.release_all(owner)

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
        t = self.transactions.writable(txn)
        _new_name(where, IsDirectoryError("/ is a directory"))
        check_mode(mode)
        replication = check_replication(replication or self.default_replication)
        blocksize = check_blocksize(blocksize or self.default_blocksize)
        if blocksize != self.default_blocksize:
            raise InvalidArgumentError(
                f"blocksize {blocksize} differs from the cluster's {self.default_blocksize}"
            )
        parent, name = await self._free_name(t, where)
        ino = ino or await self.inode_numbers.next()
        attr = self._new_attr(t.who, parent, FileKind.FILE, ino, mode, replication=replication)
        self._link_new(t, parent, name, Inode(attr))
        return attr

    async def symlink(self, txn: Txn | None, where: Place, target_raw: bytes) -> Attr:
        """Create a symbolic link to `target_raw`."""
        t = self.transactions.writable(txn)
        _new_name(where, ExistsError("/ exists"))
        target = paths.check_symlink_target(target_raw)
        parent, name = await self._free_name(t, where)
        ino = await self.inode_numbers.next()
        attr = self._new_attr(t.who, parent, FileKind.SYMLINK, ino, 0o777, size=len(target_raw))
        self._link_new(t, parent, name, Inode(attr, target))
        return attr

    async def mknod(
        self, txn: Txn | None, where: Place, kind: FileKind, mode: int, rdev: int
    ) -> Attr:
        """Create a special file: a FIFO or a socket where the caller may create, a
        character or block device only as the superuser (mknod(2) needs CAP_MKNOD);
        `rdev` is a device's number, 0 for the others."""
        t = self.transactions.writable(txn)
        _new_name(where, ExistsError("/ exists"))
        if not kind.special:
            raise InvalidArgumentError(f"mknod makes special files, not a {kind.name.lower()}")
        check_mode(mode)
        if not 0 <= rdev < 2**63 or (rdev and not kind.is_device):
            raise InvalidArgumentError(f"bad device number {rdev} for a {kind.name.lower()}")
        if kind.is_device and not t.who.superuser:
            raise OperationNotPermittedError(f"{where.shown}: only a superuser makes devices")
        parent, name = await self._free_name(t, where)
        ino = await self.inode_numbers.next()
        attr = replace(self._new_attr(t.who, parent, kind, ino, mode), rdev=rdev)
        self._link_new(t, parent, name, Inode(attr))
        return attr

    async def link(self, txn: Txn | None, target: Place | int, where: Place) -> Attr:
        """A new name for an existing file, symlink or special file (`target`: a place,
        its last component not followed, or an inode number): one inode, one more link.
        A directory gets EPERM, as link(2) on Linux gives it."""
        t = self.transactions.writable(txn)
        _new_name(where, ExistsError("/ exists"))
        if isinstance(target, int):
            seen = await self.view.inode(t, target)
            if seen is None:
                raise NotFoundError(f"no inode {target}")
            await self.view.check_ancestors(t.who, t, seen)
        else:
            seen = await self.view.resolve_place(t.who, t, target, follow_last=False)
        if seen.kind is FileKind.DIRECTORY:
            raise OperationNotPermittedError(f"{where.shown}: directories have no hard links")
        parent, name = await self._free_name(t, where)
        await self.transactions.lock(t, ("i", seen.ino), True)
        inode = await self.view.inode(t, seen.ino)
        if inode is None or inode.attr.nlink == 0:
            raise NotFoundError(f"no such file: the link's target was removed ({where.shown})")
        if inode.attr.nlink >= MAX_LINKS:
            raise TooManyLinksError(f"{where.shown}: {MAX_LINKS} links already")
        now = time.time_ns()
        attr = t.cs.put_changed_inode(
            inode, replace(inode.attr, nlink=inode.attr.nlink + 1, ctime_ns=now), inode.data
        )
        t.cs.set_entry(parent.ino, name, inode.ino)
        t.cs.touch(parent.ino, now)
        return attr

    async def concat(self, txn: Txn | None, target: Place, sources: list[Place]) -> Attr:
        """Append the blocks of files `sources` to file `target` in order and remove
        the sources, copying no data (HDFS's concat): each source's blocks become the
        target's, from the block after its end. The target's size and every source's
        but the last must therefore be whole blocks; each source is a regular file with
        one link and no inline content, named once, which the caller may read and
        remove; the caller may write the target."""
        t = self.transactions.writable(txn)
        if not 1 <= len(sources) <= MAX_CONCAT:
            raise InvalidArgumentError(f"concatenate 1..{MAX_CONCAT} files, not {len(sources)}")
        seen = await self.view.resolve_place(t.who, t, target, follow_last=True)
        check_data(t.who, t, seen.attr, W, target.shown)
        await self.transactions.lock(t, ("i", seen.ino), True)
        inode = await self.view.inode(t, seen.ino)
        if inode is None:
            raise NotFoundError(f"{target.shown} was removed")
        _check_concatenated(inode, target)
        check_data(t.who, t, inode.attr, W, target.shown)
        # Every source is checked before anything changes: a failed operation changes
        # nothing in its transaction.
        blocksize, size = inode.attr.blocksize, inode.attr.size
        before = target
        # (parent, place, source, the target block its first block becomes)
        found: list[tuple[Inode, Place, Inode, int]] = []
        for where in sources:
            if size % blocksize:
                raise InvalidArgumentError(
                    f"{before.shown} is {size} bytes, not whole blocks of {blocksize}: only "
                    "the last file concatenated may end inside a block"
                )
            _new_name(where, InvalidArgumentError("/ is no file to concatenate"))
            parent = await self._lock_parent(t, await self._parent_dir(t, where), where)
            source = await self._locked_entry_inode(t, parent, where.parts[-1], where)
            if source.ino == inode.ino or any(source.ino == s.ino for _, _, s, _ in found):
                raise InvalidArgumentError(f"{where.shown} is named twice in one concatenation")
            _check_concatenated(source, where)
            check_data(t.who, t, source.attr, R, where.shown)
            if source.attr.nlink > 1:
                raise InvalidArgumentError(f"{where.shown} has other links: it cannot move")
            if source.attr.blocksize != blocksize:
                raise InvalidArgumentError(f"{where.shown} has another blocksize")
            found.append((parent, where, source, size // blocksize))
            size += source.attr.size
            before = where
        now = time.time_ns()
        for parent, where, source, base in found:
            await self.data.move_all(t, source.ino, inode.ino, base)
            t.cs.delete_inode(source.ino, FileKind.FILE)
            t.cs.set_entry(parent.ino, where.parts[-1], None)
            t.cs.touch(parent.ino, now)
        attr = replace(inode.attr, size=size, mtime_ns=now, ctime_ns=now)
        return t.cs.put_changed_inode(inode, attr, None)

    # The steps every new name takes: lock its parent, check the name is free, build the
    # new inode's attributes, link it in.

    async def _free_name(self, t: Txn, where: Place) -> tuple[Inode, str]:
        parent, name = await self._parent_dir(t, where), where.parts[-1]
        _check_not_reserved(name, where)
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
        t = self.transactions.writable(txn)
        _new_name(where, IsDirectoryError("/ is a directory"))
        parent = await self._lock_parent(t, await self._parent_dir(t, where), where)
        name = where.parts[-1]
        victim = await self._locked_entry_inode(t, parent, name, where)
        if victim.kind is FileKind.DIRECTORY:
            raise IsDirectoryError(f"{where.shown} is a directory")
        now = time.time_ns()
        await self._drop_link(t, victim, now)
        t.cs.set_entry(parent.ino, name, None)
        t.cs.touch(parent.ino, now)

    async def _drop_link(self, t: Txn, inode: Inode, now: int) -> None:
        """One name of non-directory `inode` (locked) goes: its last one removes it,
        with its data; another leaves it one link fewer."""
        if inode.attr.nlink > 1:
            attr = replace(inode.attr, nlink=inode.attr.nlink - 1, ctime_ns=now)
            t.cs.put_changed_inode(inode, attr, inode.data)
            return
        if inode.kind is FileKind.FILE:
            await self.data.drop_all(t, inode.ino)
        t.cs.delete_inode(inode.ino, inode.kind)

    async def rmdir(self, txn: Txn | None, where: Place) -> None:
        """Remove an empty directory."""
        t = self.transactions.writable(txn)
        _new_name(where, BusyError("the root directory cannot be removed"))
        parent = await self._lock_parent(t, await self._parent_dir(t, where), where)
        name = where.parts[-1]
        victim = await self._locked_entry_inode(t, parent, name, where)
        if victim.kind is not FileKind.DIRECTORY:
            raise NotDirectoryError(f"{where.shown} is not a directory")
        if victim.ino in self.snapshotted:
            raise NotEmptyError(f"{where.shown} has snapshots: delete them first")
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
        await self.transactions.lock(t, ("i", ino), True)
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

    async def rename(
        self, txn: Txn | None, src: Place, dst: Place, noreplace: bool, *, exchange: bool = False
    ) -> None:
        """Move an entry atomically, replacing the destination by POSIX rules; with
        `exchange`, swap two existing entries (Linux's RENAME_EXCHANGE)."""
        if exchange and noreplace:
            raise InvalidArgumentError("an exchange replaces nothing: no noreplace with it")
        t = self.transactions.writable(txn)
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
        _check_not_reserved(dst_name, dst)
        if self.no_leases_below and src_dir.ino != dst_dir.ino:
            await self._end_leases_moving_under_quotas(t, (src_dir, src_name), dst_dir)
            if exchange:
                await self._end_leases_moving_under_quotas(t, (dst_dir, dst_name), src_dir)
        for ino in sorted({src_dir.ino, dst_dir.ino}):
            await self.transactions.lock(t, ("i", ino), False)
        for key in sorted({(src_dir.ino, src_name), (dst_dir.ino, dst_name)}):
            await self.transactions.lock(t, ("e", *key), True)
        src_dir = await self._locked_dir(t, src_dir.ino, src)
        dst_dir = await self._locked_dir(t, dst_dir.ino, dst)
        if (src_dir.ino, src_name) == (dst_dir.ino, dst_name):
            await self._locked_entry_inode(t, src_dir, src_name, src)
            return
        moved = await self._locked_entry_inode(t, src_dir, src_name, src)
        if await self.view.entry(t, dst_dir.ino, dst_name) == moved.ino:
            return  # two names of one file: POSIX says rename does nothing
        if exchange:
            await self._exchange(t, (src_dir, src_name, src, moved), (dst_dir, dst_name, dst))
            return
        is_dir = moved.kind is FileKind.DIRECTORY
        if is_dir and src_dir.ino != dst_dir.ino:
            m = moved.attr  # its ".." entry changes
            check_access(who, m.mode, m.uid, m.gid, W, src.shown)
            await self.transactions.lock(t, DIRTREE_LOCK, True)
            await self._check_not_ancestor(t, moved.ino, dst_dir.ino, src)
            await self._check_trash_move(t, moved.ino, src_dir.ino, dst_dir.ino, src)
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
        else:
            at = dst_dir.attr
            check_create(who, at.mode, at.uid, at.gid, dst.shown)
        now = time.time_ns()
        cs = t.cs
        cs.set_entry(src_dir.ino, src_name, None)
        cs.set_entry(dst_dir.ino, dst_name, moved.ino)
        if replaced is not None and replaced.kind is FileKind.DIRECTORY:
            cs.delete_inode(replaced.ino, replaced.kind)
        elif replaced is not None:
            await self._drop_link(t, replaced, now)
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

    async def _exchange(
        self,
        t: Txn,
        first: tuple[Inode, str, Place, Inode],
        second: tuple[Inode, str, Place],
    ) -> None:
        """The entry at `first` (its directory, name, place and inode) and the one at
        `second` trade places; both directories are locked, and the first entry too."""
        src_dir, src_name, src, moved = first
        dst_dir, dst_name, dst = second
        if await self.view.entry(t, dst_dir.ino, dst_name) is None:
            raise NotFoundError(f"no such file or directory: {dst.shown}")
        other = await self._locked_entry_inode(t, dst_dir, dst_name, dst)
        across = src_dir.ino != dst_dir.ino
        moves = ((moved, dst_dir, src), (other, src_dir, dst))  # inode, new parent, place
        dirs = [(i, parent, where) for i, parent, where in moves if i.kind is FileKind.DIRECTORY]
        if across and dirs:
            for inode, _, where in dirs:  # its ".." entry changes
                a = inode.attr
                check_access(t.who, a.mode, a.uid, a.gid, W, where.shown)
            await self.transactions.lock(t, DIRTREE_LOCK, True)
            for inode, parent, where in dirs:
                await self._check_not_ancestor(t, inode.ino, parent.ino, where)
                old = dst_dir if parent is src_dir else src_dir
                await self._check_trash_move(t, inode.ino, old.ino, parent.ino, where)
        now = time.time_ns()
        cs = t.cs
        cs.set_entry(src_dir.ino, src_name, other.ino)
        cs.set_entry(dst_dir.ino, dst_name, moved.ino)
        for inode in (moved, other):
            bumped = 0 if inode.ino in cs.inodes else 1
            attr = replace(inode.attr, ctime_ns=now, version=inode.attr.version + bumped)
            cs.put_inode(replace(inode, attr=attr))
        src_delta = 0
        if across:
            for inode, parent, _ in dirs:
                cs.dir_parents[inode.ino] = parent.ino
                src_delta += 1 if parent is src_dir else -1
        cs.touch(src_dir.ino, now, src_delta)
        cs.touch(dst_dir.ino, now, -src_delta)

    async def _end_leases_moving_under_quotas(
        self, t: Txn, moving: tuple[Inode, str], to: Inode
    ) -> None:
        """Before a directory moves into a tree with a quota: every lease in it ends
        (recalled, its holder's queue sent), as none may be held in such a tree."""
        ino = await self.view.entry(t, moving[0].ino, moving[1])
        if ino is None or await self._leasable(t, to.ino):
            return
        inode = await self.view.inode(t, ino)
        if inode is not None and inode.kind is FileKind.DIRECTORY:
            await self.leases.recall_below(ino, self.view.committed_parent)

    async def _check_trash_move(
        self, t: Txn, moved: int, old_parent: int, new_parent: int, where: Place
    ) -> None:
        """A directory moving from outside the trash into it must be one the caller
        could remove whole (namenode/trash_moves.py says why)."""
        if t.who.superuser:
            return
        trash = await self.view.entry(t, ROOT_INO, TRASH_NAME)
        if trash is None or not await self._within(t, new_parent, trash):
            return
        if await self._within(t, old_parent, trash):
            return
        if any(d not in t.cs.created for d in t.cs.dir_parents):
            # The check reads the tree as committed: a directory this transaction moved
            # into it would escape it.
            raise InvalidArgumentError(
                f"{where.shown}: move it to the trash in a transaction that moves no "
                "other directory"
            )
        await check_removable_tree(self.store, t.who, moved, where.shown)

    async def _within(self, t: Txn, directory: int, ancestor: int) -> bool:
        """True if `directory` is `ancestor` or below it."""
        node: int | None = directory
        for _ in range(MAX_DEPTH):
            if node == ancestor:
                return True
            if node == ROOT_INO or node is None:
                return False
            node = await self._parent_of_dir(t, node)
        raise StorageError("directory tree deeper than the namenode's walk limit")

    async def _check_not_ancestor(self, t: Txn, moved: int, start: int, src: Place) -> None:
        node: int | None = start
        for _ in range(MAX_DEPTH):
            if node == moved:
                raise InvalidArgumentError(f"cannot move {src.shown} into its own subtree")
            if node == ROOT_INO or node is None:
                return
            node = await self._parent_of_dir(t, node)
        raise StorageError("directory tree deeper than the namenode's walk limit")


def _check_concatenated(inode: Inode, where: Place) -> None:
    """A file a concatenation may take part in: a regular file whose content is in
    blocks."""
    if inode.kind is FileKind.DIRECTORY:
        raise IsDirectoryError(f"{where.shown} is a directory")
    if inode.kind is not FileKind.FILE:
        raise InvalidArgumentError(f"{where.shown} is not a regular file")
    if inode.data is not None:
        raise InvalidArgumentError(
            f"{where.shown} keeps its content inline, not in blocks: rewrite it to concatenate"
        )


def _check_not_reserved(name: str, where: Place) -> None:
    """Refuse a new entry named `.snapshot`: that name reaches a directory's snapshots."""
    if name == SNAPSHOT_DIR_NAME:
        raise InvalidArgumentError(
            f"{where.shown}: {SNAPSHOT_DIR_NAME} is reserved (a directory's snapshots)"
        )


def _new_name(where: Place, at_root: PlasmaError) -> None:
    """Raise `at_root` unless `where` names an entry (not the root itself)."""
    if not where.parts:
        raise at_root
