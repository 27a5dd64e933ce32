"""Directory quotas on a real cluster: limits on entries and on space (with
replication) are hit exactly — by creates, writes, replication, renames into the tree
and many writers at once — and never by removes or moves inside the tree; nested
limits; a restart keeps them; removing the directory removes its quota; the CLI's
`admin quota` and `count -q`; only a superuser sets them."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plasmafs.client import Client
from plasmafs.client.admin import FsckSummary
from plasmafs.client.file_writer import RUN_BLOCKS, FileWriter
from plasmafs.core.errors import (
    ConflictError,
    OperationNotPermittedError,
    PermissionError,
    QuotaExceededError,
)
from plasmafs.core.paths import At
from tests.conftest import DataCluster, connected_client
from tests.support.accounts import TOKENS, UIDS
from tests.support.cli_runner import clean_env, run_pfs


@pytest.fixture
async def fs(data_cluster: DataCluster) -> AsyncIterator[Client]:
    async with connected_client(data_cluster.namenode.address) as client:
        yield client


async def _names(fs: Client, path: str) -> int:
    return len(await fs.listdir(path))


async def test_a_limit_on_entries_is_reached_exactly_and_freed_by_removes(fs: Client) -> None:
    await fs.mkdir("/q")
    quota = await fs.set_quota("/q", entries=5)  # the directory and 4 names below
    assert (quota.max_entries, quota.max_space, quota.entries) == (5, None, 1)
    await fs.mkdir("/q/d")
    for k in range(3):
        await fs.create(f"/q/d/f{k}")
    for refused in (
        lambda: fs.create("/q/one-more"),
        lambda: fs.mkdir("/q/dir"),
        lambda: fs.symlink("/q/link", "/q/d/f0"),
        lambda: fs.write_file("/q/d/new", b"data"),
    ):
        with pytest.raises(QuotaExceededError, match="allows 5 entries"):
            await refused()
    summary = await fs.summarize("/q")
    assert summary.quota is not None and summary.quota.remaining_entries == 0
    await fs.rename("/q/d/f0", "/q/moved")  # a move inside the tree takes nothing
    await fs.write_file("/q/d/f1", b"replaced")  # nor does replacing a file
    await fs.unlink("/q/moved")
    await fs.create("/q/after-a-remove")
    with pytest.raises(QuotaExceededError):
        await fs.create("/q/and-one-more")


async def test_a_limit_on_space_counts_replication_and_is_reached_exactly(
    fs: Client, data_cluster: DataCluster
) -> None:
    bs = data_cluster.blocksize
    await fs.mkdir("/s")
    await fs.set_quota("/s", space=6 * bs)
    await fs.write_file("/s/a", os.urandom(2 * bs), replication=2)  # 4 blocks of space
    await fs.write_file("/s/b", os.urandom(bs), replication=2)  # exactly at the limit
    with pytest.raises(QuotaExceededError, match="bytes of space"):
        await fs.write_file("/s/c", b"x", replication=1)
    with pytest.raises(QuotaExceededError):
        await fs.setrep("/s/a", 3)
    with pytest.raises(QuotaExceededError):
        await fs.truncate("/s/b", bs + 1)
    assert [await fs.read_file(p) for p in ("/s/a", "/s/b")]  # whole, as they were
    assert (await fs.lookup("/s/a")).replication == 2
    await fs.truncate("/s/a", bs)
    await fs.write_file("/s/c", os.urandom(bs), replication=2)  # the freed space


async def test_renames_into_a_tree_are_charged_and_moves_out_free_it(fs: Client) -> None:
    await fs.mkdir("/q")
    await fs.mkdir("/outside/tree", parents=True)
    for k in range(3):
        await fs.create(f"/outside/tree/f{k}")
    await fs.set_quota("/q", entries=4)
    with pytest.raises(QuotaExceededError):
        await fs.rename("/outside/tree", "/q/tree")  # 4 names: 5 with /q
    await fs.unlink("/outside/tree/f2")
    await fs.rename("/outside/tree", "/q/tree")  # exactly 4
    with pytest.raises(QuotaExceededError):
        await fs.create("/q/tree/f9")
    await fs.rename("/q/tree/f1", "/outside/f1")
    await fs.create("/q/tree/f9")


async def test_nested_limits_each_hold(fs: Client, data_cluster: DataCluster) -> None:
    await fs.mkdir("/p/child", parents=True)
    await fs.set_quota("/p", entries=10)
    await fs.set_quota("/p/child", entries=3)
    await fs.create("/p/child/a")
    await fs.create("/p/child/b")
    with pytest.raises(QuotaExceededError, match="allows 3 entries"):
        await fs.create("/p/child/c")
    for k in range(6):
        await fs.create(f"/p/f{k}")
    with pytest.raises(QuotaExceededError, match="allows 10 entries"):
        await fs.create("/p/f6")
    await fs.clear_quota("/p")
    await fs.create("/p/f6")
    assert (await fs.summarize("/p")).quota is None


async def test_many_writers_at_once_stop_exactly_at_the_limit(fs: Client) -> None:
    await fs.mkdir("/busy")
    await fs.set_quota("/busy", entries=51)
    results = await asyncio.gather(
        *(fs.create(f"/busy/f{k}") for k in range(80)), return_exceptions=True
    )
    refused = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(r, QuotaExceededError) for r in refused), refused
    assert len(refused) == 30
    assert await _names(fs, "/busy") == 50
    summary = await fs.summarize("/busy")
    assert summary.quota is not None and summary.quota.entries == 51


async def test_a_restart_keeps_quotas_and_a_removed_directory_loses_its_own(
    data_cluster: DataCluster,
) -> None:
    async with connected_client(data_cluster.namenode.address) as fs:
        await fs.mkdir("/kept")
        await fs.set_quota("/kept", entries=2, space=10**6)
        await fs.mkdir("/gone")
        await fs.set_quota("/gone", entries=1)
        await fs.rmdir("/gone")
        await fs.mkdir("/gone")  # a new directory: no quota
        await fs.create("/gone/free")
    data_cluster.namenode.stop()
    data_cluster.namenode.start()
    async with connected_client(data_cluster.namenode.address) as fs:
        quota = (await fs.summarize("/kept")).quota
        assert quota is not None and (quota.max_entries, quota.max_space) == (2, 10**6)
        await fs.create("/kept/one")
        with pytest.raises(QuotaExceededError):
            await fs.create("/kept/two")
        assert (await fs.summarize("/gone")).quota is None


async def test_only_a_superuser_sets_a_quota(fs: Client, data_cluster: DataCluster) -> None:
    await fs.mkdir("/home-of-alice")
    await fs.chown("/home-of-alice", uid=UIDS["alice"])
    alice = Client(data_cluster.namenode.address, token=TOKENS["alice"])
    try:
        with pytest.raises((PermissionError, OperationNotPermittedError)):
            await alice.set_quota("/home-of-alice", entries=100)
        await fs.set_quota("/home-of-alice", entries=2)
        await alice.create("/home-of-alice/mine")
        with pytest.raises(QuotaExceededError):
            await alice.create("/home-of-alice/more")
        quota = (await alice.summarize("/home-of-alice")).quota  # anyone may read it
        assert quota is not None and quota.remaining_entries == 0
    finally:
        await alice.close()


def test_the_cli_sets_shows_and_counts_quotas(data_cluster: DataCluster, tmp_path: Path) -> None:
    env = clean_env(tmp_path, data_cluster.namenode.address)

    def pfs(*args: str, ok: bool = True) -> str:
        result = run_pfs(env, *args)
        assert (result.rc == 0) == ok, result
        return result.out if ok else result.err

    pfs("mkdir", "/cq")
    assert pfs("admin", "quota", "set", "/cq", "--entries", "3", "--bytes", "1M") == (
        "/cq: entries 1 of 3; space 0 B of 1.0 MiB\n"
    )
    pfs("touch", "/cq/a", "/cq/b")
    error = pfs("touch", "/cq/c", ok=False)
    assert error.count("\n") == 1 and "quota" in error
    lines = pfs("count", "-q", "-v", "/cq").splitlines()
    assert lines[0].split() == [
        "QUOTA", "REM_QUOTA", "SPACE_QUOTA", "REM_SPACE_QUOTA",
        "DIR_COUNT", "FILE_COUNT", "CONTENT_SIZE", "PATHNAME",
    ]  # fmt: skip
    assert lines[1].split() == ["3", "0", "1048576", "1048576", "1", "2", "0", "/cq"]
    assert pfs("admin", "quota", "get", "/cq") == "/cq: entries 3 of 3; space 0 B of 1.0 MiB\n"
    pfs("admin", "quota", "clear", "/cq")
    assert pfs("count", "-q", "/cq").split()[:4] == ["none", "inf", "none", "inf"]
    assert pfs("admin", "quota", "get", "/cq") == "/cq: no quota\n"
    assert "not a directory" in pfs("admin", "quota", "set", "/cq/a", "--entries", "2", ok=False)


async def test_a_writer_is_stopped_as_it_allocates_past_a_space_limit(
    fs: Client, data_cluster: DataCluster
) -> None:
    """Not only at its commit: a write with no size announced allocates a run at a
    time, and the first run that starts past the limit is refused."""
    bs = data_cluster.blocksize
    await fs.mkdir("/room")
    await fs.set_quota("/room", space=4 * bs)
    writer = await fs.open("/room/big", "wb", replication=1)
    assert isinstance(writer, FileWriter)
    written = 0
    with pytest.raises(QuotaExceededError):
        for _ in range(200):
            await writer.write(os.urandom(bs))
            written += bs
    assert written < 4 * bs + RUN_BLOCKS * bs + bs  # stopped within one run of the limit
    await writer.abort()
    assert await fs.listdir("/room") == []
    await fs.write_file("/room/fits", os.urandom(4 * bs), replication=1)  # exactly


async def test_creates_racing_a_move_into_a_limited_tree_never_pass_its_limit(
    fs: Client,
) -> None:
    """Creates in a directory by its inode while it moves into a tree with a limit:
    whichever commits first, the tree never holds more than its limit."""
    for attempt in range(3):
        await fs.mkdir(f"/q{attempt}")
        b = (await fs.mkdir(f"/a{attempt}/b", parents=True)).ino
        await fs.set_quota(f"/q{attempt}", entries=30)

        async def create(k: int, b: int = b) -> None:
            await fs.create(At(b, f"f{k}"))

        async def move(attempt: int = attempt) -> None:
            await asyncio.sleep(0.002 * attempt)
            await fs.rename(f"/a{attempt}/b", f"/q{attempt}/b")

        results = await asyncio.gather(
            *(create(k) for k in range(60)), move(), return_exceptions=True
        )
        failures = [r for r in results if r is not None]  # a create may meet the move's lock
        assert all(isinstance(r, QuotaExceededError | ConflictError) for r in failures), failures
        quota = (await fs.summarize(f"/q{attempt}")).quota
        assert quota is not None and quota.entries <= 30
    items = [item async for item in fs.fsck("/")]
    assert isinstance(items[-1], FsckSummary) and items[-1].record_errors == ()
