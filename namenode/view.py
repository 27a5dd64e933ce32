"""A transaction's view of the namespace, and how a caller reaches an inode through it.

The view is committed state, served from the cache or read from PostgreSQL through the
coalescing reader, overlaid with the transaction's own change set (no transaction:
committed state alone). A caller reaches an inode by a path, walked with search
permission on every directory on the way, or by its number, with search permission on
the directories above it (see `check_ancestors`).
"""

from __future__ import annotations

from collections.abc import Mapping

from plasmafs.core import paths
from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import (
    InvalidArgumentError,
    LoopError,
    NotDirectoryError,
    NotFoundError,
    StorageError,
)
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.cache import MISSING, NamespaceCache
from plasmafs.namenode.coalescing_reader import CoalescingReader
from plasmafs.namenode.directory_leases import LeaseTable
from plasmafs.namenode.inode_records import ROOT_INO, SNAPSHOT_DIR_NAME, Inode
from plasmafs.namenode.permissions import Caller, X, check_access, check_search, may
from plasmafs.namenode.store import Store
from plasmafs.namenode.transaction import Txn

MAX_SYMLINK_HOPS = 40
MAX_DEPTH = 4096
SEARCHABLE_LIMIT = 100_000  # (directory, caller ids) pairs known searchable, at most


