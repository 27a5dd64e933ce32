"""The mount's read-ahead of subtrees (mount/readahead.py) against a real cluster: a
recursive listing takes a walk instead of a request per directory and shows exactly
the namespace; the mount's own changes are seen at once, another client's once the
mount's cache lifetime has passed; lifetimes of 0 turn it off."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client, SyncClient
from plasmafs.core.attributes import FileKind
from tests.conftest import DataCluster
from tests.support.mounts import Mount, mounted

LIFETIME = 0.5  # seconds the kernel, and so the read-ahead, may keep what it was told


@pytest.fixture
def mount(inline_cluster: DataCluster, tmp_path: Path) -> Iterator[Mount]:
    """The cluster mounted with short cache lifetimes, so that tests can outwait them."""
    options = (f"attr_timeout={LIFETIME}", f"entry_timeout={LIFETIME}")
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt", *options) as m:
        yield m


def _build(address: str, root: str, tops: int = 6, subs: int = 5, files: int = 4) -> None:
    """A two-level tree with small files at the second level and a link at the top."""
    with SyncClient(address) as fs:
        fs.mkdir(root)
        for t in range(tops):
            fs.mkdir(f"{root}/top{t}")
            for s in range(subs):
                fs.mkdir(f"{root}/top{t}/sub{s}")
                for f in range(files):
                    fs.write_file(f"{root}/top{t}/sub{s}/f{f}", b"x" * (t * 100 + s * 10 + f))
        fs.symlink(f"{root}/link", "top0/sub0")


def _namespace(address: str, root: str) -> dict[str, tuple[int, int, int]]:
    """(kind bits, size, inode) of every entry below `root`, from one library walk."""
    with SyncClient(address) as fs:
        entries = [e for e in fs.walk(root) if e.path]
    return {e.path: (e.attr.st_mode & 0o170000, e.attr.size, e.attr.ino) for e in entries}


def _on_mount(top: Path) -> dict[str, tuple[int, int, int]]:
    """The same, as ordinary system calls see it on the mount."""
    seen = {}
    for directory, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(directory) / name
            st = path.lstat()
            seen[str(path.relative_to(top))] = (st.st_mode & 0o170000, st.st_size, st.st_ino)
    return seen


def _requests(address: str) -> dict[str, int]:
    async def counts() -> dict[str, int]:
        async with Client(address) as fs:
            return await fs.request_counts()

    return asyncio.run(counts())


def _grew(before: dict[str, int], after: dict[str, int], op: str) -> int:
    return after.get(op, 0) - before.get(op, 0)


def test_a_recursive_listing_takes_one_walk_and_shows_the_namespace(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    _build(address, "/t")
    before = _requests(address)
    listed = subprocess.run(
        ["ls", "-lR", str(mount.path / "t")], check=True, capture_output=True, text=True
    ).stdout
    after = _requests(address)
    assert listed.count("total ") == 1 + 6 + 6 * 5  # every directory was listed
    assert _grew(before, after, "walk") >= 1
    # /t and its first directory are listed directly; every other comes from the walk
    assert _grew(before, after, "readdir") <= 3, after
    assert _grew(before, after, "lookup") + _grew(before, after, "getattr") <= 5
    assert _on_mount(mount.path / "t") == _namespace(address, "/t")


def test_the_mounts_own_changes_are_seen_at_once_after_a_read_ahead(mount: Mount) -> None:
    top = mount.path / "t"
    top.mkdir()
    for t in range(3):
        for s in range(3):
            (top / f"top{t}" / f"sub{s}").mkdir(parents=True)
            (top / f"top{t}" / f"sub{s}" / "f").write_bytes(b"before")
    time.sleep(LIFETIME)
    assert len(_on_mount(top)) == 3 + 9 + 9  # read ahead now
    (top / "top1" / "sub1" / "new").write_bytes(b"new file")
    (top / "top2" / "sub2" / "f").unlink()
    (top / "top0" / "sub0" / "f").write_bytes(b"rewritten, longer")
    (top / "top2" / "sub0").rename(top / "top1" / "moved")
    (top / "top0" / "made").mkdir()
    assert sorted(os.listdir(top / "top1" / "sub1")) == ["f", "new"]
    assert os.listdir(top / "top2" / "sub2") == []
    assert (top / "top0" / "sub0" / "f").stat().st_size == len(b"rewritten, longer")
    assert sorted(os.listdir(top / "top1")) == ["moved", "sub0", "sub1", "sub2"]
    assert sorted(os.listdir(top / "top2")) == ["sub1", "sub2"]
    assert sorted(os.listdir(top / "top0")) == ["made", "sub0", "sub1", "sub2"]
    assert (top / "top1" / "moved" / "f").read_bytes() == b"before"


def test_another_clients_changes_are_seen_once_the_lifetime_has_passed(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    _build(address, "/t", tops=3, subs=3, files=2)
    top = mount.path / "t"
    _on_mount(top)  # read ahead
    with SyncClient(address) as fs:
        fs.write_file("/t/top1/sub2/from-library", b"library")
        fs.unlink("/t/top2/sub0/f0")
        fs.write_file("/t/top0/sub0/f1", b"a longer content than before")
    time.sleep(LIFETIME * 1.5)
    assert sorted(os.listdir(top / "top1" / "sub2")) == ["f0", "f1", "from-library"]
    assert os.listdir(top / "top2" / "sub0") == ["f1"]
    assert (top / "top0" / "sub0" / "f1").stat().st_size == len(b"a longer content than before")
    assert _on_mount(top) == _namespace(address, "/t")


def test_lifetimes_of_zero_turn_read_ahead_off(inline_cluster: DataCluster, tmp_path: Path) -> None:
    address = inline_cluster.namenode.address
    _build(address, "/t", tops=3, subs=2, files=1)
    options = ("attr_timeout=0", "entry_timeout=0")
    with mounted(address, tmp_path / "mnt", *options) as m:
        before = _requests(address)
        seen = _on_mount(m.path / "t")
        after = _requests(address)
    assert seen == _namespace(address, "/t")
    assert _grew(before, after, "walk") == 0
    assert _grew(before, after, "readdir") >= 1 + 3 + 6


def test_what_a_walk_read_ahead_answers_is_whole(mount: Mount, inline_cluster: DataCluster) -> None:
    """Extended attributes and device numbers come with a walk: a getxattr or stat
    answered from what the walk read sees them as the namenode has them."""
    address = inline_cluster.namenode.address
    _build(address, "/t", tops=2, subs=2, files=2)
    tty = os.makedev(4, 2)
    with SyncClient(address) as fs:
        fs.setxattr("/t/top1/sub1/f1", "user.color", b"blue")
        fs.mknod("/t/top1/sub1/tty", FileKind.CHAR_DEVICE, 0o600, tty)
        walked = {e.path: e.attr for e in fs.walk("/t")}
    assert walked["top1/sub1/f1"].has_xattrs and not walked["top1/sub1/f0"].has_xattrs
    assert walked["top1/sub1/tty"].rdev == tty
    for _ in range(3):  # each round within the lifetime of what was read ahead
        time.sleep(LIFETIME * 1.5)
        before = _requests(address)
        subprocess.run(["ls", "-lR", str(mount.path / "t")], check=True, capture_output=True)
        sub = mount.path / "t" / "top1" / "sub1"
        assert os.getxattr(sub / "f1", "user.color") == b"blue"
        assert os.listxattr(sub / "f1") == ["user.color"]
        assert os.lstat(sub / "tty").st_rdev == tty
        assert _grew(before, _requests(address), "walk") >= 1


def test_ls_l_of_a_directory_asks_the_namenode_only_for_files_with_attributes(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    """`ls -l` asks each file for an extended attribute: answered from the attributes
    the listing gave the kernel (one directory: no walk), except for the file that
    has some."""
    address = inline_cluster.namenode.address
    with SyncClient(address) as fs:
        fs.mkdir("/d")
        for k in range(40):
            fs.write_file(f"/d/f{k}", b"x")
        fs.setxattr("/d/f7", "user.color", b"blue")
    before = _requests(address)
    listed = subprocess.run(["ls", "-l", str(mount.path / "d")], capture_output=True, text=True)
    after = _requests(address)
    assert listed.returncode == 0 and listed.stdout.count(" f") == 40, listed
    assert _grew(before, after, "walk") == 0
    assert _grew(before, after, "getxattr") <= 1, after
    assert os.getxattr(mount.path / "d" / "f7", "user.color") == b"blue"
    os.setxattr(mount.path / "d" / "f8", "user.new", b"made here")  # seen at once
    assert os.getxattr(mount.path / "d" / "f8", "user.new") == b"made here"
    assert os.listxattr(mount.path / "d" / "f8") == ["user.new"]
