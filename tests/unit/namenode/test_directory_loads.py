"""Directories read whole: a namenode that did not create a directory (it took over,
or restarted) reads it a page at a time as misses pay for the pages, and then answers
lookups and creates in it from the cache, names that exist or not, with no query per
name."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from plasmafs.core.errors import NotEmptyError, NotFoundError
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.directory_loads import ENTRIES_PER_MISS, FIRST_PAGE, PAGE
from plasmafs.namenode.inode_records import Inode
from plasmafs.namenode.principals import SUPERUSER
from plasmafs.namenode.store import ListedEntry
from tests.support.memory_store import MemoryStore
from tests.support.namespace_parts import Opened, opened_namespace


def misses_for(pages: int) -> int:
    """Misses that pay for a directory's first `pages` pages (each twice the last, from
    FIRST_PAGE up to PAGE entries)."""
    return sum(min(FIRST_PAGE << k, PAGE) for k in range(pages)) // ENTRIES_PER_MISS


class CountingStore(MemoryStore):
    """A `MemoryStore` that counts the reads of entries by name and of whole listings."""

    def __init__(self) -> None:
        super().__init__()
        self.keys_read: list[tuple[int, str]] = []
        self.listings: list[int] = []

    async def get_entries(self, keys: list[tuple[int, str]]) -> dict[tuple[int, str], Inode]:
        self.keys_read.extend(keys)
        return await super().get_entries(keys)

    async def list_entries(
        self, parent: int, after: str, limit: int, with_inodes: bool
    ) -> list[ListedEntry]:
        self.listings.append(parent)
        return await super().list_entries(parent, after, limit, with_inodes)


async def create(ns: Opened, path: str) -> None:
    txn = ns.begin()
    await ns.create(txn, path.encode())
    await ns.commit(txn)


async def lookup(ns: Opened, path: str) -> int:
    attr = await ns.parts.namespace.lookup(None, Place.of(path.encode()), True, who=SUPERUSER)
    return attr.ino


@pytest.fixture
async def store() -> AsyncIterator[CountingStore]:
    """A store holding /d with 20 files, /big with 40 and /pages with 2.5 pages'
    worth, written by a namenode that is gone: the next one starts with a cold cache."""
    store = CountingStore()
    async with opened_namespace(store, store.leases) as ns:
        for directory, count in (("/d", 20), ("/big", 40), ("/pages", PAGE * 5 // 2)):
            txn = ns.begin()
            await ns.parts.namespace.mkdir(txn, Place.of(directory.encode()), 0o755)
            for k in range(count):
                await ns.create(txn, f"{directory}/f{k}".encode())
            await ns.commit(txn)
    store.keys_read.clear()
    store.listings.clear()
    return store


async def test_creates_in_a_directory_made_before_stop_querying_after_a_few(
    store: CountingStore,
) -> None:
    async with opened_namespace(store, store.leases) as ns:
        d = await lookup(ns, "/d")
        for k in range(20, 40):
            await create(ns, f"/d/f{k}")
        asked = [key for key in store.keys_read if key[0] == d]
        assert len(asked) == misses_for(1) - 1  # then the directory was read whole
        assert store.listings.count(d) == 1
        for k in range(40):  # every name, old and new, from the cache
            await lookup(ns, f"/d/f{k}")
        with pytest.raises(NotFoundError):
            await lookup(ns, "/d/nothing")
        assert [key for key in store.keys_read if key[0] == d] == asked
        assert store.listings.count(d) == 1
        txn = ns.begin()  # not counted when read whole: rmdir asks, and is refused
        with pytest.raises(NotEmptyError):
            await ns.parts.namespace.rmdir(txn, Place.of(b"/d"))


async def test_a_directory_of_several_pages_is_read_as_misses_pay_for_them(
    store: CountingStore,
) -> None:
    async with opened_namespace(store, store.leases) as ns:
        d = await lookup(ns, "/pages")
        count = PAGE * 5 // 2
        k = count
        while not await _complete(ns, store, f"/pages/absent-{k}"):
            await create(ns, f"/pages/f{k}")
            k += 1
        # Each page was paid for by its misses, the last one read by name too while the
        # directory was incomplete; the last, short page completed it.
        pages = store.listings.count(d)
        assert sum(min(FIRST_PAGE << n, PAGE) for n in range(pages - 1)) < k
        asked = [key for key in store.keys_read if key[0] == d]  # probes are misses too
        assert len(asked) == misses_for(pages) - 1
        for n in range(k, k + 50):
            await create(ns, f"/pages/f{n}")
        for n in range(0, k + 50, 97):
            await lookup(ns, f"/pages/f{n}")
        with pytest.raises(NotFoundError):
            await lookup(ns, "/pages/nothing")
        assert [key for key in store.keys_read if key[0] == d] == asked
        assert store.listings.count(d) == pages


async def _complete(ns: Opened, store: CountingStore, absent: str) -> bool:
    """True once the name `absent` is known absent with no query."""
    before = len(store.keys_read)
    with pytest.raises(NotFoundError):
        await lookup(ns, absent)
    return len(store.keys_read) == before


async def test_a_directory_larger_than_the_limit_is_read_by_name(
    store: CountingStore,
) -> None:
    async with opened_namespace(store, store.leases, directory_load_limit=32) as ns:
        big = await lookup(ns, "/big")
        for k in range(40, 60):
            await create(ns, f"/big/f{k}")
        assert store.listings.count(big) == 1  # found too large once, then remembered
        assert len([key for key in store.keys_read if key[0] == big]) == 20
        for k in range(60):
            await lookup(ns, f"/big/f{k}")


async def test_no_directory_is_read_whole_when_the_limit_is_zero(
    store: CountingStore,
) -> None:
    async with opened_namespace(store, store.leases, directory_load_limit=0) as ns:
        for k in range(20, 30):
            await create(ns, f"/d/f{k}")
        assert store.listings == []