class View:
    """Inodes, entries and parents as a transaction sees them."""

    def __init__(
        self, store: Store, cache: NamespaceCache, reader: CoalescingReader, leases: LeaseTable
    ) -> None:
        self.store = store
        self.leases = leases
        self.cache = cache
        self.reader = reader
        # caller's (uid, gid, groups) -> directories it may search, with all above them
        self._searchable: dict[tuple[int, int, frozenset[int]], set[int]] = {}
        self._searchable_count = 0
        self._searchable_epoch = cache.search_epoch
        # Directory -> the hidden directory of its snapshots, and back (namenode/
        # snapshots.py keeps them): `DIR/.snapshot` is answered here, no entry names it.
        self.snapdirs: Mapping[int, int] = {}
        self.snapdir_parents: Mapping[int, int] = {}

    async def committed_inode(self, ino: int) -> Inode | None:
        """The committed inode `ino`, None if there is none."""
        cached = self.cache.get_inode(ino)
        if cached is not MISSING:
            return cached  # type: ignore[return-value]
        return await self.reader.inode(ino)

    async def committed_entry(self, parent: int, name: str) -> int | None:
        """The inode number of the committed entry, None if there is none."""
        cache = self.cache
        cached = cache.get_entry(parent, name)
        if cached is not MISSING:
            return cached  # type: ignore[return-value]
        directories = self.reader.directories
        if directories.wanted(parent):
            await directories.load(parent)
            cached = cache.get_entry(parent, name)
            if cached is not MISSING:
                return cached  # type: ignore[return-value]
        return await self.reader.entry(parent, name)

    async def committed_parents(self, ino: int) -> list[int]:
        """The directories holding every committed name of `ino`, one per name."""
        return await self.store.get_parents(ino)

    async def committed_parent(self, ino: int) -> int | None:
        """The directory holding the committed entry of `ino`, None for the root."""
        cached = self.cache.parents.get(ino)
        if cached is not MISSING:
            return cached  # type: ignore[return-value]
        return await self._read_parent(ino)

    async def _read_parent(self, ino: int) -> int | None:
        if ino in self.snapdir_parents:
            return self.snapdir_parents[ino]
        epoch = self.cache.epoch
        parent = await self.store.get_parent(ino)
        self.cache.fill_parent(ino, parent, epoch)
        return parent

    async def inode(self, txn: Txn | None, ino: int) -> Inode | None:
        """Inode `ino` as the transaction sees it, None if there is none."""
        if txn is not None:
            cs = txn.cs
            if ino in cs.inodes:
                return cs.inodes[ino]
            committed = await self.committed_inode(ino)
            if committed is not None and ino in cs.touches:
                return cs.overlay(committed)
            return committed
        return await self.committed_inode(ino)

    async def entry(self, txn: Txn | None, parent: int, name: str) -> int | None:
        """The inode number entry `name` of `parent` names for the transaction (once
        no other session holds a lease on `parent`)."""
        if name == SNAPSHOT_DIR_NAME and parent in self.snapdirs:
            return self.snapdirs[parent]
        if self.leases:  # (skips a coroutine per lookup while nobody holds a lease)
            await self.leases.admit(parent)
        if txn is not None:
            key = (parent, name)
            entries = txn.cs.entries
            if key in entries:
                return entries[key]
            if parent in txn.cs.created:
                return None  # a directory this transaction made has nothing committed
        return await self.committed_entry(parent, name)

    async def resolve_place(
        self, who: Caller, txn: Txn | None, place: Place, follow_last: bool
    ) -> Inode:
        """The inode `place` names, as `resolve` walks it; a place in a directory named
        by inode number starts there, once the caller may search every directory
        above it (symlinks are not followed from such a place: their targets are
        paths, and the mount that names directories by number follows them itself)."""
        if not place.anchored:
            return await self.resolve(who, txn, place.parts, follow_last)
        if follow_last and place.parts:
            raise InvalidArgumentError(
                "symbolic links are followed only on paths from the root, not by inode"
            )
        start = await self.inode(txn, place.start)
        if start is None:
            raise NotFoundError(f"no inode {place.start}")
        await self.check_ancestors(who, txn, start)
        if not place.parts:
            return start
        if start.kind is not FileKind.DIRECTORY:
            raise NotDirectoryError(f"inode {place.start} is not a directory")
        a = start.attr
        check_search(who, a.mode, a.uid, a.gid, f"directory inode {place.start}")
        (name,) = place.parts
        child_ino = await self.entry(txn, start.ino, name)
        child = await self.inode(txn, child_ino) if child_ino is not None else None
        if child is None:
            raise NotFoundError(f"no such file or directory: {place.shown}")
        return child

    async def resolve(
        self, who: Caller, txn: Txn | None, parts: list[str], follow_last: bool
    ) -> Inode:
        """The inode a path's components name; symlinks are followed except, unless
        `follow_last`, in the last component. The caller needs search permission on
        every directory walked, those a symlink's target walks included."""
        ino = ROOT_INO
        walked: list[str] = []
        i = 0
        hops = 0
        while i < len(parts):
            current = await self.inode(txn, ino)
            if current is None:
                raise NotFoundError(f"no such directory: /{'/'.join(walked)}")
            if current.kind is not FileKind.DIRECTORY:
                raise NotDirectoryError(f"not a directory: /{'/'.join(walked)}")
            a = current.attr
            if not may(who, a.mode, a.uid, a.gid, X):  # spell the path for a refusal only
                check_search(who, a.mode, a.uid, a.gid, "/" + "/".join(walked))
            child_ino = await self.entry(txn, ino, parts[i])
            child = await self.inode(txn, child_ino) if child_ino is not None else None
            if child is None:
                raise NotFoundError(f"no such file or directory: /{'/'.join(walked + parts[i:])}")
            last = i == len(parts) - 1
            if child.kind is FileKind.SYMLINK and (follow_last or not last):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise LoopError(f"too many symbolic links at /{'/'.join([*walked, parts[i]])}")
                assert child.target is not None
                base = "/" + "/".join(walked)
                target = paths.normalize(child.target, cwd=base)
                parts = paths.split_canonical(target.encode()) + parts[i + 1 :]
                ino, walked, i = ROOT_INO, [], 0
                continue
            walked.append(parts[i])
            ino = child.ino
            i += 1
        found = await self.inode(txn, ino)
        if found is None:
            raise NotFoundError(f"no such file or directory: /{'/'.join(parts)}")
        return found

    # An inode number skips the path walk, and inode numbers are handed out in sequence:
    # anyone can guess them. Checking only the inode's own bits, as NFS does for file
    # handles, would open a 0644 file under another user's 0700 directory to everyone
    # who counts; so a caller by number needs search permission on the directories
    # above the inode too, as by a path. The walk goes up committed parents and
    # committed modes (the cache learns an inode's parent from every entry read or
    # committed) and stops at a directory already known to be searchable, with all
    # above it, by the same ids: a lookup by number in a known directory costs two dict
    # lookups whatever its depth. That knowledge is dropped whenever a directory's mode
    # or owner changes or a directory moves (`NamespaceCache.search_epoch`). An inode
    # its transaction created was reached by a path, checked then.

    async def check_ancestors(self, who: Caller, txn: Txn | None, inode: Inode) -> None:
        """PermissionError unless the caller may search every committed directory above
        `inode`."""
        if who.superuser or (txn is not None and inode.ino in txn.cs.created):
            return
        cache = self.cache
        epoch = cache.search_epoch
        if epoch != self._searchable_epoch:
            self._forget_searchable(epoch)
        ids = (who.uid, who.gid, who.groups)
        searchable = self._searchable.get(ids)
        if searchable is None:
            searchable = self._searchable[ids] = set()
        passed: list[int] = []
        ino = inode.ino
        for _ in range(MAX_DEPTH):
            if ino == ROOT_INO:
                break
            # The cache is asked directly (an await per level would cost more than the
            # rest of the walk), the database only on a miss.
            found = cache.parents.get(ino)
            parent = found if found is None or isinstance(found, int) else None
            if found is MISSING:
                parent = await self._read_parent(ino)
            if parent is None:
                raise NotFoundError(f"no inode {inode.ino}")
            if parent in searchable:
                break
            cached = cache.get_inode(parent)
            directory = cached if cached is None or isinstance(cached, Inode) else None
            if cached is MISSING:
                directory = await self.reader.inode(parent)
            if directory is None:
                raise NotFoundError(f"no inode {inode.ino}")
            a = directory.attr
            if not may(who, a.mode, a.uid, a.gid, X):
                check_search(who, a.mode, a.uid, a.gid, f"inode {inode.ino}")
            passed.append(parent)
            ino = a.ino
        else:
            raise StorageError("directory tree deeper than the namenode's walk limit")
        if passed and cache.search_epoch == epoch:  # nothing changed while reading
            self._searchable_count += len(passed)
            if self._searchable_count > SEARCHABLE_LIMIT:
                self._forget_searchable(epoch)
                searchable = self._searchable[ids] = set()
                self._searchable_count = len(passed)
            searchable.update(passed)

    def _forget_searchable(self, epoch: int) -> None:
        self._searchable.clear()
        self._searchable_count = 0
        self._searchable_epoch = epoch


def check_data(who: Caller, txn: Txn | None, a: Attr, want: int, what: str) -> None:
    """PermissionError unless the caller may read (R) or write (W) a file's data. The
    transaction that created the file may, whatever its mode, as open(O_CREAT) of a new
    file with mode 0444 still writes it.

    The mode is read at each request: a reader renewing its tickets after a chmod that
    took R away is refused, where POSIX keeps an open descriptor working (the issue's
    plan, §4)."""
    if txn is not None and a.ino in txn.cs.created:
        return
    check_access(who, a.mode, a.uid, a.gid, want, what)
