"""Every transaction that starts committing ends: locks released, reservations returned,
a typed error raised, whatever fails (failures injected into a real namespace, in
process, over the test's PostgreSQL database)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from plasmafs.core.errors import StorageError
from plasmafs.namenode.lease_store import LeaseStore
from plasmafs.namenode.store import Store
from plasmafs.namenode.transaction import Txn, TxnState
from tests.support.namespace_parts import CAPACITY, Opened, opened_namespace


@pytest.fixture
async def namespace(dsn: str) -> AsyncIterator[Opened]:
    """A namespace over the test's database with one registered datanode."""
    store, leases = Store(dsn, read_pool_size=2), LeaseStore(dsn, deadline=10.0)
    async with opened_namespace(store, leases, dsn) as opened:
        yield opened


async def _writing_txn(ns: Opened, txn_id: int) -> Txn:
    txn = ns.begin(txn_id)
    attr = await ns.create(txn, b"/f")
    await ns.parts.files.allocate(txn, attr.ino, 0, 8)
    assert ns.parts.data.allocator.free_blocks() == CAPACITY - 8
    return txn


def _assert_ended(ns: Opened, txn: Txn) -> None:
    assert txn.state is TxnState.ABORTED
    assert len(ns.locks) == 0
    assert ns.parts.data.allocator.free_blocks() == CAPACITY


async def _can_create_again(ns: Opened) -> None:
    txn = ns.begin(99)
    await ns.create(txn, b"/f")
    await ns.commit(txn)
    assert txn.state is TxnState.COMMITTED


async def test_a_failing_commit_preparation_ends_the_transaction(
    namespace: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    txn = await _writing_txn(namespace, 1)

    async def fail(t: Txn) -> None:
        raise StorageError("injected: the metadata store read failed")

    monkeypatch.setattr(namespace.parts.data, "prepare_commit", fail)
    with pytest.raises(StorageError, match="injected"):
        await namespace.commit(txn)
    _assert_ended(namespace, txn)
    monkeypatch.undo()
    await _can_create_again(namespace)


async def test_an_unexpected_error_while_queueing_ends_the_transaction(
    namespace: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    txn = await _writing_txn(namespace, 1)

    def fail(cs: object, durable: bool = True) -> None:
        raise RuntimeError("injected bug")

    monkeypatch.setattr(namespace.committer, "enqueue", fail)
    with pytest.raises(RuntimeError):
        await namespace.commit(txn)
    _assert_ended(namespace, txn)
    monkeypatch.undo()
    await _can_create_again(namespace)


async def test_a_commit_cancelled_while_preparing_ends_the_transaction(
    namespace: Opened, monkeypatch: pytest.MonkeyPatch
) -> None:
    txn = await _writing_txn(namespace, 1)
    entered = asyncio.Event()

    async def hang(t: Txn) -> None:
        entered.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(namespace.parts.data, "prepare_commit", hang)
    task = asyncio.ensure_future(namespace.commit(txn))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    _assert_ended(namespace, txn)


async def test_a_postgresql_error_ends_the_transaction(namespace: Opened, dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:  # PostgreSQL itself refuses the commit's rows
        await conn.execute(
            """CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN RAISE EXCEPTION 'injected refusal'; END $$;
               CREATE TRIGGER refuse BEFORE INSERT ON extents
               FOR EACH ROW EXECUTE FUNCTION refuse()"""
        )
    finally:
        await conn.close()
    txn = await _writing_txn(namespace, 1)
    with pytest.raises(StorageError, match="injected refusal"):
        await namespace.commit(txn)
    _assert_ended(namespace, txn)
    await _can_create_again(namespace)


async def test_a_failure_after_the_write_leaves_the_committer_running(
    namespace: Opened,
) -> None:
    def fail(cs: object) -> None:
        raise RuntimeError("injected bug in an observer of commits")

    observers = namespace.parts.after_commit
    observers.insert(0, fail)
    try:
        txn = namespace.begin(1)
        await namespace.create(txn, b"/g")
        with pytest.raises(StorageError, match="outcome unknown"):
            await namespace.commit(txn)
        assert len(namespace.locks) == 0
    finally:
        observers.remove(fail)
    await _can_create_again(namespace)


async def test_one_bad_change_set_does_not_fail_the_others_in_its_group(
    namespace: Opened, dsn: str
) -> None:
    conn = await asyncpg.connect(dsn)
    try:  # PostgreSQL refuses one name only
        await conn.execute(
            """CREATE FUNCTION refuse_bad() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN
                   IF NEW.name = 'bad' THEN RAISE EXCEPTION 'injected: no bad names'; END IF;
                   RETURN NEW;
               END $$;
               CREATE TRIGGER refuse_bad BEFORE INSERT ON entries
               FOR EACH ROW EXECUTE FUNCTION refuse_bad()"""
        )
    finally:
        await conn.close()
    txns = []
    for k, name in enumerate([b"/good1", b"/bad", b"/good2"], start=1):
        txn = namespace.begin(k)
        await namespace.create(txn, name)
        txns.append(txn)
    groups_before = namespace.committer.stats.groups
    results = await asyncio.gather(*(namespace.commit(t) for t in txns), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StorageError) and "no bad names" in str(results[1])
    assert [t.state for t in txns] == [TxnState.COMMITTED, TxnState.ABORTED, TxnState.COMMITTED]
    assert namespace.committer.stats.groups - groups_before == 2  # written one by one
    assert len(namespace.locks) == 0


def _blocks(extents: list) -> set[tuple[int, int]]:
    """(datanode, block) of every replica of `extents`."""
    return {
        (r.datanode_id, r.block_start + k)
        for e in extents
        for r in e.replicas
        for k in range(e.block_count)
    }


async def test_blocks_of_a_commit_of_unknown_outcome_are_not_handed_out_again(
    namespace: Opened,
) -> None:
    """PostgreSQL has the commit (the failure comes after its write), the namenode does
    not know: the file's blocks must not go to another file (its data would be
    overwritten), and fsck's accounting allows what is kept in doubt."""

    def fail(cs: object) -> None:
        raise RuntimeError("injected bug in an observer of commits")

    files, allocator = namespace.parts.files, namespace.parts.data.allocator
    (datanode,) = namespace.parts.data.registry.ids()
    observers = namespace.parts.after_commit
    observers.insert(0, fail)
    try:
        txn = namespace.begin(1)
        first = await namespace.create(txn, b"/f")
        _, granted = await files.allocate(txn, first.ino, 0, 8)
        with pytest.raises(StorageError, match="outcome unknown"):
            await namespace.commit(txn)
    finally:
        observers.remove(fail)
    assert txn.state is TxnState.ABORTED and len(namespace.locks) == 0
    assert allocator.free_blocks() == CAPACITY - 8
    assert (allocator.reserved_blocks(datanode), allocator.in_doubt_blocks(datanode)) == (0, 8)
    other = namespace.begin(2)
    second = await namespace.create(other, b"/g")
    _, rest = await files.allocate(other, second.ino, 0, CAPACITY - 8)
    await namespace.commit(other)
    assert not _blocks(granted) & _blocks(rest)
    assert allocator.free_blocks() == 0
