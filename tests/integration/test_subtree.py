"""Subtree summaries and walks (namenode/subtree.py) on a real namenode: totals, the
walk's order and pages against a listing directory by directory, stability when the
tree changes between pages, permissions, and refusals."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from plasmafs.client import Client, FileKind
from plasmafs.client.transaction import CommittedReads
from plasmafs.core.attributes import TreeEntry
from plasmafs.core.errors import InvalidArgumentError, NotFoundError
from tests.support.accounts import TOKENS, UIDS
from tests.support.cluster import NamenodeProcess


@contextlib.asynccontextmanager
async def _user(address: str, name: str) -> AsyncIterator[Client]:
    client = Client(address, token=TOKENS[name])
    try:
        yield client
    finally:
        await client.close()


async def _build(fs: Client, root: str) -> None:
    """A small tree with a directory bigger than the pages below, nesting, an empty
    directory, a symbolic link, and names that sort around each other."""
    await fs.mkdir(root)
    for d in ("a", "a/deep", "a/deep/er", "b", "b-empty", "c"):
        await fs.mkdir(f"{root}/{d}")
    for k in range(12):
        await fs.write_file(f"{root}/b/f{k:02}", b"x" * k)
    await fs.write_file(f"{root}/a/deep/er/leaf", b"leaf")
    await fs.write_file(f"{root}/a/z", b"zz")
    await fs.write_file(f"{root}/top", b"top")
    await fs.symlink(f"{root}/link", "a/deep")


async def _listed(fs: Client, root: str, path: str = "") -> list[str]:
    """The walk's expected order, directory by directory through readdir."""
    found: list[str] = []
    async for e in fs.scandir(f"{root}/{path}" if path else root):
        relative = f"{path}/{e.name}" if path else e.name
        found.append(relative)
        if e.kind is FileKind.DIRECTORY:
            found += await _listed(fs, root, relative)
    return found


async def _walked(fs: Client, root: str, page: int = 0) -> list[TreeEntry]:
    return [e async for e in fs.walk(root, page=page)]


async def test_a_walk_lists_the_root_then_every_entry_depth_first(fs: Client) -> None:
    await _build(fs, "/w")
    expected = await _listed(fs, "/w")
    assert len(expected) == 22
    for page in (0, 1, 2, 3, 5, 13):
        walked = await _walked(fs, "/w", page)
        assert [e.path for e in walked] == ["", *expected], page
    walked = await _walked(fs, "/w")
    by_path = {e.path: e for e in walked}
    assert by_path[""].attr == await fs.stat("/w")
    assert by_path["b/f07"].attr == await fs.stat("/w/b/f07")
    assert by_path["b/f07"].name == "f07" and by_path["b/f07"].attr.size == 7
    assert by_path["link"].target == "a/deep" and by_path["link"].attr.kind is FileKind.SYMLINK
    assert by_path["a/deep/er"].attr.is_dir and by_path["a/deep/er"].target is None
    assert not any(e.unreadable for e in walked)


async def test_a_walk_of_a_file_or_a_link_and_of_nothing(fs: Client) -> None:
    await _build(fs, "/w")
    assert [(e.path, e.attr.size) for e in await _walked(fs, "/w/top")] == [("", 3)]
    through_link = await _walked(fs, "/w/link")
    assert [e.path for e in through_link] == ["", "er", "er/leaf"]
    assert through_link[0].attr.is_dir  # the link at the end is followed
    with pytest.raises(NotFoundError):
        await _walked(fs, "/w/nothing")
    with pytest.raises(NotFoundError):
        await fs.summarize("/nothing/here")


async def test_a_walk_from_a_directory_inode_is_the_walk_of_its_path(fs: Client) -> None:
    await _build(fs, "/w")
    by_path = await _walked(fs, "/w/a")
    ino = (await fs.stat("/w/a")).ino
    by_inode = [e async for e in fs.walk(ino)]
    assert by_inode == by_path and [e.path for e in by_inode][:2] == ["", "deep"]
    assert [e.path async for e in fs.walk(ino, depth=1)] == ["", "deep", "z"]
    top = (await fs.stat("/w/top")).ino
    assert [(e.path, e.attr.size) async for e in fs.walk(top)] == [("", 3)]
    await fs.rename("/w/a", "/w/moved")  # an inode names the directory wherever it is
    assert [e.path async for e in fs.walk(ino)] == [e.path for e in by_path]
    with pytest.raises(NotFoundError):
        await _walked_inode(fs, 10**12)
    with pytest.raises(InvalidArgumentError):
        await _walked_inode(fs, -1)


