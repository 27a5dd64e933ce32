"""The namenode's inode and directory-entry cache.

Lookups are served from here without SQL. The committer writes every change into
the cache after PostgreSQL acknowledged it and before the client is answered, so the
cache is never stale after an acknowledged commit.

A reader that missed fills the cache with what it read from PostgreSQL; that value
may already be outdated if a commit touched the key while the query ran. Every key
remembers the epoch of the commit that last wrote it, and a fill is refused when the
key was written after the read began. Evicted keys forget their epoch, so the
highest evicted epoch becomes a floor below which no fill is accepted.

A directory is *complete* when every one of its entries is in the cache (see
`NamespaceCache`): a name missing from it does not exist, with no query.

The cache is bounded in bytes (`memory`), shared out among its tables; each item is
charged what it costs in the namenode's heap (measured: an object's size with its dict
slot, plus a name's, a link target's or a small file's bytes), and the oldest items of a
table over its share are evicted.

`search_epoch` counts the commits that may change who can search which directories: a
directory's mode or owner changed, or a directory moved. The view keeps what it
learnt about searching directories only while that number stays the same.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from plasmafs.core.attributes import FileKind
from plasmafs.namenode.inode_records import ExtentRow, Inode

if TYPE_CHECKING:
    from plasmafs.namenode.store import ListedEntry

K = TypeVar("K")
V = TypeVar("V")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
UNCOUNTED: Final = -1  # a complete directory whose number of entries is not known


# What one cached item costs in the heap, measured with tracemalloc on CPython 3.11
# (object, boxed integers, the tuple with its epoch, and its slot in the dict).
INODE_BYTES = 510  # plus a link target's and a small file's bytes
ENTRY_BYTES = 280  # plus the name's
PARENT_BYTES = 210
EXTENTS_BYTES = 220  # plus EXTENT_ROW_BYTES per extent
EXTENT_ROW_BYTES = 110
REFRESH_EVERY = 7  # (a mask: one hit in eight moves its item to the young end)
# How the memory bound is shared out: inodes, entries, parents, extents.
SHARES = (0.45, 0.30, 0.12, 0.13)


class _Table(Generic[K, V]):
    """A map of key -> (value, epoch of the commit or fill that wrote it), bounded to
    `limit` bytes as `cost` charges its items."""

    __slots__ = ("_cost", "_data", "_limit", "bytes", "floor", "hits", "misses", "on_evict")

    def __init__(self, limit: int, cost: Callable[[K, V | None], int]) -> None:
        self._data: dict[K, tuple[V | None, int]] = {}
        self._limit = limit
        self._cost = cost
        self.bytes = 0
        self.floor = 0
        self.hits = 0
        self.misses = 0
        self.on_evict: Callable[[K], None] | None = None

    def get(self, key: K) -> V | _Missing | None:
        data = self._data
        found = data.get(key)
        if found is None:
            self.misses += 1
            return MISSING
        self.hits += 1
        if not self.hits & REFRESH_EVERY:
            # Every so many hits, the item hit moves to the young end: items hit often
            # outlive streams of new ones (a working set survives a scan), at a
            # fraction of what a strict LRU's reordering on every hit would cost.
            data[key] = data.pop(key)
        return found[0]

    def peek(self, key: K) -> V | _Missing | None:
        """As `get`, not counted as a hit or a miss."""
        found = self._data.get(key)
        return MISSING if found is None else found[0]

    def put(self, key: K, value: V | None, epoch: int) -> None:
        data = self._data
        cost = self._cost
        old = data.pop(key, None)
        if old is not None:
            self.bytes -= cost(key, old[0])
        data[key] = (value, epoch)
        self.bytes += cost(key, value)
        if self.bytes > self._limit:
            self._evict()

    def _evict(self) -> None:
        """Drop the oldest items down to seven eighths of the limit, in one pass: a dict
        keeps insertion order, but popping its first item again and again rescans the
        slots already emptied at its front (quadratic: it stalled the namenode)."""
        data, cost = self._data, self._cost
        excess = self.bytes - (self._limit - self._limit // 8)
        victims: list[tuple[K, int]] = []
        freed = 0
        for key, (value, epoch) in data.items():
            if freed >= excess:
                break
            victims.append((key, epoch))
            freed += cost(key, value)
        self.bytes -= freed
        on_evict = self.on_evict
        for key, epoch in victims:
            del data[key]
            if epoch > self.floor:
                self.floor = epoch
            if on_evict is not None:
                on_evict(key)

    def fill(self, key: K, value: V | None, read_epoch: int) -> None:
        if read_epoch < self.floor:
            return
        current = self._data.get(key)
        if current is not None and current[1] > read_epoch:
            return
        self.put(key, value, read_epoch)

    def clear(self, epoch: int) -> None:
        self._data.clear()
        self.bytes = 0
        self.floor = epoch

    def __len__(self) -> int:
        return len(self._data)


def _inode_bytes(_: int, inode: Inode | None) -> int:
    if inode is None:
        return INODE_BYTES
    return INODE_BYTES + len(inode.data or b"") + len(inode.target or "")


def _entry_bytes(key: tuple[int, str], _: int | None) -> int:
    return ENTRY_BYTES + len(key[1])


def _parent_bytes(_: int, __: int | None) -> int:
    return PARENT_BYTES


def _extents_bytes(_: int, rows: tuple[ExtentRow, ...] | None) -> int:
    return EXTENTS_BYTES + EXTENT_ROW_BYTES * len(rows or ())


class NamespaceCache:
    """Inodes by number and entries by (parent, name); None caches "does not exist".
    `parents` maps an inode to the directory holding its entry (there are no hard
    links), learnt from every entry read or committed, for checks by inode number.

    A directory is *complete* when every one of its entries is in the cache: one this
    namenode created (empty at birth, and every later change passes through commits
    here), or one read whole (`begin_load` .. `finish_load`). A name missing from a complete
    directory does not exist, with no query. The entries of a directory created here
    are counted as commits change them, so that rmdir asks no query either; a
    directory read whole is not counted (a commit already in PostgreSQL but not yet
    here may or may not be in what was read). Evicting any entry of a directory makes
    it incomplete again.
    """

    def __init__(self, memory: int) -> None:
        self.epoch = 0
        self.search_epoch = 0
        self.memory = memory
        inodes, entries, parents, extents = (int(memory * share) for share in SHARES)
        self.inodes: _Table[int, Inode] = _Table(inodes, _inode_bytes)
        self.entries: _Table[tuple[int, str], int] = _Table(entries, _entry_bytes)
        self.entries.on_evict = self._entry_evicted
        self.extents: _Table[int, tuple[ExtentRow, ...]] = _Table(extents, _extents_bytes)
        self.parents: _Table[int, int] = _Table(parents, _parent_bytes)
        # About how many entries fit (names of 16 bytes): the most directories that can
        # be complete at once, and a bound for reading one whole.
        self.entry_capacity = max(entries // (ENTRY_BYTES + 16), 16)
        self._complete: dict[int, int] = {}  # directory -> number of its entries
        self._complete_limit = self.entry_capacity
        self._loading: dict[int, bool] = {}  # directory read whole -> no entry evicted yet

    def charged(self) -> int:
        """Bytes the cached items are charged (at most `memory`)."""
        return self.inodes.bytes + self.entries.bytes + self.parents.bytes + self.extents.bytes

    def get_inode(self, ino: int) -> Inode | _Missing | None:
        """The cached inode, None if known not to exist, or MISSING."""
        return self.inodes.get(ino)

    def get_entry(self, parent: int, name: str) -> int | _Missing | None:
        """The cached entry's inode number, None if known absent, or MISSING."""
        found = self.entries.get((parent, name))
        if found is MISSING and parent in self._complete:
            return None
        return found

    def mark_complete(self, directory: int, count: int = 0) -> None:
        """Record that every entry of `directory` (new and empty, unless `count` says
        how many it has or that it is UNCOUNTED) is cached."""
        complete = self._complete
        complete[directory] = count
        if len(complete) > self._complete_limit:
            # The oldest eighth in one pass (see `_Table._evict`).
            for old in list(itertools.islice(complete, self._complete_limit // 8 + 1)):
                del complete[old]

    def begin_load(self, directory: int) -> None:
        """Start reading `directory` whole, a page at a time (`fill_loaded`). Entries
        committed meanwhile are in the cache with later epochs than the pages; an
        entry of the directory evicted meanwhile spoils the load."""
        self._loading[directory] = True

    def fill_loaded(self, directory: int, listed: list[ListedEntry], read_epoch: int) -> bool:
        """Remember a page of `directory`'s entries a read that began at `read_epoch`
        found; returns whether the load is still good (no fill refused, no entry of
        the directory evicted since `begin_load`)."""
        # Entries only: a directory is read whole for names it has or lacks, and its
        # entries' parents are learnt when asked for (half the cost of a page).
        fill = self.entries.fill
        for entry in listed:
            fill((directory, entry.name), entry.ino, read_epoch)
        peek = self.entries.peek
        if any(peek((directory, e.name)) is MISSING for e in listed):
            self.end_load(directory)  # a fill refused below the floor, or evicted
        return self._loading.get(directory, False)

    def finish_load(self, directory: int) -> bool:
        """Mark `directory` complete once every page of it was filled by a load still
        good; returns whether it is."""
        if not self._loading.pop(directory, False):
            return False
        self.mark_complete(directory, UNCOUNTED)
        return True

    def end_load(self, directory: int) -> None:
        """Forget a load of `directory` (spoiled, failed or given up)."""
        self._loading.pop(directory, None)

    def entries_left(self, directory: int, removed: set[str]) -> int | None:
        """How many committed entries of `directory` are not among the names `removed`,
        or None when that is not counted here (then only a query can tell)."""
        count = self._complete.get(directory)
        if count is None or count == UNCOUNTED:
            return None
        cached = self.entries.peek
        return count - sum(isinstance(cached((directory, name)), int) for name in removed)

    def _entry_evicted(self, key: tuple[int, str]) -> None:
        self._complete.pop(key[0], None)
        if key[0] in self._loading:
            self._loading[key[0]] = False

    def fill_inode(self, ino: int, inode: Inode | None, read_epoch: int) -> None:
        """Remember what a read that began at `read_epoch` found."""
        self.inodes.fill(ino, inode, read_epoch)

    def fill_entry(self, parent: int, name: str, ino: int | None, read_epoch: int) -> None:
        """Remember what a read that began at `read_epoch` found."""
        self.entries.fill((parent, name), ino, read_epoch)
        if ino is not None:
            self.parents.fill(ino, parent, read_epoch)

    def fill_parent(self, ino: int, parent: int | None, read_epoch: int) -> None:
        """Remember the parent a read that began at `read_epoch` found (None: none)."""
        self.parents.fill(ino, parent, read_epoch)

    def begin_commit(self) -> int:
        """Start applying a committed group; returns its epoch."""
        self.epoch += 1
        return self.epoch

    def commit_inode(
        self, ino: int, inode: Inode | None, epoch: int, created: bool = False
    ) -> None:
        """Record a committed inode row (None: deleted; `created`: new in this commit)."""
        if inode is not None and not created:
            self._note_access(inode)
        self.inodes.put(ino, inode, epoch)
        if inode is None:
            self.parents.put(ino, None, epoch)
            self._complete.pop(ino, None)

    def commit_newer_inode(self, inode: Inode, epoch: int) -> None:
        """Record a committed row unless the cache already holds a later version of it."""
        cached = self.inodes.get(inode.ino)
        if isinstance(cached, Inode) and cached.attr.version > inode.attr.version:
            return
        self._note_access(inode)
        self.inodes.put(inode.ino, inode, epoch)

    def commit_entry(
        self, parent: int, name: str, ino: int | None, epoch: int, created: bool = False
    ) -> None:
        """Record a committed entry (None: removed; `created`: its inode is new in this
        commit)."""
        key = (parent, name)
        count = self._complete.get(parent)
        if count is not None and count != UNCOUNTED:
            count += (ino is not None) - isinstance(self.entries.peek(key), int)
        self.entries.put(key, ino, epoch)
        # (The put may have evicted an entry of `parent`, which makes it incomplete.)
        if count is not None and parent in self._complete:
            self._complete[parent] = count
        if ino is not None:
            if not created and self.parents.peek(ino) != parent and self._may_be_directory(ino):
                self.search_epoch += 1  # a directory moved: its subtree has new ancestors
            self.parents.put(ino, parent, epoch)

    def _note_access(self, inode: Inode) -> None:
        """Count a change of a directory's mode or owner (or one not known to be none)."""
        new = inode.attr
        if new.kind is not FileKind.DIRECTORY:
            return
        old = self.inodes.peek(new.ino)
        if not (
            isinstance(old, Inode)
            and (old.attr.mode, old.attr.uid, old.attr.gid) == (new.mode, new.uid, new.gid)
        ):
            self.search_epoch += 1

    def _may_be_directory(self, ino: int) -> bool:
        cached = self.inodes.peek(ino)
        return not isinstance(cached, Inode) or cached.kind is FileKind.DIRECTORY

    def invalidate_all(self) -> None:
        """Forget everything (after a commit whose outcome is unknown)."""
        self.epoch += 1
        self.search_epoch += 1
        self.inodes.clear(self.epoch)
        self.entries.clear(self.epoch)
        self.extents.clear(self.epoch)
        self.parents.clear(self.epoch)
        self._complete.clear()
        for directory in self._loading:
            self._loading[directory] = False
