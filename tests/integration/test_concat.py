"""Concatenation on a real cluster: files' blocks appended to another file without a
copy (the S3 gateway's multipart uploads complete this way). The moved blocks keep the
owner stamps their datanodes wrote, so reads, re-replication, a datanode's owner check
and a namenode restart all find them as they are; refusals change nothing."""

from __future__ import annotations

import asyncio
import os

import pytest

from plasmafs.client import Client
from plasmafs.client.admin import FsckSummary
from plasmafs.core.errors import (
    InvalidArgumentError,
    IsDirectoryError,
    NotFoundError,
    OperationNotPermittedError,
    PermissionError,
)
from tests.conftest import DataCluster, connected_client
from tests.support.waiting import eventually


async def _summary(dfs: Client) -> FsckSummary:
    items = [item async for item in dfs.fsck("/")]
    summary = items[-1]
    assert isinstance(summary, FsckSummary)
    return summary


async def _healthy(dfs: Client) -> bool:
    summary = await _summary(dfs)
    return (summary.corrupt_files, summary.missing_blocks, summary.under_replicated_blocks) == (
        0,
        0,
        0,
    )


async def test_sources_become_the_targets_blocks_without_a_copy(
    dfs: Client, data_cluster: DataCluster
) -> None:
    bs = data_cluster.blocksize
    head, parts = os.urandom(2 * bs), [os.urandom(3 * bs), os.urandom(bs), os.urandom(bs // 3)]
    await dfs.write_file("/target", head)
    await dfs.mkdir("/parts")
    where = {}
    for k, part in enumerate(parts):
        await dfs.write_file(f"/parts/{k}", part)
        where[k] = [(r.address, r.block_start) for e in (await dfs.blocks(f"/parts/{k}")).extents
                    for r in e.replicas]  # fmt: skip
    attr = await dfs.concat("/target", [f"/parts/{k}" for k in range(3)])
    whole = head + b"".join(parts)
    assert attr.size == len(whole)
    assert await dfs.read_file("/target") == whole
    assert await dfs.listdir("/parts") == []
    extents = (await dfs.blocks("/target")).extents
    # The parts' blocks, where they were: block 2 of the target is part 0's block 0.
    moved = [(r.address, r.block_start) for e in extents if e.file_index >= 2 for r in e.replicas]
    assert moved == [p for k in range(3) for p in where[k]]
    assert [e.file_index for e in extents if e.file_index >= 2] == [2, 5, 6]
    assert await _healthy(dfs)


async def test_moved_blocks_keep_their_stamps_through_copies_restarts_and_owner_checks(
    dfs: Client, data_cluster: DataCluster
) -> None:
    bs = data_cluster.blocksize
    first, second = os.urandom(2 * bs), os.urandom(2 * bs + 5)
    await dfs.write_file("/a", first, replication=1)
    await dfs.write_file("/b", second, replication=1)
    await dfs.concat("/a", ["/b"])
    # A split of a moved extent (a truncation inside it) keeps the stamps right too.
    await dfs.setattr("/a", size=3 * bs)
    whole = (first + second)[: 3 * bs]
    await dfs.setrep("/a", 3)
    await asyncio.wait_for(dfs.wait_replication(["/a"], 3), 60)
    for node in data_cluster.datanodes:  # each replica alone, the others stopped
        others = [d for d in data_cluster.datanodes if d is not node]
        for d in others:
            d.stop()
        try:
            async with connected_client(data_cluster.namenode.address) as alone:
                assert await alone.read_file("/a") == whole
        finally:
            for d in others:
                d.start()
    data_cluster.namenode.stop()
    data_cluster.namenode.start()
    async with connected_client(data_cluster.namenode.address) as again:
        assert await again.read_file("/a") == whole
        # Every datanode compared every stamp with the records when it registered again.
        await eventually(lambda: _healthy(again), timeout=30)
        assert (await _summary(again)).corrupt_files == 0


async def test_a_part_not_ending_on_a_block_boundary_must_be_the_last(
    dfs: Client, data_cluster: DataCluster
) -> None:
    bs = data_cluster.blocksize
    await dfs.write_file("/t", os.urandom(bs))
    await dfs.write_file("/odd", os.urandom(bs + 1))
    await dfs.write_file("/next", os.urandom(bs))
    with pytest.raises(InvalidArgumentError, match="whole blocks"):
        await dfs.concat("/t", ["/odd", "/next"])
    await dfs.write_file("/short", os.urandom(10))
    with pytest.raises(InvalidArgumentError, match="whole blocks"):
        await dfs.concat("/short", ["/next"])
    # Nothing changed.
    assert (await dfs.stat("/t")).size == bs
    assert await dfs.exists("/odd") and await dfs.exists("/next")
    await dfs.concat("/t", ["/next", "/odd"])
    assert (await dfs.stat("/t")).size == 3 * bs + 1


async def test_refusals(dfs: Client, data_cluster: DataCluster) -> None:
    bs = data_cluster.blocksize
    await dfs.write_file("/t", b"")
    await dfs.write_file("/s", os.urandom(bs))
    await dfs.mkdir("/d")
    with pytest.raises(InvalidArgumentError, match="named twice"):
        await dfs.concat("/t", ["/s", "/s"])
    with pytest.raises(InvalidArgumentError, match="named twice"):
        await dfs.concat("/s", ["/s"])
    with pytest.raises(InvalidArgumentError):
        await dfs.concat("/t", [])
    with pytest.raises(NotFoundError):
        await dfs.concat("/t", ["/missing"])
    with pytest.raises(IsDirectoryError):
        await dfs.concat("/t", ["/d"])
    await dfs.link("/s", "/s2")
    with pytest.raises(InvalidArgumentError, match="other links"):
        await dfs.concat("/t", ["/s"])
    assert (await dfs.stat("/t")).size == 0
    assert (await dfs.stat("/s")).nlink == 2


async def test_inline_contents_are_refused_and_written_to_blocks_on_request(
    ifs: Client,
) -> None:
    await ifs.write_file("/t", b"")
    await ifs.write_file("/small", b"tiny")
    with pytest.raises(InvalidArgumentError, match="inline"):
        await ifs.concat("/t", ["/small"])
    writer = await ifs.open("/small2", "wb", inline=False)
    async with writer:
        await writer.write(b"tiny")  # type: ignore[union-attr]
    await ifs.concat("/t", ["/small2"])
    assert await ifs.read_file("/t") == b"tiny"


async def test_the_caller_must_be_able_to_read_and_remove_each_source(
    fs: Client, alice: Client
) -> None:
    await fs.mkdir("/shared", 0o777)
    await fs.chmod("/shared", 0o1777)  # sticky: only owners remove
    await fs.write_file("/shared/roots", b"")
    await alice.write_file("/shared/alices", b"")
    with pytest.raises(OperationNotPermittedError, match="sticky"):
        await alice.concat("/shared/alices", ["/shared/roots"])
    await fs.chmod("/shared", 0o777)
    await fs.chmod("/shared/roots", 0o600)
    with pytest.raises(PermissionError):
        await alice.concat("/shared/alices", ["/shared/roots"])
    assert await fs.exists("/shared/roots")
    await fs.chmod("/shared/alices", 0o444)
    await fs.chmod("/shared/roots", 0o644)
    with pytest.raises(PermissionError):
        await alice.concat("/shared/alices", ["/shared/roots"])
