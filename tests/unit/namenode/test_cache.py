"""The namespace cache in process: commits win over fills that read older state."""

from __future__ import annotations

import tracemalloc

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.namenode.cache import MISSING, NamespaceCache
from plasmafs.namenode.inode_records import ExtentRow, Inode
from plasmafs.namenode.store import ListedEntry


def _inode(ino: int, version: int = 1) -> Inode:
    return Inode(Attr(ino, FileKind.FILE, 0o644, 0, 0, 0, 0, 0, 1, 1, 65536, version))


def test_a_fill_that_read_before_a_commit_is_refused() -> None:
    cache = NamespaceCache(64 * 1024)
    read_epoch = cache.epoch  # a read of ino 5 starts...
    epoch = cache.begin_commit()  # ...a commit writes ino 5 meanwhile...
    cache.commit_inode(5, _inode(5, 2), epoch)
    cache.fill_inode(5, _inode(5, 1), read_epoch)  # ...and the stale read comes back
    assert cache.get_inode(5) == _inode(5, 2)


def test_eviction_raises_the_floor_for_fills() -> None:
    cache = NamespaceCache(16 * 1024)
    read_epoch = cache.epoch
    for ino in range(40):
        cache.commit_inode(ino, _inode(ino), cache.begin_commit())
    assert cache.get_inode(0) is MISSING  # evicted, and its epoch forgotten
    cache.fill_inode(0, None, read_epoch)  # a read older than the evicted commit
    assert cache.get_inode(0) is MISSING


def test_a_complete_directory_answers_absent_names_until_an_entry_is_evicted() -> None:
    cache = NamespaceCache(16 * 1024)
    cache.mark_complete(7)
    assert cache.get_entry(7, "nope") is None
    for k in range(40):
        cache.commit_entry(7, f"n{k}", 100 + k, cache.begin_commit())
    assert cache.get_entry(7, "nope") is MISSING


def test_a_complete_directory_counts_its_entries_until_one_is_evicted() -> None:
    cache = NamespaceCache(16 * 1024)
    cache.mark_complete(7)
    assert cache.entries_left(7, set()) == 0
    cache.commit_entry(7, "a", 100, cache.begin_commit(), created=True)
    cache.commit_entry(7, "b", 101, cache.begin_commit(), created=True)
    cache.commit_entry(7, "a", 102, cache.begin_commit())  # replaced: still one entry
    cache.commit_entry(7, "b", None, cache.begin_commit())
    cache.commit_entry(7, "b", None, cache.begin_commit())  # removing twice counts once
    cache.commit_entry(8, "x", 103, cache.begin_commit())  # another directory
    assert cache.entries_left(7, set()) == 1
    assert cache.entries_left(7, {"a", "b", "never"}) == 0  # only "a" exists
    assert cache.entries_left(8, set()) is None
    for k in range(40):
        cache.commit_entry(9, f"n{k}", 200 + k, cache.begin_commit())
    assert cache.entries_left(7, set()) is None
    cache.mark_complete(10)
    cache.commit_inode(10, None, cache.begin_commit())  # the directory was removed
    assert cache.entries_left(10, set()) is None


def test_a_newer_version_is_not_replaced_by_an_older_touch() -> None:
    cache = NamespaceCache(16 * 1024)
    cache.commit_inode(3, _inode(3, 5), cache.begin_commit())
    cache.commit_newer_inode(_inode(3, 4), cache.begin_commit())
    assert cache.get_inode(3) == _inode(3, 5)


def test_invalidate_all_forgets_and_refuses_older_fills() -> None:
    cache = NamespaceCache(16 * 1024)
    cache.commit_inode(1, _inode(1), cache.begin_commit())
    read_epoch = cache.epoch
    cache.invalidate_all()
    assert cache.get_inode(1) is MISSING
    cache.fill_inode(1, _inode(1), read_epoch)
    assert cache.get_inode(1) is MISSING


def test_parents_follow_entries_read_and_committed() -> None:
    cache = NamespaceCache(64 * 1024)
    read_epoch = cache.epoch
    cache.fill_entry(1, "a", 10, read_epoch)  # a lookup learns 10's parent
    assert cache.parents.get(10) == 1
    epoch = cache.begin_commit()  # a rename moves 10 under 2...
    cache.commit_entry(1, "a", None, epoch)
    cache.commit_entry(2, "a", 10, epoch)
    cache.fill_entry(1, "a", 10, read_epoch)  # ...and a stale read comes back
    assert cache.parents.get(10) == 2
    cache.commit_inode(10, None, cache.begin_commit())  # removed
    assert cache.parents.get(10) is None
    cache.invalidate_all()
    assert cache.parents.get(10) is MISSING


def _directory(ino: int, mode: int = 0o755, uid: int = 0, version: int = 1) -> Inode:
    return Inode(Attr(ino, FileKind.DIRECTORY, mode, uid, 0, 0, 0, 0, 2, 1, 0, version))


