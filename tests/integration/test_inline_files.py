"""Small files whose content the namenode keeps in the inode (no blocks, no datanode):
written by the streaming writer and the editor, read by readers, moved to blocks when
they grow, cut by truncation, kept across a namenode restart, refused past the limit."""

from __future__ import annotations

import os

import pytest

from plasmafs.client import Client
from plasmafs.client.editing import FileEditor
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.core.errors import (
    AccessDeniedError,
    InvalidArgumentError,
    IsDirectoryError,
    NotFoundError,
    TransactionError,
)
from tests.conftest import DataCluster
from tests.support.accounts import TOKENS

BS = 64 * 1024
LIMIT = 4096  # the namenode's default inline_limit


async def _read(fs: Client, path: str) -> bytes:
    return await fs.read_file(path)


async def _edit(fs: Client, path: str) -> FileEditor:
    editor = await fs.open(path, "r+b")
    assert isinstance(editor, FileEditor)
    return editor


async def test_a_small_file_lives_in_the_namespace_and_a_larger_one_in_blocks(
    ifs: Client,
) -> None:
    conn = await ifs.connection()
    assert conn.inline_limit == LIMIT
    for size in (1, 700, LIMIT):
        data = os.urandom(size)
        await ifs.write_file(f"/s{size}", data)
        blocks = await ifs.blocks(f"/s{size}")
        assert blocks.inline == data and blocks.extents == () and blocks.size == size
        assert await _read(ifs, f"/s{size}") == data
    big = os.urandom(LIMIT + 1)
    await ifs.write_file("/big", big)
    blocks = await ifs.blocks("/big")
    assert blocks.inline is None and len(blocks.extents) == 1
    assert await _read(ifs, "/big") == big
    empty = await ifs.write_file("/empty", b"")
    assert empty.size == 0 and (await ifs.blocks("/empty")).inline is None


async def test_a_file_rewritten_small_releases_its_blocks_and_readers_keep_their_version(
    ifs: Client, inline_cluster: DataCluster
) -> None:
    await ifs.write_file("/f", os.urandom(3 * BS))
    used = (await ifs.fsstat()).used_bytes
    old_reader = await ifs.open("/f")
    assert isinstance(old_reader, FileReader)
    expected_old = await old_reader.pread(0, 3 * BS)
    await ifs.write_file("/f", b"small now")
    assert (await ifs.blocks("/f")).inline == b"small now"
    after = await ifs.fsstat()  # released, and held only for the open reader's tickets
    assert after.used_bytes == used and after.held_bytes == 3 * BS
    assert await old_reader.pread(0, 3 * BS) == expected_old  # its blocks are held
    small_reader = await ifs.open("/f")
    assert isinstance(small_reader, FileReader)
    await ifs.write_file("/f", b"second small version")
    assert await small_reader.read() == b"small now"  # the content came with its list
    assert await _read(ifs, "/f") == b"second small version"


async def test_edits_keep_a_small_file_inline_and_move_it_to_blocks_when_it_grows(
    ifs: Client,
) -> None:
    await ifs.write_file("/e", b"hello world")
    editor = await _edit(ifs, "/e")
    await editor.pwrite(6, b"there")
    await editor.pwrite(11, b", appended")
    await editor.commit()
    assert (await ifs.blocks("/e")).inline == b"hello there, appended"
    far = 3 * BS + 10  # past block 0: the inline bytes must move to block 0 too
    await editor.pwrite(far, b"tail")
    await editor.close()
    blocks = await ifs.blocks("/e")
    assert blocks.inline is None and blocks.extents[0].file_index == 0
    expected = b"hello there, appended".ljust(far, b"\0") + b"tail"
    assert await _read(ifs, "/e") == expected
    editor = await _edit(ifs, "/e")  # and back below the limit: inline again
    editor.truncate(5)
    await editor.close()
    blocks = await ifs.blocks("/e")
    assert blocks.inline == b"hello" and blocks.extents == ()


