"""Copies inside the cluster (client/copying.py) through real datanodes: contents in
blocks stream from the source's replicas into new files, with progress, and trees are
rebuilt from one walk."""

from __future__ import annotations

import os

import pytest

from plasmafs.client import Client
from plasmafs.client.copying import copy_file, copy_tree
from plasmafs.core.errors import InvalidArgumentError, IsDirectoryError


async def test_a_file_in_blocks_is_copied_with_its_replication(dfs: Client) -> None:
    data = os.urandom(3 * 1024 * 1024 + 77)
    await dfs.write_file("/big", data, replication=2)
    moved: list[int] = []
    attr = await copy_file(dfs, "/big", "/big-copy", progress=moved.append)
    assert attr.size == len(data) and attr.replication == 2
    assert sum(moved) == len(data)
    assert await dfs.read_file("/big-copy") == data
    assert (await dfs.stat("/big-copy")).ino != (await dfs.stat("/big")).ino
    await copy_file(dfs, "/big", "/big-copy", replication=1)  # replaces the copy
    assert (await dfs.stat("/big-copy")).replication == 1
    assert await dfs.read_file("/big-copy") == data


async def test_a_tree_is_copied_several_files_at_a_time(dfs: Client) -> None:
    contents = {f"/src/d{k % 3}/f{k}": os.urandom(200_000 + k) for k in range(20)}
    for d in ("/src", "/src/d0", "/src/d1", "/src/d2", "/src/empty"):
        await dfs.mkdir(d)
    for path, data in contents.items():
        await dfs.write_file(path, data, replication=1)
    await dfs.symlink("/src/d0/up", "..")
    assert await copy_tree(dfs, "/src", "/dst") == []
    for path, data in contents.items():
        assert await dfs.read_file(path.replace("/src", "/dst", 1)) == data
    assert await dfs.readlink("/dst/d0/up") == ".."
    assert sorted(await dfs.listdir("/dst")) == ["d0", "d1", "d2", "empty"]


async def test_copies_onto_themselves_or_of_directories_are_refused(dfs: Client) -> None:
    await dfs.mkdir("/a")
    await dfs.write_file("/a/f", b"keep me")
    with pytest.raises(InvalidArgumentError):
        await copy_file(dfs, "/a/f", "/a/f")
    await dfs.symlink("/a/link", "f")
    with pytest.raises(InvalidArgumentError):
        await copy_file(dfs, "/a/f", "/a/link")  # the same file through a link
    assert await dfs.read_file("/a/f") == b"keep me"
    with pytest.raises(IsDirectoryError):
        await copy_file(dfs, "/a", "/b")
    with pytest.raises(InvalidArgumentError):
        await copy_tree(dfs, "/a", "/a/inside")
    with pytest.raises(InvalidArgumentError):
        await copy_tree(dfs, "/a", "/a")