async def _walked_inode(fs: Client, ino: int) -> list[TreeEntry]:
    return [e async for e in fs.walk(ino)]


async def test_a_summary_counts_entries_bytes_and_space_with_replication(ifs: Client) -> None:
    await ifs.mkdir("/s")
    await ifs.mkdir("/s/d")
    await ifs.write_file("/s/small", b"s" * 100)  # inline: its size once
    await ifs.write_file("/s/d/big", b"b" * 10_000, replication=2)  # blocks: twice
    await ifs.write_file("/s/d/one", b"o" * 5_000, replication=1)
    await ifs.symlink("/s/d/l", "../small")
    total = await ifs.summarize("/s")
    assert (total.files, total.directories, total.symlinks) == (3, 2, 1)
    assert total.entries == 6 and total.unreadable == 0
    assert total.bytes == 15_100
    assert total.space == 100 + 20_000 + 5_000
    assert await ifs.summarize("/s/d/big") == type(total)(1, 0, 0, 10_000, 20_000)
    empty = await ifs.summarize("/s/d/l")  # a link at the end is followed: to a file
    assert (empty.files, empty.bytes) == (1, 100)


async def test_pages_stay_stable_when_the_tree_changes_between_them(fs: Client) -> None:
    await _build(fs, "/w")
    before = set(await _listed(fs, "/w"))
    reads = CommittedReads(await fs.connection())
    seen: list[str] = []
    entries, more = await reads.walk_page("/w", limit=4)  # the root and a, a/deep, ...
    seen += [e.path for e in entries]
    cursor = entries[-1].path
    assert cursor == "a/deep/er/leaf"
    # The cursor's directory goes away, an entry appears before the cursor and one after.
    await fs.unlink("/w/a/deep/er/leaf")
    await fs.rmdir("/w/a/deep/er")
    await fs.write_file("/w/a/0-new", b"")
    await fs.write_file("/w/b/zz-new", b"")
    while more:
        entries, more = await reads.walk_page("/w", after=cursor, limit=3)
        seen += [e.path for e in entries]
        if entries:
            cursor = entries[-1].path
    assert len(seen) == len(set(seen)), "an entry came twice"
    kept = before - {"a/deep/er", "a/deep/er/leaf"}
    assert kept <= set(seen), f"missing: {kept - set(seen)}"
    assert "b/zz-new" in seen and "a/0-new" not in seen  # after the cursor / before it


async def test_directories_a_user_may_not_read_are_listed_not_entered(
    fs: Client, namenode: NamenodeProcess
) -> None:
    await fs.mkdir("/home", 0o755)
    await fs.mkdir("/home/open", 0o755)
    await fs.mkdir("/home/closed", 0o700)
    await fs.mkdir("/home/closed/sub", 0o755)
    await fs.write_file("/home/closed/sub/secret", b"secret")
    await fs.write_file("/home/open/public", b"public!")
    await fs.chown("/home/closed", UIDS["alice"])
    async with _user(namenode.address, "bob") as bob:
        walked = {e.path: e for e in await _walked(bob, "/home")}
        assert sorted(walked) == ["", "closed", "open", "open/public"]
        assert walked["closed"].unreadable and not walked["open"].unreadable
        total = await bob.summarize("/home")
        assert (total.directories, total.files, total.bytes, total.unreadable) == (3, 1, 7, 1)
        alone = await _walked(bob, "/home/closed")
        assert [(e.path, e.unreadable) for e in alone] == [("", True)]
    async with _user(namenode.address, "alice") as alice:  # the owner enters
        assert len(await _walked(alice, "/home")) == 6
        assert (await alice.summarize("/home")).unreadable == 0
    assert (await fs.summarize("/home")).files == 2  # so does the superuser