async def test_truncation_cuts_or_extends_an_inline_content(ifs: Client) -> None:
    await ifs.write_file("/t", b"0123456789")
    await ifs.setattr("/t", size=4)
    assert (await ifs.blocks("/t")).inline == b"0123"
    await ifs.setattr("/t", size=3 * BS)  # the rest reads as zeros, no block needed
    blocks = await ifs.blocks("/t")
    assert blocks.inline == b"0123" and blocks.extents == () and blocks.size == 3 * BS
    assert await _read(ifs, "/t") == b"0123" + bytes(3 * BS - 4)
    reader = await ifs.open("/t")
    assert isinstance(reader, FileReader)
    assert await reader.pread(2, 4) == b"23\0\0"
    assert await reader.pread(3 * BS - 2, 10) == b"\0\0"
    await ifs.setattr("/t", size=0)
    blocks = await ifs.blocks("/t")
    assert blocks.inline is None and blocks.size == 0


async def test_inline_content_survives_a_namenode_restart(
    ifs: Client, inline_cluster: DataCluster
) -> None:
    await ifs.write_file("/kept", b"durable small content")
    await ifs.close()
    inline_cluster.namenode.stop()
    inline_cluster.namenode.start()
    assert await _read(ifs, "/kept") == b"durable small content"


async def test_write_inline_refuses_what_it_cannot_keep(ifs: Client) -> None:
    attr = await ifs.write_file("/r", b"x")
    await ifs.mkdir("/d")
    async with ifs.transaction() as t:
        with pytest.raises(InvalidArgumentError, match="at most 4096"):
            t.write_inline(attr.ino, bytes(LIMIT + 1))
    conn = await ifs.connection()
    conn.inline_limit = 1 << 20  # a client that believes otherwise: the namenode refuses
    async with ifs.transaction() as t:
        with pytest.raises(InvalidArgumentError, match="at most 4096"):
            await t.write_inline(attr.ino, bytes(LIMIT + 1))
        with pytest.raises(IsDirectoryError):
            await t.write_inline((await t.stat("/d")).ino, b"no")
        with pytest.raises(NotFoundError):
            await t.write_inline(10**12, b"no")
    assert await _read(ifs, "/r") == b"x"


async def test_a_commit_unless_failed_commits_nothing_after_a_failed_operation(
    ifs: Client,
) -> None:
    await ifs.mkdir("/taken")
    t = await ifs.begin()
    made = t.mkdir("/new")
    clash = t.mkdir("/taken")
    committed = t.commit(unless_failed=True)
    await made
    with pytest.raises(Exception, match="exists"):
        await clash
    with pytest.raises(TransactionError, match="1 of its operations failed"):
        await committed
    with pytest.raises(NotFoundError):
        await ifs.stat("/new")


async def test_a_namenode_with_no_inline_limit_keeps_every_content_in_blocks(
    dfs: Client,  # the data cluster's namenode runs with inline_limit = 0
) -> None:
    assert (await dfs.connection()).inline_limit == 0
    await dfs.write_file("/small", b"in blocks")
    blocks = await dfs.blocks("/small")
    assert blocks.inline is None and len(blocks.extents) == 1
    assert await dfs.read_file("/small") == b"in blocks"


async def test_a_writer_opened_without_waiting_raises_a_refusal_at_close_and_changes_nothing(
    ifs: Client, inline_cluster: DataCluster
) -> None:
    attr = await ifs.write_file("/roots", b"root's content")  # 0644, owned by root
    async with Client(inline_cluster.namenode.address, token=TOKENS["alice"]) as alice:
        writer = await alice.open(attr.ino, "wb", known=attr)  # returns at once
        assert isinstance(writer, FileWriter)
        await writer.write(b"mine now")
        with pytest.raises(AccessDeniedError):
            await writer.close()
        big = await alice.open(attr.ino, "wb", known=attr)
        assert isinstance(big, FileWriter)
        with pytest.raises(AccessDeniedError):  # the first allocation awaits the refusal
            await big.write(bytes(2 * BS))
    assert await _read(ifs, "/roots") == b"root's content"
    writer = await ifs.open(attr.ino, "wb", known=attr)
    assert isinstance(writer, FileWriter)
    await writer.write(b"root's new content")
    assert (await writer.close()).size == len(b"root's new content")
    assert (await ifs.blocks("/roots")).inline == b"root's new content"
