"""Directory leases and reserved inode numbers (namenode/directory_leases.py,
client/session_requests.py) on a real namenode: the holder alone uses a leased
directory's entries; others wait until it releases the lease (told through
lease_news), loses it with its connection, or has it taken away after the recall
timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from plasmafs.client import Client
from plasmafs.core.errors import (
    BusyError,
    InvalidArgumentError,
    NotDirectoryError,
    NotFoundError,
    OperationNotPermittedError,
    TransactionError,
    error_from_wire,
)
from tests.support.cluster import NamenodeProcess

RECALL_TIMEOUT = 2.0


@pytest.fixture
def leasing(dsn: str, tmp_path: Path) -> Iterator[NamenodeProcess]:
    """A namenode that takes leases away after RECALL_TIMEOUT seconds."""
    env = {"PFS_NAMENODE_LEASE_RECALL_TIMEOUT": str(RECALL_TIMEOUT)}
    process = NamenodeProcess(dsn, tmp_path, env=env).start()
    yield process
    process.stop()


@pytest.fixture
async def holder(leasing: NamenodeProcess) -> AsyncIterator[Client]:
    async with Client(leasing.address) as client:
        yield client


@pytest.fixture
async def other(leasing: NamenodeProcess) -> AsyncIterator[Client]:
    async with Client(leasing.address) as client:
        yield client


async def _leased_dir(fs: Client, path: str) -> int:
    async with await fs.begin() as t:
        attr = await t.mkdir(path, lease=True)
    return attr.ino


async def test_reserved_inode_numbers_name_new_files_and_directories(
    holder: Client, other: Client
) -> None:
    session = await holder.session_requests()
    inos = await session.reserve_inodes(3)
    assert len(set(inos)) == 3
    async with await holder.begin() as t:
        made = await t.create("/f", ino=inos[0])
        directory = await t.mkdir("/d", ino=inos[1])
    assert (made.ino, directory.ino) == (inos[0], inos[1])
    assert (await holder.stat("/f")).ino == inos[0]
    with pytest.raises(InvalidArgumentError, match="not reserved"):  # used already
        async with await holder.begin() as t:
            await t.create("/again", ino=inos[0])
    with pytest.raises(InvalidArgumentError, match="not reserved"):  # another session's
        async with await other.begin() as t:
            await t.create("/theirs", ino=inos[2])
    for bad in (0, 65537):
        with pytest.raises(InvalidArgumentError):
            await session.reserve_inodes(bad)
    conn = await holder.connection()
    request, future = conn.new_request()
    request.txn = 12345
    request.reserve_inodes.count = 1
    response = await future
    assert response.HasField("error")  # session requests are not sent in transactions
    error = error_from_wire(response.error.code, response.error.message)
    assert isinstance(error, TransactionError), error


async def _held_back(
    holder: Client, work: Awaitable[Any], pending: Callable[[], Awaitable[None]]
) -> tuple[Any, float]:
    """Start `work` (another client's), let the holder hear the recall, do `pending`
    and release; `work`'s result (or error) and how long it waited."""
    session = await holder.session_requests()
    started = time.monotonic()
    task = asyncio.ensure_future(work)
    recalled, revoked = await session.lease_news(5)
    assert recalled and not revoked
    assert not task.done()
    await pending()
    await session.release_leases(recalled)
    try:
        result: Any = await asyncio.wait_for(task, 5)
    except Exception as exc:
        result = exc
    return result, time.monotonic() - started


async def test_others_wait_for_the_holder_and_then_see_what_it_sent(
    holder: Client, other: Client
) -> None:
    d = await _leased_dir(holder, "/d")
    # The holder's own requests are never held back.
    await holder.create("/d/own")
    assert [e.name for e in (await holder.readdir(d))[0]] == ["own"]

    async def create_late() -> None:
        await holder.create("/d/late")

    found, _ = await _held_back(holder, other.stat("/d/late"), create_late)
    assert found.ino == (await holder.stat("/d/late")).ino  # sent before the release
    # Released: nobody waits any more, and the directory is an ordinary one.
    await other.create("/d/theirs")
    assert [e.name for e in (await other.readdir("/d"))[0]] == ["late", "own", "theirs"]


@pytest.mark.parametrize("what", ["readdir", "create", "unlink", "rmdir", "summary", "walk"])
async def test_every_use_of_the_entries_is_held_back(
    holder: Client, other: Client, what: str
) -> None:
    await holder.mkdir("/top")
    d = await _leased_dir(holder, "/top/d")
    await holder.write_file("/top/d/file", b"content")
    works: dict[str, Callable[[], Awaitable[Any]]] = {
        "readdir": lambda: other.readdir(d),
        "create": lambda: other.create("/top/d/new"),
        "unlink": lambda: other.unlink("/top/d/file"),
        "rmdir": lambda: other.rmdir("/top/d"),
        "summary": lambda: other.summarize("/top"),
        "walk": lambda: _walk(other, "/top"),
    }
    work = works[what]()

    async def nothing() -> None:
        return None

    result, _ = await _held_back(holder, work, nothing)
    if what == "rmdir":
        assert "not empty" in str(result)
    else:
        assert not isinstance(result, Exception), result


async def _walk(fs: Client, path: str) -> list[str]:
    return [e.path async for e in fs.walk(path)]


async def test_an_existing_directory_is_leased_by_its_owner_and_recalled_as_any_other(
    holder: Client, other: Client
) -> None:
    e = (await holder.mkdir("/e")).ino
    await other.create("/e/old")
    session = await holder.session_requests()
    await session.lease_dir(e)
    await session.lease_dir(e)  # held already: nothing changes
    with pytest.raises(BusyError):
        await (await other.session_requests()).lease_dir(e)

    async def create_new() -> None:
        await holder.create("/e/new")

    listed, _ = await _held_back(holder, other.readdir("/e"), create_new)
    assert [x.name for x in listed[0]] == ["new", "old"]
    await (await other.session_requests()).lease_dir(e)  # released: free for its owner


async def test_leasing_an_existing_directory_is_refused_while_it_changes_or_to_others(
    holder: Client, other: Client
) -> None:
    e = (await holder.mkdir("/e")).ino
    session = await holder.session_requests()
    t = await other.begin()
    await t.create("/e/pending")  # holds the directory until it ends
    with pytest.raises(BusyError, match="changes under way"):
        await session.lease_dir(e)
    await t.commit()
    await session.lease_dir(e)
    await session.release_leases([e])
    f = await holder.create("/f")
    with pytest.raises(NotDirectoryError):
        await session.lease_dir(f.ino)
    for owner in ({"uid": 1234}, {"gid": 4321}):  # another's, or in another group
        theirs = await holder.mkdir(f"/theirs{len(owner)}{next(iter(owner))}")
        await holder.setattr(theirs.ino, **owner)
        with pytest.raises(OperationNotPermittedError):
            await session.lease_dir(theirs.ino)
    await holder.setattr(theirs.ino, mode=0o2755)  # set-group-ID: new entries get 4321
    await session.lease_dir(theirs.ino)
    with pytest.raises(NotFoundError):
        await session.lease_dir(987654321)


async def test_a_lease_not_released_is_taken_away_after_the_recall_timeout(
    holder: Client, other: Client
) -> None:
    await _leased_dir(holder, "/d")
    started = time.monotonic()
    with pytest.raises(NotFoundError):
        await other.stat("/d/x")
    waited = time.monotonic() - started
    assert RECALL_TIMEOUT * 0.9 <= waited < RECALL_TIMEOUT + 3
    recalled, revoked = await (await holder.session_requests()).lease_news(0)
    assert revoked and not recalled
    started = time.monotonic()
    with pytest.raises(NotFoundError):
        await other.stat("/d/y")
    assert time.monotonic() - started < 1  # not leased any more


async def test_leases_end_with_the_holders_connection(
    leasing: NamenodeProcess, other: Client
) -> None:
    holder = Client(leasing.address)
    await _leased_dir(holder, "/d")
    await holder.create("/d/f")
    task = asyncio.ensure_future(other.readdir("/d"))
    recalled, _ = await (await holder.session_requests()).lease_news(5)
    assert recalled  # the readdir waits on the lease now
    assert not task.done()
    await holder.close()
    entries, _ = await asyncio.wait_for(task, 5)
    assert [e.name for e in entries] == ["f"]


async def test_lease_news_waits_then_answers_empty(holder: Client) -> None:
    session = await holder.session_requests()
    started = time.monotonic()
    assert await session.lease_news(0.3) == ([], [])
    assert time.monotonic() - started >= 0.25
    with pytest.raises(InvalidArgumentError):
        await session.lease_news(61)


async def test_walks_and_summaries_wait_only_for_leases_below_them(
    holder: Client, other: Client
) -> None:
    await holder.mkdir("/a")
    await holder.mkdir("/b")
    await other.write_file("/b/file", b"b")
    await _leased_dir(holder, "/a/d")
    started = time.monotonic()
    assert [e.path async for e in other.walk("/b")] == ["", "file"]
    assert (await other.summarize("/b")).files == 1
    assert time.monotonic() - started < 1
    assert await (await holder.session_requests()).lease_news(0) == ([], [])
