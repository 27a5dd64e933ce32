"""Usage kept current (namenode/usage.py) on a real cluster: after every kind of change
— creates, writes, appends, truncation, replication, inline contents, symbolic links,
special files, hard links, renames of files and of trees (also racing creates inside
them), exchanges, removes, permission changes — the totals the namenode keeps for every
directory equal what fsck counts afresh from PostgreSQL, and `summarize` (du, count)
answers what a walk of the tree adds up to; a restart computes the same totals again."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from plasmafs.client import Client
from plasmafs.client.admin import FsckSummary
from plasmafs.client.editing import FileEditor
from plasmafs.core.attributes import FileKind, Summary
from plasmafs.core.paths import At
from tests.conftest import DataCluster, connected_client
from tests.support.accounts import STAFF_GID, TOKENS


@pytest.fixture
async def fs(inline_cluster: DataCluster) -> AsyncIterator[Client]:
    async with connected_client(inline_cluster.namenode.address) as client:
        yield client


async def _record_errors(fs: Client) -> tuple[str, ...]:
    items = [item async for item in fs.fsck("/")]
    summary = items[-1]
    assert isinstance(summary, FsckSummary)
    return summary.record_errors


async def _walked(fs: Client, path: str) -> Summary:
    """What a walk of the tree adds up to, each file counted once."""
    files = directories = symlinks = size = space = 0
    seen: set[int] = set()
    async for entry in fs.walk(path):
        kind = entry.attr.kind
        if kind is FileKind.DIRECTORY:
            directories += 1
        elif kind is FileKind.SYMLINK:
            symlinks += 1
        elif kind is FileKind.FILE and entry.attr.ino not in seen:
            seen.add(entry.attr.ino)
            files, size, space = files + 1, size + entry.attr.size, space + entry.space
    return Summary(files, directories, symlinks, size, space)


async def _agrees(fs: Client, *paths: str) -> None:
    assert await _record_errors(fs) == ()
    for path in paths:
        assert await fs.summarize(path) == await _walked(fs, path), path


async def test_the_usage_kept_matches_a_fresh_count_after_every_kind_of_change(
    fs: Client, inline_cluster: DataCluster
) -> None:
    bs = inline_cluster.blocksize
    await fs.mkdir("/a/b/c", parents=True)
    await fs.mkdir("/x")
    await fs.write_file("/a/small", b"inline")  # kept by the namenode: counted once
    await fs.write_file("/a/b/big", os.urandom(3 * bs + 5), replication=2)
    await fs.write_file("/a/b/c/one", os.urandom(bs), replication=3)
    await fs.symlink("/a/b/link", "/a/small")
    await fs.mknod("/a/b/fifo", FileKind.FIFO)
    await _agrees(fs, "/", "/a", "/a/b", "/a/b/c")

    editor = await fs.open("/a/b/c/one", "r+b")  # grows past its end
    assert isinstance(editor, FileEditor)
    await editor.pwrite(bs + 10, os.urandom(bs // 2))
    await editor.close()
    await fs.truncate("/a/b/big", bs)
    await fs.setrep("/a/b/big", 3)
    await fs.write_file("/a/small", os.urandom(2 * bs))  # replaced: now in blocks
    await _agrees(fs, "/", "/a", "/a/b")

    await fs.rename("/a/b", "/x/b")  # a tree leaves one ancestor for another
    await fs.rename("/a/small", "/x/b/c/small")
    await fs.mkdir("/x/e")
    await fs.write_file("/x/e/f", b"e's")
    await fs.rename("/x/e", "/a/b2")
    await fs.rename("/x/b/c", "/a/b2", exchange=True)  # two trees trade places
    await _agrees(fs, "/", "/a", "/x", "/x/b", "/a/b2")

    await fs.link("/a/b2/one", "/x/second-name")  # counted once by a summary
    await _agrees(fs, "/", "/a", "/x")
    await fs.unlink("/a/b2/one")
    await fs.chmod("/x/b", 0o700)  # closed to others: a summary for others walks
    await fs.chmod("/x/b", 0o755)
    await fs.chmod("/a", 0o711)
    await fs.remove("/x/b/c", recursive=True)
    await _agrees(fs, "/", "/a", "/x")

    # Creates inside a tree while the tree moves back and forth: whichever commits
    # first, the totals follow the files.
    deep = (await fs.mkdir("/x/moving/deep", parents=True)).ino

    async def create(k: int) -> None:  # by the directory's inode: it moves meanwhile
        made = await fs.create(At(deep, f"f{k}"))
        await fs.setattr(made.ino, size=100 + k)

    async def moves() -> None:
        for k in range(6):
            src, dst = ("/x/moving", "/a/moving") if k % 2 == 0 else ("/a/moving", "/x/moving")
            await fs.rename(src, dst)

    await asyncio.gather(*(create(k) for k in range(40)), moves())
    await _agrees(fs, "/", "/a", "/x", "/x/moving")

    inline_cluster.namenode.stop()
    inline_cluster.namenode.start()  # the totals computed afresh
    async with connected_client(inline_cluster.namenode.address) as again:
        await _agrees(again, "/", "/a", "/x", "/x/moving")


async def test_a_summary_counts_only_what_its_caller_may_enter(
    fs: Client, inline_cluster: DataCluster
) -> None:
    """A directory closed to the caller's group (0705) is counted, not entered, as a
    walk would: the totals kept are not used for that caller."""
    await fs.mkdir("/g/shut", parents=True)
    await fs.write_file("/g/shut/inside", b"hidden size")
    await fs.write_file("/g/open", b"seen")
    await fs.chown("/g/shut", gid=STAFF_GID)
    await fs.chmod("/g/shut", 0o705)
    alice = Client(inline_cluster.namenode.address, token=TOKENS["alice"])
    try:
        seen = await alice.summarize("/g")
        assert (seen.files, seen.bytes, seen.unreadable) == (1, 4, 1)
        await fs.chmod("/g/shut", 0o755)
        seen = await alice.summarize("/g")
        assert (seen.files, seen.bytes, seen.unreadable) == (2, 4 + 11, 0)
    finally:
        await alice.close()
    await fs.chmod("/", 0o700)  # a closed root is kept as closed, also once counted again
    assert await _record_errors(fs) == ()
    await fs.chmod("/", 0o755)
