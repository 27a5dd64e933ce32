"""The namespace rules, run in process over `MemoryStore` (milliseconds each): names,
kinds, link counts, renames, symbolic links, listings, permissions and what a
transaction sees. `tests/integration/test_memory_store_agrees.py` runs these same
tests over PostgreSQL, so the stand-in cannot drift from the real store unnoticed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import (
    BusyError,
    ConflictError,
    ExistsError,
    InvalidArgumentError,
    IsDirectoryError,
    LoopError,
    NotDirectoryError,
    NotEmptyError,
    NotFoundError,
    PermissionError,
    TransactionError,
)
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.principals import SUPERUSER, Principal
from plasmafs.namenode.transaction import Txn
from tests.support.memory_store import MemoryStore
from tests.support.namespace_parts import Opened, opened_namespace

ALICE = Principal("alice", 1000, 1000, frozenset({1000}), False, 1, None)


@pytest.fixture
async def ns() -> AsyncIterator[Opened]:
    """A namespace over a fresh `MemoryStore`."""
    store = MemoryStore()
    async with opened_namespace(store, store.leases) as opened:
        yield opened


def at(path: str) -> Place:
    return Place.of(path.encode())


async def mkdir(ns: Opened, path: str, mode: int = 0o755) -> None:
    txn = ns.begin()
    await ns.parts.namespace.mkdir(txn, at(path), mode)
    await ns.commit(txn)


async def create(ns: Opened, path: str) -> None:
    txn = ns.begin()
    await ns.create(txn, path.encode())
    await ns.commit(txn)


async def lookup(ns: Opened, path: str, who: Principal = SUPERUSER):  # type: ignore[no-untyped-def]
    return await ns.parts.namespace.lookup(None, at(path), True, who=who)


async def names(ns: Opened, path: str, after: str = "", limit: int = 0) -> list[str]:
    page, _ = await ns.parts.namespace.readdir(
        None, at(path), after.encode(), limit, 1000, plus=False, who=SUPERUSER
    )
    return [name for name, _ in page]


async def refused(
    ns: Opened, change: Callable[[Txn], Awaitable[object]], who: Principal = SUPERUSER
) -> None:
    """Run `change` in a new transaction, which is then aborted (a client aborts the
    transaction of a refused change, or its locks stay)."""
    txn = ns.begin(who=who)
    try:
        await change(txn)
    finally:
        ns.parts.transactions.abort(txn)


async def rename(ns: Opened, src: str, dst: str, noreplace: bool = False) -> None:
    txn = ns.begin()
    await ns.parts.namespace.rename(txn, at(src), at(dst), noreplace)
    await ns.commit(txn)


async def test_mkdir_and_create_count_links_and_touch_the_parent(ns: Opened) -> None:
    before = await lookup(ns, "/")
    await mkdir(ns, "/a", 0o750)
    await create(ns, "/a/f")
    a, f, root = await lookup(ns, "/a"), await lookup(ns, "/a/f"), await lookup(ns, "/")
    assert a.kind is FileKind.DIRECTORY and a.mode == 0o750 and a.nlink == 2
    assert f.kind is FileKind.FILE and f.size == 0 and f.nlink == 1
    assert root.nlink == before.nlink + 1  # a's '..'
    assert root.mtime_ns >= before.mtime_ns and root.version > before.version
    assert a.mtime_ns >= f.mtime_ns


async def test_names_that_are_taken_missing_or_not_directories(ns: Opened) -> None:
    await mkdir(ns, "/d")
    await create(ns, "/d/f")
    for path, error in [
        ("/d/f", ExistsError),
        ("/d", ExistsError),
        ("/missing/f", NotFoundError),
        ("/d/f/g", NotDirectoryError),
        ("/", IsDirectoryError),
    ]:
        with pytest.raises(error):
            await refused(ns, lambda t, path=path: ns.create(t, path.encode()))
    with pytest.raises(InvalidArgumentError):
        await refused(ns, lambda t: ns.parts.namespace.create(t, at("/d/g"), 0o644, 33, 0))
    assert len(ns.locks) == 0


async def test_unlink_and_rmdir_check_kinds_and_emptiness(ns: Opened) -> None:
    await mkdir(ns, "/d")
    await create(ns, "/d/f")
    namespace = ns.parts.namespace
    with pytest.raises(NotEmptyError):
        await refused(ns, lambda t: namespace.rmdir(t, at("/d")))
    with pytest.raises(IsDirectoryError):
        await refused(ns, lambda t: namespace.unlink(t, at("/d")))
    with pytest.raises(NotDirectoryError):
        await refused(ns, lambda t: namespace.rmdir(t, at("/d/f")))
    txn = ns.begin()
    await namespace.unlink(txn, at("/d/f"))
    await namespace.rmdir(txn, at("/d"))
    await ns.commit(txn)
    with pytest.raises(NotFoundError):
        await lookup(ns, "/d")
    assert (await lookup(ns, "/")).nlink == 2


async def test_rename_replaces_like_rename_2(ns: Opened) -> None:
    await mkdir(ns, "/d")
    await mkdir(ns, "/d/sub")
    await mkdir(ns, "/full")
    await create(ns, "/full/x")
    await create(ns, "/f")
    await create(ns, "/g")
    for src, dst, error in [
        ("/f", "/d", IsDirectoryError),
        ("/d", "/f", NotDirectoryError),
        ("/d", "/full", NotEmptyError),
        ("/d", "/d/sub/inside", InvalidArgumentError),
        ("/", "/x", BusyError),
        ("/missing", "/x", NotFoundError),
    ]:
        with pytest.raises(error):
            await refused(
                ns, lambda t, s=src, d=dst: ns.parts.namespace.rename(t, at(s), at(d), False)
            )
    with pytest.raises(ExistsError):
        await refused(ns, lambda t: ns.parts.namespace.rename(t, at("/f"), at("/g"), True))
    g = await lookup(ns, "/g")
    f = await lookup(ns, "/f")
    await rename(ns, "/f", "/g")
    assert (await lookup(ns, "/g")).ino == f.ino != g.ino
    with pytest.raises(NotFoundError):
        await lookup(ns, "/f")
    await rename(ns, "/d/sub", "/moved")
    assert (await lookup(ns, "/d")).nlink == 2
    assert await names(ns, "/") == ["d", "full", "g", "moved"]


async def test_symbolic_links_resolve_and_loops_stop(ns: Opened) -> None:
    await mkdir(ns, "/real")
    await create(ns, "/real/f")
    txn = ns.begin()
    await ns.parts.namespace.symlink(txn, at("/link"), b"/real")
    await ns.parts.namespace.symlink(txn, at("/a"), b"/b")
    await ns.parts.namespace.symlink(txn, at("/b"), b"/a")
    await ns.commit(txn)
    assert (await lookup(ns, "/link/f")).ino == (await lookup(ns, "/real/f")).ino
    assert await ns.parts.namespace.readlink(None, at("/link"), who=SUPERUSER) == "/real"
    with pytest.raises(LoopError):
        await lookup(ns, "/a")
    with pytest.raises(InvalidArgumentError):
        await ns.parts.namespace.readlink(None, at("/real"), who=SUPERUSER)


async def test_listings_are_in_byte_order_and_page_after_a_name(ns: Opened) -> None:
    await mkdir(ns, "/d")
    txn = ns.begin()
    for name in ["b", "a", "é", "Z", "c0", "c"]:
        await ns.create(txn, f"/d/{name}".encode())
    await ns.commit(txn)
    assert await names(ns, "/d") == ["Z", "a", "b", "c", "c0", "é"]
    assert await names(ns, "/d", after="b", limit=2) == ["c", "c0"]


async def test_a_transaction_sees_its_own_changes_and_nobody_else_does(ns: Opened) -> None:
    txn = ns.begin()
    await ns.parts.namespace.mkdir(txn, at("/mine"), 0o755)
    await ns.create(txn, b"/mine/f")
    assert await ns.parts.namespace.lookup(txn, at("/mine/f"), True, who=SUPERUSER)
    assert await names_in(ns, txn, "/mine") == ["f"]
    with pytest.raises(NotFoundError):
        await lookup(ns, "/mine")
    ns.parts.transactions.abort(txn)
    with pytest.raises(NotFoundError):
        await lookup(ns, "/mine")
    with pytest.raises(TransactionError):
        await ns.create(txn, b"/again")


async def names_in(ns: Opened, txn: object, path: str) -> list[str]:
    page, _ = await ns.parts.namespace.readdir(
        txn,  # type: ignore[arg-type]
        at(path),
        b"",
        0,
        1000,
        plus=False,
        who=SUPERUSER,
    )
    return [name for name, _ in page]


async def test_two_transactions_creating_one_name_conflict(ns: Opened) -> None:
    first, second = ns.begin(), ns.begin()
    await ns.create(first, b"/f")
    with pytest.raises(ConflictError):
        await ns.create(second, b"/f")
    await ns.commit(first)
    with pytest.raises(ConflictError, match="was aborted"):
        await ns.create(second, b"/g")
    assert len(ns.locks) == 0


async def test_permissions_of_an_ordinary_user(ns: Opened) -> None:
    await mkdir(ns, "/private", 0o700)
    await mkdir(ns, "/open", 0o777)
    with pytest.raises(PermissionError):
        await refused(ns, lambda t: ns.create(t, b"/private/f"), who=ALICE)
    with pytest.raises(PermissionError):
        await lookup(ns, "/private/anything", who=ALICE)
    txn = ns.begin(who=ALICE)
    attr = await ns.create(txn, b"/open/mine")
    await ns.commit(txn)
    assert (attr.uid, attr.gid) == (1000, 1000)
    with pytest.raises(PermissionError):
        await refused(ns, lambda t: ns.parts.namespace.rmdir(t, at("/private")), who=ALICE)
