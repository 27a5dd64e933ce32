"""Changing files in place through the library (`open(..., "r+b")`, `FileEditor`)
against real datanodes: writes anywhere, holes, truncation, version isolation for
readers, abort, permissions and the mtime."""

from __future__ import annotations

import asyncio
import os

import pytest

from plasmafs.client import Client
from plasmafs.client.editing import FileEditor
from plasmafs.client.file_reader import FileReader
from plasmafs.core.errors import AccessDeniedError, InvalidArgumentError, IsDirectoryError
from tests.conftest import DataCluster
from tests.support.accounts import TOKENS

BS = 64 * 1024


async def _edit(fs: Client, target: str | int) -> FileEditor:
    editor = await fs.open(target, "r+b")
    assert isinstance(editor, FileEditor)
    return editor


async def _reader(fs: Client, path: str) -> FileReader:
    reader = await fs.open(path)
    assert isinstance(reader, FileReader)
    return reader


async def test_writes_anywhere_replace_only_the_touched_blocks(dfs: Client) -> None:
    original = os.urandom(4 * BS + 123)
    await dfs.write_file("/f", original)
    before = (await dfs.blocks("/f")).extents
    editor = await _edit(dfs, "/f")
    expected = bytearray(original)
    for offset, data in ((7, b"head"), (2 * BS - 3, b"straddles"), (4 * BS + 120, b"tail+")):
        await editor.pwrite(offset, data)
        expected[offset : offset + len(data)] = data
    expected += bytes(max(0, 4 * BS + 125 - len(expected)))
    assert await editor.pread(0, len(expected) + 100) == bytes(expected)
    old_reader = await _reader(dfs, "/f")
    await editor.close()
    assert await dfs.read_file("/f") == bytes(expected)
    # A reader that opened before reads its version to the end.
    assert await old_reader.read() == original
    await old_reader.close()
    after = (await dfs.blocks("/f")).extents
    untouched = {e.file_index for e in before} & {e.file_index for e in after}
    assert len(after) > len(before) and untouched  # the third block kept its place


async def test_reads_and_checks_during_a_commit_see_the_file_as_it_is(dfs: Client) -> None:
    """While a commit opens the version it made, the editor still answers reads (the
    content with the changes) and `dirty`: a mount asks both at any moment."""
    original = os.urandom(6 * BS)
    await dfs.write_file("/f", original)
    editor = await _edit(dfs, "/f")
    expected = bytearray(original)
    for round_ in range(5):
        change = os.urandom(BS // 2)
        at = round_ * BS + 100
        await editor.pwrite(at, change)
        expected[at : at + len(change)] = change
        expected += b"+"  # the size changes too
        await editor.pwrite(len(expected) - 1, b"+")
        commit = asyncio.ensure_future(editor.commit())
        looks = 0
        while not commit.done():
            editor.dirty  # noqa: B018 - asked for its side effects: it used to fail here
            assert await editor.pread(0, len(expected) + 10) == bytes(expected)
            looks += 1
        await commit
        assert looks > 1 and not editor.dirty
        assert await editor.pread(0, len(expected)) == bytes(expected)
    await editor.close()
    assert await dfs.read_file("/f") == bytes(expected)


async def test_holes_appends_and_truncation(dfs: Client) -> None:
    await dfs.write_file("/f", b"0123456789")
    editor = await _edit(dfs, "/f")
    await editor.pwrite(3 * BS, b"far")  # past the end: a hole
    editor.truncate(5)  # and cut again, below the committed size
    await editor.pwrite(8, b"!")
    await editor.commit()
    assert await dfs.read_file("/f") == b"01234" + bytes(3) + b"!"
    await editor.pwrite(9, b" appended")
    editor.truncate(12)
    await editor.close()
    assert await dfs.read_file("/f") == b"01234" + bytes(3) + b"! ap"
    editor = await _edit(dfs, "/f")
    editor.truncate(2 * BS + 1)  # growing by truncate reads zeros
    await editor.close()
    assert await dfs.read_file("/f") == b"01234" + bytes(3) + b"! ap" + bytes(2 * BS + 1 - 12)


async def test_an_aborted_edit_changes_nothing(dfs: Client) -> None:
    await dfs.write_file("/f", b"keep me")
    editor = await _edit(dfs, "/f")
    await editor.pwrite(0, b"XXXX")
    editor.truncate(2)
    await editor.abort()
    assert await dfs.read_file("/f") == b"keep me"


async def test_the_mtime_follows_the_content_unless_set(dfs: Client) -> None:
    await dfs.write_file("/f", b"x")
    first = (await dfs.stat("/f")).mtime_ns
    editor = await _edit(dfs, "/f")
    await editor.pwrite(1, b"y")
    await editor.commit()
    assert (await dfs.stat("/f")).mtime_ns > first
    await editor.pwrite(2, b"z")
    editor.set_mtime(12345)
    await editor.close()
    assert (await dfs.stat("/f")).mtime_ns == 12345


async def test_what_cannot_be_edited_is_refused(dfs: Client, data_cluster: DataCluster) -> None:
    await dfs.mkdir("/d")
    await dfs.write_file("/roots", b"root's file")
    with pytest.raises(IsDirectoryError):
        await _edit(dfs, "/d")
    editor = await _edit(dfs, "/roots")
    with pytest.raises(InvalidArgumentError):
        await editor.pwrite(-1, b"x")
    with pytest.raises(InvalidArgumentError):
        editor.truncate(-5)
    await editor.abort()
    async with Client(data_cluster.namenode.address, token=TOKENS["alice"]) as alice:
        theirs = await _edit(alice, "/roots")  # 0644: readable, so it opens
        await theirs.pwrite(0, b"mine now")
        with pytest.raises(AccessDeniedError):  # no write permission: nothing changes
            await theirs.commit()
        await theirs.abort()
    assert await dfs.read_file("/roots") == b"root's file"
