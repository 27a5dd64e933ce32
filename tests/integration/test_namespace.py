"""The namespace rules, one behaviour at a time, against a real namenode."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from plasmafs.client import (
    BusyError,
    Client,
    DirEntry,
    ExistsError,
    FileKind,
    InvalidArgumentError,
    IsDirectoryError,
    LoopError,
    NameTooLongError,
    NotDirectoryError,
    NotEmptyError,
    NotFoundError,
    TransactionError,
)
from tests.conftest import connected_client
from tests.support.cluster import NamenodeProcess


async def test_mkdir_create_and_lookup(fs: Client) -> None:
    d = await fs.mkdir("/a", 0o750)
    f = await fs.create("/a/f", 0o600, replication=2)
    assert d.kind is FileKind.DIRECTORY and d.mode == 0o750 and d.nlink == 2
    assert f.kind is FileKind.FILE and f.mode == 0o600 and f.size == 0
    assert (f.replication, f.blocksize) == (2, 1024 * 1024)
    assert await fs.stat("/a/f") == f
    assert await fs.getattr(f.ino) == f
    root = await fs.stat("/")
    assert root.nlink == 3  # '.', the entry in its parent (itself), and a's '..'
    assert (await fs.stat("/a")).mtime_ns >= f.mtime_ns


async def test_create_errors(fs: Client) -> None:
    await fs.mkdir("/d")
    await fs.create("/d/f")
    with pytest.raises(ExistsError):
        await fs.create("/d/f")
    with pytest.raises(ExistsError):
        await fs.mkdir("/d")
    with pytest.raises(ExistsError):
        await fs.mkdir("/")
    with pytest.raises(NotFoundError):
        await fs.create("/missing/f")
    with pytest.raises(NotDirectoryError):
        await fs.create("/d/f/g")
    with pytest.raises(IsDirectoryError):
        await fs.create("/")
    with pytest.raises(InvalidArgumentError):
        await fs.create("/d/g", replication=33)
    with pytest.raises(InvalidArgumentError):
        await fs.create("/d/g", blocksize=1000)
    with pytest.raises(InvalidArgumentError):
        await fs.mkdir("/d/h", 0o10000)
    with pytest.raises(NameTooLongError):
        await fs.create("/d/" + "x" * 256)
    with pytest.raises(NotFoundError):
        await fs.getattr(999_999_999)
    assert await fs.listdir("/d") == ["f"]


async def test_unlink_and_rmdir(fs: Client) -> None:
    await fs.mkdir("/d")
    await fs.mkdir("/d/sub")
    await fs.create("/d/f")
    with pytest.raises(IsDirectoryError):
        await fs.unlink("/d/sub")
    with pytest.raises(NotDirectoryError):
        await fs.rmdir("/d/f")
    with pytest.raises(NotEmptyError):
        await fs.rmdir("/d")
    with pytest.raises(BusyError):
        await fs.rmdir("/")
    await fs.unlink("/d/f")
    with pytest.raises(NotFoundError):
        await fs.unlink("/d/f")
    await fs.rmdir("/d/sub")
    assert (await fs.stat("/d")).nlink == 2
    await fs.rmdir("/d")
    assert not await fs.exists("/d")
    assert (await fs.stat("/")).nlink == 2


@pytest.mark.parametrize("restarted", [False, True], ids=["counted", "queried"])
async def test_rmdir_sees_entries_of_earlier_commits_and_of_its_own_transaction(
    namenode: NamenodeProcess, restarted: bool
) -> None:
    """rmdir counts what the namenode's cache holds of a directory it created, and asks
    PostgreSQL after a restart; both must agree on every case."""
    async with connected_client(namenode.address) as fs:
        await fs.mkdir("/d")
        await fs.mkdir("/e")
        for name in ("a", "b", "c"):
            await fs.create(f"/d/{name}")
        await fs.create("/f")
        await fs.rename("/d/c", "/e/c")  # moved out of /d...
        await fs.rename("/f", "/e/f")  # ...and into /e
        await fs.unlink("/e/c")
    if restarted:
        namenode.stop()
        namenode.start()
    async with connected_client(namenode.address) as fs:
        async with fs.transaction() as t:
            await t.unlink("/d/a")
            with pytest.raises(NotEmptyError):
                await t.rmdir("/d")  # b is still there
        with pytest.raises(NotEmptyError):
            await fs.rmdir("/e")  # f was moved in
        async with fs.transaction() as t:
            await t.create("/d/new")
            await t.unlink("/d/new")
            with pytest.raises(NotEmptyError):
                await t.rmdir("/d")  # b is committed
            await t.unlink("/d/b")
            await t.rmdir("/d")
        await fs.rename("/e/f", "/f")
        await fs.rmdir("/e")
        assert await fs.listdir("/") == ["f"]


async def test_rename_within_and_across_directories(fs: Client) -> None:
    await fs.mkdir("/a")
    await fs.mkdir("/b")
    f = await fs.create("/a/f")
    await fs.rename("/a/f", "/a/g")
    assert (await fs.stat("/a/g")).ino == f.ino
    await fs.rename("/a/g", "/b/g")
    assert await fs.listdir("/a") == [] and await fs.listdir("/b") == ["g"]
    moved = await fs.stat("/b/g")
    assert moved.ino == f.ino and moved.version == f.version + 2 and moved.ctime_ns > f.ctime_ns
    await fs.mkdir("/a/sub")
    await fs.create("/a/sub/x")
    await fs.rename("/a/sub", "/b/sub")
    assert (await fs.stat("/a")).nlink == 2 and (await fs.stat("/b")).nlink == 3
    assert await fs.listdir("/b/sub") == ["x"]


async def test_rename_replace_rules(fs: Client) -> None:
    for d in ("/d1", "/d2", "/full"):
        await fs.mkdir(d)
    await fs.create("/full/x")
    await fs.create("/f1")
    f2 = await fs.create("/f2")
    await fs.rename("/f1", "/f2")  # a file replaces a file
    assert await fs.listdir("/") == ["d1", "d2", "f2", "full"]
    assert (await fs.stat("/f2")).ino != f2.ino
    with pytest.raises(IsDirectoryError):
        await fs.rename("/f2", "/d1")
    with pytest.raises(NotDirectoryError):
        await fs.rename("/d1", "/f2")
    with pytest.raises(NotEmptyError):
        await fs.rename("/d1", "/full")
    with pytest.raises(ExistsError):
        await fs.rename("/d1", "/d2", replace=False)
    d1 = await fs.stat("/d1")
    await fs.rename("/d1", "/d2")  # a directory replaces an empty directory
    assert (await fs.stat("/d2")).ino == d1.ino
    assert (await fs.stat("/")).nlink == 4  # d2, full and '.' twice
    with pytest.raises(NotFoundError):
        await fs.rename("/nope", "/x")
    with pytest.raises(BusyError):
        await fs.rename("/", "/x")


async def test_rename_exchange_swaps_two_entries(fs: Client) -> None:
    for d in ("/a", "/a/sub", "/b"):
        await fs.mkdir(d)
    f = await fs.create("/b/f")
    a = await fs.stat("/a")
    await fs.rename("/a", "/b/f", exchange=True)  # a directory and a file, across
    assert (await fs.stat("/b/f")).ino == a.ino
    assert (await fs.stat("/a")).ino == f.ino
    assert await fs.listdir("/b/f") == ["sub"]
    assert (await fs.stat("/")).nlink == 3  # b and '.' twice: the directory moved down
    assert (await fs.stat("/b")).nlink == 3  # f (now the directory) and '.' twice
    await fs.rename("/b/f", "/a", exchange=True)  # and back
    assert (await fs.stat("/a")).ino == a.ino and (await fs.stat("/b/f")).ino == f.ino
    assert (await fs.stat("/")).nlink == 4 and (await fs.stat("/b")).nlink == 2
    with pytest.raises(NotFoundError):
        await fs.rename("/a", "/nope", exchange=True)
    with pytest.raises(InvalidArgumentError):
        await fs.rename("/a", "/a/sub", exchange=True)  # into itself
    with pytest.raises(InvalidArgumentError):
        await fs.rename("/a/sub", "/a", exchange=True)  # its parent into it
    with pytest.raises(InvalidArgumentError):
        await fs.rename("/a", "/b", replace=False, exchange=True)
    await fs.rename("/a", "/b", exchange=True)  # two directories, side by side
    assert await fs.listdir("/a") == ["f"] and await fs.listdir("/b") == ["sub"]


async def test_rename_into_own_subtree_is_refused(fs: Client) -> None:
    await fs.mkdir("/a/b/c", parents=True)
    await fs.symlink("/link", "/a/b")
    with pytest.raises(InvalidArgumentError):
        await fs.rename("/a", "/a/b/c/a")
    with pytest.raises(InvalidArgumentError):
        await fs.rename("/a", "/link/c/a")  # the same, seen through a symlink
    await fs.rename("/a/b/c", "/c")  # moving up is fine
    assert await fs.listdir("/") == ["a", "c", "link"]


async def test_rename_onto_itself_is_a_no_op(fs: Client) -> None:
    f = await fs.create("/f")
    await fs.rename("/f", "/f")
    assert await fs.stat("/f") == f


async def test_setattr(fs: Client) -> None:
    f = await fs.create("/f")
    a = await fs.chmod("/f", 0o640)
    assert a.mode == 0o640 and a.version == f.version + 1
    a = await fs.chown("/f", 1234, 5678)
    assert (a.uid, a.gid) == (1234, 5678)
    a = await fs.setattr("/f", mtime_ns=1_000_000_000, size=42, replication=3)
    assert (a.mtime_ns, a.size, a.replication) == (1_000_000_000, 42, 3)
    assert await fs.stat("/f") == a
    by_ino = await fs.setattr(f.ino, mode=0o600)
    assert by_ino.mode == 0o600
    await fs.mkdir("/d")
    with pytest.raises(IsDirectoryError):
        await fs.setattr("/d", size=1)
    with pytest.raises(InvalidArgumentError):
        await fs.chmod("/f", 0o17777)
    with pytest.raises(InvalidArgumentError):
        await fs.setattr("/f", size=-1)
    with pytest.raises(NotFoundError):
        await fs.chmod("/nope", 0o600)


async def test_symlinks(fs: Client) -> None:
    await fs.mkdir("/a/b", parents=True)
    f = await fs.create("/a/b/f")
    link = await fs.symlink("/a/rel", "b/f")
    assert link.kind is FileKind.SYMLINK and link.size == 3
    assert await fs.readlink("/a/rel") == "b/f"
    assert (await fs.stat("/a/rel")).ino == f.ino
    assert (await fs.lookup("/a/rel")).ino == link.ino
    await fs.symlink("/up", "a/b/../b")
    assert (await fs.stat("/up/f")).ino == f.ino  # symlink in the middle of a path
    await fs.symlink("/loop1", "/loop2")
    await fs.symlink("/loop2", "/loop1")
    with pytest.raises(LoopError):
        await fs.stat("/loop1")
    await fs.symlink("/dangling", "/nowhere")
    with pytest.raises(NotFoundError):
        await fs.stat("/dangling")
    with pytest.raises(InvalidArgumentError):
        await fs.readlink("/a")
    with pytest.raises(InvalidArgumentError):
        await fs.symlink("/empty", "")
    await fs.unlink("/a/rel")
    assert await fs.exists("/a/b/f")


async def test_readdir_pages_are_complete_and_sorted(fs: Client) -> None:
    await fs.mkdir("/big")
    names = [f"n{i:05d}" for i in range(2500)] + ["é", "Z", "a b", "日本"]
    async with fs.transaction() as t:
        # pipelined: every request is in flight at once, in one or a few frames
        await asyncio.gather(*(t.create(f"/big/{name}") for name in names))
    seen = [e.name async for e in fs.scandir("/big", page=1000)]
    assert seen == sorted(names, key=lambda n: n.encode())
    page, more = await fs.readdir("/big", limit=10, plus=True)
    assert more and len(page) == 10 and all(e.attr is not None for e in page)
    last, more = await fs.readdir("/big", after=seen[-2], limit=10)
    assert [e.name for e in last] == [seen[-1]] and not more


async def test_readdir_paging_is_stable_under_concurrent_changes(fs: Client) -> None:
    await fs.mkdir("/d")
    async with fs.transaction() as t:
        await asyncio.gather(*(t.create(f"/d/f{i:03d}") for i in range(100)))
    first, more = await fs.readdir("/d", limit=50)
    assert more
    await fs.unlink("/d/f010")  # before the cursor: no effect on the next page
    await fs.create("/d/f0995")  # after the cursor: shows up
    await fs.unlink("/d/f099")
    rest = [e.name async for e in _pages_after(fs, "/d", first[-1].name)]
    names = [e.name for e in first] + rest
    assert len(names) == len(set(names))
    assert "f0995" in rest and "f099" not in rest
    assert names[:50] == [f"f{i:03d}" for i in range(50)]


async def _pages_after(fs: Client, path: str, after: str) -> AsyncIterator[DirEntry]:
    while True:
        page, more = await fs.readdir(path, after=after, limit=7)
        for e in page:
            yield e
        if not more:
            return
        after = page[-1].name


async def test_readdir_of_a_file_is_an_error(fs: Client) -> None:
    await fs.create("/f")
    with pytest.raises(NotDirectoryError):
        await fs.readdir("/f")


async def test_fsstat_counts(fs: Client) -> None:
    await fs.mkdir("/a")
    await fs.create("/a/f")
    await fs.create("/a/g")
    await fs.symlink("/s", "/a")
    st = await fs.fsstat()
    assert (st.files, st.directories, st.symlinks) == (2, 2, 1)
    await fs.unlink("/a/g")
    assert (await fs.fsstat()).files == 1


async def test_writes_need_a_transaction_and_ended_ones_refuse_work(fs: Client) -> None:
    t = await fs.begin()
    await t.create("/f")
    await t.commit()
    with pytest.raises(TransactionError):
        await t.create("/g")
    with pytest.raises(TransactionError):
        await t.commit()


async def test_makedirs_accepts_a_parent_another_transaction_made_meanwhile(fs: Client) -> None:
    other = await fs.begin()
    await other.mkdir("/p")  # not committed yet: it holds the name /p
    made = asyncio.create_task(fs.run(lambda t: t.makedirs("/p/q"), lock_wait=10))
    await asyncio.sleep(0.3)  # makedirs found no /p and waits for the lock on its name
    await other.commit()
    assert (await made).kind is FileKind.DIRECTORY
    assert await fs.listdir("/p") == ["q"]


async def test_mkdir_with_parents_waits_for_a_parent_another_creator_holds(fs: Client) -> None:
    """Creators of one tree at once (fsspec's put of many files into a new directory)
    meet on its directories: as `mkdir -p` on a local disk, each succeeds."""
    other = await fs.begin()
    await other.mkdir("/p")  # not committed yet: it holds the name /p
    made = asyncio.create_task(fs.mkdir("/p/q", parents=True))
    await asyncio.sleep(0.5)  # longer than the retries of a conflict take
    await other.commit()
    assert (await made).kind is FileKind.DIRECTORY
    assert await fs.listdir("/p") == ["q"]


async def test_concurrent_makedirs_of_one_path_all_succeed(fs: Client) -> None:
    results = await asyncio.gather(
        *(fs.mkdir(f"/p/q/r/s{k % 2}", parents=True) for k in range(32)),
        return_exceptions=True,
    )
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert await fs.listdir("/p/q/r") == ["s0", "s1"]
    await fs.create("/p/file")
    with pytest.raises(NotDirectoryError):
        await fs.mkdir("/p/file/x", parents=True)
