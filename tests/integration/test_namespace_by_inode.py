"""Namespace operations on a name in a directory given by inode number (`At`), as the
mount makes them, against a real namenode: the same rules as by path, no path walk,
and unaffected by renames of the directories above."""

from __future__ import annotations

import pytest

from plasmafs.client import (
    At,
    Client,
    ExistsError,
    FileKind,
    InvalidArgumentError,
    IsDirectoryError,
    NameTooLongError,
    NotDirectoryError,
    NotEmptyError,
    NotFoundError,
)
from plasmafs.core.errors import AccessDeniedError
from plasmafs.core.proto import namenode_pb2 as pb


async def test_every_change_by_directory_inode_matches_the_path_view(fs: Client) -> None:
    top = await fs.mkdir("/top")
    sub = await fs.mkdir(At(top.ino, "sub"), 0o750)
    assert (await fs.lookup("/top/sub")).ino == sub.ino
    assert (await fs.lookup("/top/sub")).mode == 0o750
    f = await fs.create(At(sub.ino, "f"), 0o600, replication=1)
    link = await fs.symlink(At(sub.ino, "l"), "f")
    assert (await fs.lookup(At(sub.ino, "f"))).ino == f.ino
    assert (await fs.lookup(At(sub.ino, "l"))).kind is FileKind.SYMLINK  # never followed
    assert await fs.readlink(link.ino) == "f"
    assert await fs.readlink("/top/sub/l") == "f"
    await fs.rename(At(sub.ino, "f"), At(top.ino, "g"))
    assert (await fs.stat("/top/g")).ino == f.ino
    await fs.rename("/top/g", At(sub.ino, "f"))
    await fs.unlink(At(sub.ino, "l"))
    with pytest.raises(NotFoundError):
        await fs.lookup("/top/sub/l")
    await fs.unlink(At(sub.ino, "f"))
    await fs.rmdir(At(top.ino, "sub"))
    assert await fs.listdir("/top") == []


async def test_a_directory_listing_by_inode_pages_with_attributes(fs: Client) -> None:
    d = await fs.mkdir("/d")
    for k in range(7):
        await fs.create(f"/d/f{k}")
    page, more = await fs.readdir(d.ino, limit=3, plus=True)
    assert [e.name for e in page] == ["f0", "f1", "f2"] and more
    assert all(e.attr is not None and e.attr.ino == e.ino for e in page)
    names = [e.name async for e in fs.scandir(d.ino, page=2)]
    assert names == [f"f{k}" for k in range(7)]
    f0 = await fs.lookup("/d/f0")
    with pytest.raises(NotDirectoryError):
        await fs.readdir(f0.ino)
    with pytest.raises(NotFoundError):
        await fs.readdir(2**40)


async def test_operations_by_inode_survive_renames_above(fs: Client) -> None:
    await fs.mkdir("/a/b", parents=True)
    b = await fs.lookup("/a/b")
    await fs.rename("/a", "/z")  # the mount still holds b's inode
    await fs.create(At(b.ino, "f"))
    assert (await fs.lookup("/z/b/f")).kind is FileKind.FILE
    assert [e.name async for e in fs.scandir(b.ino)] == ["f"]


async def test_the_path_rules_hold_by_inode(fs: Client) -> None:
    d = await fs.mkdir("/d")
    f = await fs.create("/d/f")
    await fs.mkdir("/d/full")
    await fs.create("/d/full/x")
    with pytest.raises(ExistsError):
        await fs.create(At(d.ino, "f"))
    with pytest.raises(NotDirectoryError):
        await fs.create(At(f.ino, "x"))
    with pytest.raises(NotFoundError):
        await fs.lookup(At(d.ino, "missing"))
    with pytest.raises(NotFoundError):
        await fs.create(At(2**40, "x"))
    with pytest.raises(IsDirectoryError):
        await fs.unlink(At(d.ino, "full"))
    with pytest.raises(NotDirectoryError):
        await fs.rmdir(At(d.ino, "f"))
    with pytest.raises(NotEmptyError):
        await fs.rmdir(At(d.ino, "full"))
    full = await fs.lookup("/d/full")
    with pytest.raises(InvalidArgumentError, match="own subtree"):
        await fs.rename(At(d.ino, "full"), At(full.ino, "inside"))
    with pytest.raises(ExistsError):
        await fs.rename(At(d.ino, "f"), At(d.ino, "full"), replace=False)


async def test_a_bad_name_or_directory_is_invalid(fs: Client) -> None:
    d = await fs.mkdir("/d")
    for name in ("", ".", "..", "a/b", "x\0y"):
        with pytest.raises(InvalidArgumentError):
            await fs.create(At(d.ino, name))
    with pytest.raises(NameTooLongError):
        await fs.create(At(d.ino, "n" * 256))
    for bad in (0, -1, 2**64):
        with pytest.raises(InvalidArgumentError):
            await fs.lookup(At(bad, "x"))
    with pytest.raises(InvalidArgumentError):
        await fs.lookup(At(d.ino, "x"), follow=True)


async def test_the_wire_refuses_a_path_with_an_inode_and_bad_names(fs: Client) -> None:
    d = await fs.mkdir("/d")
    conn = await fs.connection()
    for fill in (
        lambda q: (setattr(q.readdir, "path", b"/d"), setattr(q.readdir, "dir", d.ino)),
        lambda q: (setattr(q.readlink, "path", b"/d"), setattr(q.readlink, "ino", d.ino)),
        lambda q: (setattr(q.lookup, "path", b"/d/x"), setattr(q.lookup, "dir", d.ino)),
        lambda q: (setattr(q.lookup, "path", b".."), setattr(q.lookup, "dir", d.ino)),
        lambda q: (setattr(q.lookup, "path", b"\xff"), setattr(q.lookup, "dir", d.ino)),
        lambda q: (
            setattr(q.lookup, "path", b"x"),
            setattr(q.lookup, "dir", d.ino),
            setattr(q.lookup, "follow", True),
        ),
    ):
        request, future = conn.new_request()
        fill(request)
        response: pb.Response = await future
        assert response.error.code == pb.EINVAL, response


async def test_permissions_by_inode_are_those_by_path(fs: Client, alice: Client) -> None:
    closed = await fs.mkdir("/closed", 0o700)
    inner = await fs.mkdir("/closed/inner", 0o777)
    await fs.create("/closed/inner/f")
    noexec = await fs.mkdir("/noexec", 0o766)  # alice may read and write, not search
    await fs.create("/noexec/f")
    mine = await fs.mkdir("/ro", 0o755)
    # Search on every directory above the one named, as on a path.
    for attempt in (
        lambda: alice.lookup(At(inner.ino, "f")),
        lambda: alice.create(At(inner.ino, "g")),
        lambda: alice.readdir(inner.ino),
        lambda: alice.readdir(closed.ino),
    ):
        with pytest.raises(AccessDeniedError):
            await attempt()
    # Search on the directory itself before its names are looked at: no EEXIST leak.
    for attempt in (
        lambda: alice.lookup(At(noexec.ino, "f")),
        lambda: alice.create(At(noexec.ino, "f")),
        lambda: alice.unlink(At(noexec.ino, "f")),
    ):
        with pytest.raises(AccessDeniedError):
            await attempt()
    assert [e.name for e in (await alice.readdir(noexec.ino))[0]] == ["f"]  # R alone lists
    with pytest.raises(AccessDeniedError):  # W on the parent
        await alice.mkdir(At(mine.ino, "x"))
