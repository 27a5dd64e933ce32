"""Sizes set through the library on real datanodes: what is past a cut is gone for
good, and an extension reads zeros, whether the cut came from a size change, an edit,
or a copied range that ended inside a block (POSIX's truncate)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from plasmafs.client import Client
from plasmafs.client.editing import FileEditor
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.core.attributes import Attr
from plasmafs.core.errors import ConflictError
from tests.conftest import DataCluster


async def test_an_extension_after_a_cut_reads_zeros(dfs: Client, data_cluster: DataCluster) -> None:
    bs = data_cluster.blocksize
    data = os.urandom(3 * bs)
    await dfs.write_file("/f", data)
    await dfs.setattr("/f", size=bs + 10)
    await dfs.setattr("/f", size=3 * bs)
    assert await dfs.read_file("/f") == data[: bs + 10] + bytes(2 * bs - 10)
    await dfs.truncate("/f", 5)
    attr = await dfs.truncate("/f", bs)
    assert attr.size == bs
    assert await dfs.read_file("/f") == data[:5] + bytes(bs - 5)

    editor = await dfs.open("/f", "r+b")
    assert isinstance(editor, FileEditor)
    editor.truncate(2)
    editor.truncate(2 * bs + 3)  # one edit, nothing written
    await editor.close()
    assert await dfs.read_file("/f") == data[:2] + bytes(2 * bs + 1)


async def test_a_copied_range_extended_reads_zeros(dfs: Client, data_cluster: DataCluster) -> None:
    bs = data_cluster.blocksize
    data = os.urandom(3 * bs)
    await dfs.write_file("/src", data)
    reader = await dfs.open("/src", "rb")
    writer = await dfs.open("/part", "wb")
    assert isinstance(reader, FileReader) and isinstance(writer, FileWriter)
    async with reader:
        await writer.copy_blocks(reader, bs, bs + 100)  # its last block holds more
        await writer.close()
    assert await dfs.read_file("/part") == data[bs : 2 * bs + 100]
    await dfs.setattr("/part", size=2 * bs)
    assert await dfs.read_file("/part") == data[bs : 2 * bs + 100] + bytes(bs - 100)


async def test_a_size_with_other_attributes_is_one_commit(
    dfs: Client, data_cluster: DataCluster
) -> None:
    bs = data_cluster.blocksize
    await dfs.write_file("/g", os.urandom(2 * bs))
    before = await dfs.request_counts()
    attr = await dfs.setattr("/g", size=bs, mode=0o600)  # a cut: no block to rewrite
    after = await dfs.request_counts()
    assert (attr.size, attr.mode) == (bs, 0o600)
    assert after["commit"] - before["commit"] == 1
    attr = await dfs.setattr("/g", size=bs + 100, mode=0o640)  # past an end on a block
    assert (attr.size, attr.mode) == (bs + 100, 0o640)


async def test_a_size_read_before_another_writer_changed_it_is_decided_again(
    dfs: Client, data_cluster: DataCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """truncate decides from a size it read outside the transaction that changes it: if
    the file changed meanwhile (here: its stat is a stale one, of a block-aligned size),
    the namenode refuses the change (if_size) and truncate decides again — the bytes a
    cut left inside the end block never come back."""
    bs = data_cluster.blocksize
    data = os.urandom(2 * bs)
    await dfs.write_file("/r", data)
    await dfs.truncate("/r", bs + 10)  # block 1 keeps its bytes past the end on disk
    stale = await dfs.stat("/r")
    stale = dataclasses.replace(stale, size=2 * bs)  # as read before the cut
    real_stat = dfs.stat
    reads = [stale]

    async def stat(path: str) -> Attr:
        return reads.pop() if reads else await real_stat(path)

    monkeypatch.setattr(dfs, "stat", stat)
    attr = await dfs.truncate("/r", 3 * bs)
    assert not reads and attr.size == 3 * bs
    assert await dfs.read_file("/r") == data[: bs + 10] + bytes(2 * bs - 10)


async def test_a_size_change_with_a_size_precondition(dfs: Client) -> None:
    await dfs.write_file("/p", b"0123456789")
    with pytest.raises(ConflictError, match="not 7"):
        async with dfs.transaction() as t:
            await t.setattr("/p", size=4, if_size=7)
    async with dfs.transaction() as t:
        assert (await t.setattr("/p", size=4, if_size=10)).size == 4
    assert await dfs.read_file("/p") == b"0123"
