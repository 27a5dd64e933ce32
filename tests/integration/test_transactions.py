"""Transactions: isolation, atomicity, conflicts, concurrency, disconnects."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from plasmafs.client import Client, ConflictError, ExistsError, NotFoundError
from tests.support.cluster import NamenodeProcess
from tests.support.waiting import eventually


async def test_changes_are_private_until_commit(fs: Client, namenode: NamenodeProcess) -> None:
    other = Client(namenode.address)
    try:
        async with fs.transaction() as t:
            await t.mkdir("/d")
            await t.create("/d/f")
            assert (await t.stat("/d/f")).size == 0
            assert [e.name for e in (await t.readdir("/d"))[0]] == ["f"]
            assert [e.name for e in (await t.readdir("/"))[0]] == ["d"]
            assert not await other.exists("/d")
            assert await fs.listdir("/") == []
        assert await other.listdir("/d") == ["f"]
    finally:
        await other.close()


async def test_abort_discards_everything(fs: Client) -> None:
    await fs.create("/keep")
    t = await fs.begin()
    await t.mkdir("/d")
    await t.unlink("/keep")
    await t.rename("/d", "/e")
    await t.abort()
    assert await fs.listdir("/") == ["keep"]
    with pytest.raises(RuntimeError):
        async with fs.transaction() as t2:
            await t2.unlink("/keep")
            raise RuntimeError("the body failed")
    assert await fs.listdir("/") == ["keep"]


async def test_a_failed_operation_leaves_the_transaction_usable(fs: Client) -> None:
    await fs.create("/taken")
    async with fs.transaction() as t:
        await t.create("/a")
        with pytest.raises(ExistsError):
            await t.create("/taken")
        await t.create("/b")
    assert await fs.listdir("/") == ["a", "b", "taken"]


async def test_readdir_inside_a_transaction_merges_its_own_changes(fs: Client) -> None:
    await fs.mkdir("/d")
    async with fs.transaction() as t:
        await asyncio.gather(*(t.create(f"/d/c{i:02d}") for i in range(20)))
    async with fs.transaction() as t:
        await t.unlink("/d/c03")
        await t.create("/d/c03x")
        await t.rename("/d/c10", "/d/zz")
        await t.create("/d/a")
        names = [e.name async for e in t.scandir("/d", page=4)]
    expected = sorted({f"c{i:02d}" for i in range(20)} - {"c03", "c10"} | {"c03x", "zz", "a"})
    assert names == expected
    assert await fs.listdir("/d") == expected


async def test_same_entry_in_two_transactions_conflicts(fs: Client) -> None:
    t1 = await fs.begin()
    t2 = await fs.begin()
    await t1.create("/x")
    with pytest.raises(ConflictError):
        await t2.create("/x")
    with pytest.raises(ConflictError):  # the conflict aborted t2
        await t2.create("/y")
    await t1.commit()
    assert await fs.listdir("/") == ["x"]


async def test_lock_wait_lets_the_later_writer_see_the_earlier_commit(fs: Client) -> None:
    t1 = await fs.begin()
    await t1.create("/x")
    t2 = await fs.begin(lock_wait=5.0)
    before = await _served(fs, "create")
    pending = asyncio.ensure_future(t2.create("/x"))
    await eventually(lambda: _started(fs, "create", before), "t2's create started")
    assert not pending.done()  # waiting for t1's lock
    await t1.commit()
    with pytest.raises(ExistsError):  # re-validated against t1's committed change
        await pending
    await t2.abort()


async def test_pipelined_requests_of_a_transaction_run_in_order_while_others_go_on(
    fs: Client,
) -> None:
    holder = await fs.begin()
    await holder.create("/x")
    waiter = await fs.begin(lock_wait=5.0)
    # Sent together; the create inside /x needs the mkdir before it, which waits for
    # the holder's lock on the name.
    before = await _served(fs, "mkdir")
    made = asyncio.ensure_future(waiter.mkdir("/x"))
    inside = asyncio.ensure_future(waiter.create("/x/f"))
    await eventually(lambda: _started(fs, "mkdir", before), "the waiter's mkdir started")
    assert not made.done() and not inside.done()
    async with fs.transaction() as other:  # the same connection is not held up
        await other.create("/y")
    await holder.abort()
    await asyncio.wait_for(asyncio.gather(made, inside), 10)
    await waiter.commit()
    assert await fs.listdir("/x") == ["f"]
    assert await fs.listdir("/") == ["x", "y"]


async def test_an_expired_lock_wait_fails_the_request_not_the_connection(fs: Client) -> None:
    await fs.mkdir("/d")
    holder = await fs.begin()
    await holder.create("/d/f")
    waiter = await fs.begin(lock_wait=0.3)
    started = asyncio.get_running_loop().time()
    with pytest.raises(ConflictError):
        await asyncio.wait_for(waiter.create("/d/f"), 10)
    assert asyncio.get_running_loop().time() - started < 5
    # The connection outlived the expired wait: the holder commits on it, others read.
    await holder.commit()
    assert await fs.listdir("/d") == ["f"]


async def test_conflicting_setattrs_never_lose_an_update(fs: Client) -> None:
    f = await fs.create("/f")
    t1 = await fs.begin()
    t2 = await fs.begin()
    await t1.setattr("/f", mode=0o600)
    with pytest.raises(ConflictError):
        await t2.setattr("/f", mode=0o644)
    await t1.commit()
    assert (await fs.stat("/f")).mode == 0o600
    t3 = await fs.begin()
    t4 = await fs.begin(lock_wait=5.0)
    await t3.setattr("/f", uid=7)
    before = await _served(fs, "setattr")
    waiting = asyncio.ensure_future(t4.setattr("/f", gid=9))
    await eventually(lambda: _started(fs, "setattr", before), "t4's setattr started")
    await t3.commit()
    await waiting
    await t4.commit()
    final = await fs.stat("/f")
    assert (final.mode, final.uid, final.gid) == (0o600, 7, 9)
    assert final.version == f.version + 3


async def test_conflicting_renames(fs: Client) -> None:
    await fs.create("/a")
    t1 = await fs.begin()
    t2 = await fs.begin()
    await t1.rename("/a", "/b")
    with pytest.raises(ConflictError):
        await t2.rename("/a", "/c")
    await t1.commit()
    assert await fs.listdir("/") == ["b"]


async def test_crossing_directory_renames_cannot_make_a_cycle(fs: Client) -> None:
    await fs.mkdir("/p")
    await fs.mkdir("/q")
    t1 = await fs.begin()
    t2 = await fs.begin()
    await t1.rename("/p", "/q/p")
    with pytest.raises(ConflictError):
        await t2.rename("/q", "/p/q")
    await t1.commit()
    assert await fs.listdir("/") == ["q"] and await fs.listdir("/q") == ["p"]


async def test_rmdir_conflicts_with_a_create_inside(fs: Client) -> None:
    await fs.mkdir("/d")
    t1 = await fs.begin()
    await t1.create("/d/f")
    t2 = await fs.begin()
    with pytest.raises(ConflictError):
        await t2.rmdir("/d")
    await t1.commit()
    assert await fs.listdir("/d") == ["f"]


async def test_64_concurrent_transactions_create_in_one_directory(fs: Client, dsn: str) -> None:
    await fs.mkdir("/shared")

    async def one(i: int) -> None:
        async with fs.transaction() as t:
            await t.create(f"/shared/f{i:02d}")
            await t.mkdir(f"/shared/d{i:02d}")

    await asyncio.gather(*(one(i) for i in range(64)))
    names = await fs.listdir("/shared")
    assert names == sorted([f"f{i:02d}" for i in range(64)] + [f"d{i:02d}" for i in range(64)])
    shared = await fs.stat("/shared")
    assert shared.nlink == 2 + 64
    conn = await asyncpg.connect(dsn)
    try:
        nlink = await conn.fetchval(
            "SELECT nlink FROM inodes i JOIN entries e ON e.ino = i.ino WHERE e.name = 'shared'"
        )
        entries = await conn.fetchval("SELECT count(*) FROM entries WHERE parent = $1", shared.ino)
    finally:
        await conn.close()
    assert (nlink, entries) == (66, 128)


async def test_disconnect_aborts_open_transactions(namenode: NamenodeProcess) -> None:
    a = Client(namenode.address)
    b = Client(namenode.address)
    try:
        t = await a.begin()
        await t.create("/x")
        with pytest.raises(ConflictError):
            await b.create("/x")  # a's transaction holds the entry
        await a.close()
        for _ in range(50):  # the namenode notices the closed stream promptly
            try:
                await b.create("/x")
                break
            except ConflictError:
                await asyncio.sleep(0.05)
        assert (await b.stat("/x")).kind.name == "FILE"
        assert await b.listdir("/") == ["x"]
    finally:
        await a.close()
        await b.close()


async def test_commits_are_visible_at_once_to_other_connections(
    fs: Client, namenode: NamenodeProcess
) -> None:
    other = Client(namenode.address)
    try:
        await fs.mkdir("/d")
        for i in range(30):
            await other.stat("/d")  # keep /d cached in the namenode
            await fs.rename("/d", f"/d{i}")
            with pytest.raises(NotFoundError):
                await other.stat("/d")
            await fs.rename(f"/d{i}", "/d")
            assert (await other.stat("/d")).version == 1 + 2 * (i + 1)
    finally:
        await other.close()


async def test_commits_are_durable_in_postgresql(fs: Client, dsn: str) -> None:
    f = await fs.create("/durable")
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT * FROM entries WHERE name = 'durable'")
    finally:
        await conn.close()
    assert row is not None and row["ino"] == f.ino and row["parent"] == 1


async def test_parallel_commit_lanes_keep_shared_directories_consistent(
    dsn: str, tmp_path: Path
) -> None:
    namenode = NamenodeProcess(dsn, tmp_path, env={"PFS_NAMENODE_COMMIT_LANES": "3"}).start()
    fs = Client(namenode.address)
    try:
        await fs.mkdir("/shared")

        async def one(i: int) -> None:
            async with fs.transaction() as t:
                await t.mkdir(f"/shared/d{i:03d}")
                await t.create(f"/shared/d{i:03d}/f")

        for wave in range(3):  # several waves, so groups land on different lanes
            await asyncio.gather(*(one(wave * 64 + i) for i in range(64)))
        cached = await fs.stat("/shared")
        assert cached.nlink == 2 + 192
        namenode.stop()
        namenode.start()  # an empty cache: what PostgreSQL holds
        await fs.close()
        fs = Client(namenode.address)
        fresh = await fs.stat("/shared")
        assert fresh == cached
    finally:
        await fs.close()
        namenode.stop()


async def _served(fs: Client, op: str) -> int:
    """How many requests of `op` the namenode has started so far (its counters count a
    request when it starts, before any lock wait)."""
    return (await fs.request_counts()).get(op, 0)


async def _started(fs: Client, op: str, before: int) -> bool:
    return await _served(fs, op) > before