@pytest.mark.parametrize("cursor", ["a//b", "/a", "a/", "x\0y", "n" * 256])
async def test_a_malformed_walk_cursor_is_refused(fs: Client, cursor: str) -> None:
    await fs.mkdir("/w")
    reads = CommittedReads(await fs.connection())
    with pytest.raises(InvalidArgumentError):
        await reads.walk_page("/w", after=cursor)


async def test_a_walk_to_a_depth_stops_there(fs: Client) -> None:
    await _build(fs, "/w")
    everything = await _listed(fs, "/w")
    for depth, page in ((1, 0), (1, 2), (2, 0), (2, 3), (3, 1)):
        walked = [e.path async for e in fs.walk("/w", page=page, depth=depth)]
        expected = [p for p in everything if p.count("/") < depth]
        assert walked == ["", *expected], (depth, page)
    listing = [e async for e in fs.walk("/w/b", depth=1)]
    assert [e.name for e in listing[1:]] == [f"f{k:02}" for k in range(12)]


# Names that sort around "/" (0x2f): "-" and "." before it, "0" and "~" after it, and
# directories whose names are prefixes of other names.
_KEY_TREE_DIRECTORIES = (
    "a", "a.d", "a.d/x", "a.d/x-y", "a-b", "b", "b/c", "b/c/d", "e", "é",
)  # fmt: skip
_KEY_TREE_FILES = (
    "a/1", "a.d/x/f", "a.d/x-y/g", "a.d-1", "a.e", "a0", "a-b/z", "a!", "b/c.txt",
    "b/c/d/leaf", "b/c0", "b.txt", "top", "é/ü", "~",
)  # fmt: skip


async def _build_key_tree(fs: Client, root: str) -> list[str]:
    """A tree whose key order differs from its name order at every level; its keys
    (a directory's ends with "/") in the order an object store lists them."""
    await fs.mkdir(root)
    for d in _KEY_TREE_DIRECTORIES:
        await fs.mkdir(f"{root}/{d}")
    for f in _KEY_TREE_FILES:
        await fs.write_file(f"{root}/{f}", f.encode())
    keys = [f"{d}/" for d in _KEY_TREE_DIRECTORIES] + list(_KEY_TREE_FILES)
    return sorted(keys, key=lambda k: k.encode("utf-8"))


def _key(entry: TreeEntry) -> str:
    return entry.path + "/" if entry.attr.is_dir else entry.path


async def test_a_walk_in_key_order_sorts_as_an_object_store_lists(fs: Client) -> None:
    expected = await _build_key_tree(fs, "/k")
    assert [e.path async for e in fs.walk("/k")] != ["", *(k.rstrip("/") for k in expected)]
    for page in (0, 1, 2, 3, 7):
        walked = [e async for e in fs.walk("/k", page=page, key_order=True)]
        assert walked[0].path == ""
        assert [_key(e) for e in walked[1:]] == expected, page


async def test_a_key_order_walk_resumes_after_any_key(fs: Client) -> None:
    """After every key, after strings between keys, and after keys that do not exist,
    the walk goes on with exactly the keys that sort after it."""
    expected = await _build_key_tree(fs, "/k")
    cursors = set(expected)
    for k in expected:
        stem = k.rstrip("/")
        cursors |= {stem, stem + "-", stem + ".", stem + "0", stem + "/zz", stem + "!"}
    cursors |= {"a.c", "b/c/d/", "b/c/d/leaf", "b/bb/", "nothing/here", "zzz", "\U0010ffff"}
    for cursor in sorted(cursors):
        for page in (0, 2):
            walked = [_key(e) async for e in fs.walk("/k", page=page, key_order=True, after=cursor)]
            later = [k for k in expected if k.encode("utf-8") > cursor.encode("utf-8")]
            assert walked == later, (cursor, page)


async def test_a_key_order_walk_one_level_deep_is_a_delimited_listing(fs: Client) -> None:
    expected = await _build_key_tree(fs, "/k")
    top = [k for k in expected if "/" not in k.rstrip("/")]
    walked = [_key(e) async for e in fs.walk("/k", depth=1, key_order=True)]
    assert walked[1:] == top
    for cursor in ("a", "a/", "a.d/", "a-b/", "b.txt"):
        walked = [_key(e) async for e in fs.walk("/k", depth=1, key_order=True, after=cursor)]
        assert walked == [k for k in top if k > cursor], cursor