def test_the_search_epoch_counts_what_may_change_who_searches_where() -> None:
    cache = NamespaceCache(64 * 1024)

    def bumps(change: object) -> int:
        before = cache.search_epoch
        epoch = cache.begin_commit()
        for apply in change if isinstance(change, list) else [change]:
            apply(epoch)
        return cache.search_epoch - before

    # New directories and files, and their entries, change nothing anyone could search.
    assert not bumps(
        [
            lambda e: cache.commit_inode(2, _directory(2), e, created=True),
            lambda e: cache.commit_entry(1, "d", 2, e, created=True),
            lambda e: cache.commit_inode(3, _inode(3), e, created=True),
            lambda e: cache.commit_entry(2, "f", 3, e, created=True),
        ]
    )
    assert not bumps(lambda e: cache.commit_inode(2, _directory(2, version=2), e))  # mtime
    assert not bumps(lambda e: cache.commit_newer_inode(_directory(2, version=3), e))
    assert not bumps(  # a file renamed into another directory
        [lambda e: cache.commit_entry(2, "f", None, e), lambda e: cache.commit_entry(1, "f", 3, e)]
    )
    assert not bumps(  # a directory renamed within its parent
        [lambda e: cache.commit_entry(1, "d", None, e), lambda e: cache.commit_entry(1, "e", 2, e)]
    )
    assert bumps(lambda e: cache.commit_inode(2, _directory(2, mode=0o700, version=4), e))
    assert bumps(lambda e: cache.commit_newer_inode(_directory(2, 0o700, uid=5, version=5), e))
    assert bumps(lambda e: cache.commit_entry(4, "e", 2, e))  # a directory moved
    assert bumps(lambda e: cache.commit_entry(4, "x", 99, e))  # an inode of unknown kind
    assert bumps(lambda e: cache.commit_inode(7, _directory(7), e))  # not cached before
    assert bumps(lambda _: cache.invalidate_all())


def _listed(*names: str) -> list[ListedEntry]:
    return [ListedEntry(name, 100 + k, None) for k, name in enumerate(names)]


def test_a_directory_read_whole_answers_absent_names_and_is_not_counted() -> None:
    cache = NamespaceCache(64 * 1024)
    cache.begin_load(7)
    epoch = cache.epoch
    # A commit while the read runs: its entries are newer than what the read found.
    cache.commit_entry(7, "b", None, cache.begin_commit())
    cache.commit_entry(7, "c", 300, cache.begin_commit())
    assert cache.fill_loaded(7, _listed("a", "b"), epoch)
    assert cache.get_entry(7, "nope") is MISSING  # not complete before the last page
    assert cache.finish_load(7)
    assert cache.get_entry(7, "a") == 100
    assert cache.get_entry(7, "b") is None  # removed after the read began
    assert cache.get_entry(7, "c") == 300
    assert cache.get_entry(7, "nope") is None
    assert cache.entries_left(7, set()) is None  # complete, but not counted
    cache.commit_entry(7, "d", 301, cache.begin_commit(), created=True)
    assert cache.entries_left(7, set()) is None


def test_a_directory_read_whole_is_not_complete_when_an_entry_went_meanwhile() -> None:
    cache = NamespaceCache(16 * 1024)
    cache.begin_load(7)
    epoch = cache.epoch
    cache.commit_entry(7, "new", 300, cache.begin_commit())
    for k in range(40):  # evicts the new entry, which the read may not have seen
        cache.commit_entry(8, f"n{k}", 200 + k, cache.begin_commit())
    assert not cache.fill_loaded(7, _listed("a"), epoch)
    assert not cache.finish_load(7)
    assert cache.get_entry(7, "new") is MISSING


def test_a_directory_read_whole_is_not_complete_after_invalidate_all() -> None:
    cache = NamespaceCache(64 * 1024)
    cache.begin_load(7)
    epoch = cache.epoch
    cache.invalidate_all()
    assert not cache.fill_loaded(7, _listed("a"), epoch)
    assert not cache.finish_load(7)
    assert cache.get_entry(7, "nope") is MISSING


def test_the_cache_stays_within_its_memory_bound() -> None:
    """What the cache charges for its items is what they take in the heap (within an
    eighth), so `cache_size` bounds the namenode's memory however many names it sees."""
    memory = 4 * 1024 * 1024
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = NamespaceCache(memory)
        for ino in range(1 << 40, (1 << 40) + 60_000):
            epoch = cache.begin_commit()
            attr = Attr(ino, FileKind.FILE, 0o644, 1000, 1000, ino, ino, ino, 1, 1, 65536, ino)
            data = b"x" * (ino % 300)  # small files' content counts too
            cache.commit_inode(ino, Inode(attr, data=data), epoch, created=True)
            cache.commit_entry(ino // 1000, f"name-{ino}", ino, epoch, created=True)
            cache.extents.put(ino, (ExtentRow(0, 1, 1, ino, 1),), epoch)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.charged() <= memory
    assert len(cache.entries) < 60_000  # it did evict
    assert used <= memory * 9 // 8, (used, cache.charged())


def test_names_looked_up_often_outlive_a_stream_of_new_ones() -> None:
    cache = NamespaceCache(64 * 1024)
    cache.commit_entry(1, "hot", 10, cache.begin_commit())
    for k in range(5_000):  # a scan: each name once, far more than the cache holds
        cache.commit_entry(2, f"scanned-{k}", 100 + k, cache.begin_commit())
        if k % 4 == 0:
            assert cache.get_entry(1, "hot") == 10
    assert cache.get_entry(2, "scanned-0") is MISSING  # the stream was evicted, not "hot"
