"""Write-behind in directories the mount leases (mount/writebehind.py), against a real
cluster: small files cost no namenode round trip each; another client (the library or
a second mount) that looks sees everything the mount did; fsync makes it durable; a
killed mount loses at most what it had not sent, never part of a file; a namenode
restart hands the directories back to the namenode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtests.tree_shapes import tree_build
from plasmafs.client import SyncClient
from plasmafs.mount.writebehind import RESERVE_BATCH
from tests.conftest import DataCluster
from tests.support.cluster import namenode_requests
from tests.support.mounts import Mount, mounted, unmount


@pytest.fixture
def mount(inline_cluster: DataCluster, tmp_path: Path) -> Iterator[Mount]:
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt") as m:
        yield m


def _content(k: int) -> bytes:
    return f"file {k}\n".encode() * (k % 7 + 1)


def test_small_files_go_to_the_namenode_in_batches(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    (mount.path / "d").mkdir()
    before = namenode_requests(address)
    for k in range(300):
        (mount.path / "d" / f"f{k}").write_bytes(_content(k))
    for k in range(0, 300, 3):
        (mount.path / "d" / f"f{k}").unlink()
    (mount.path / "d" / "sub").mkdir()
    (mount.path / "d" / "sub" / "deep").write_bytes(b"deep")
    made = namenode_requests(address)
    assert made.get("lookup", 0) - before.get("lookup", 0) == 0
    assert made.get("commit", 0) - before.get("commit", 0) < 30  # not one per file
    # The library waits for the mount to send it all, and sees every file whole.
    with SyncClient(address) as fs:
        names = sorted(e.name for e in fs.scandir("/d"))
        kept = sorted(f"f{k}" for k in range(300) if k % 3)
        assert names == sorted([*kept, "sub"])
        for name in kept:
            assert fs.read_file(f"/d/{name}") == _content(int(name[1:]))
        assert fs.read_file("/d/sub/deep") == b"deep"
        # Given back: the library's changes are the mount's to see.
        fs.write_file("/d/from-library", b"library")
        fs.unlink("/d/f1")
    assert (mount.path / "d" / "from-library").read_bytes() == b"library"
    assert not (mount.path / "d" / "f1").exists()
    (mount.path / "d" / "after").write_bytes(b"after the recall")
    with SyncClient(address) as fs:
        assert fs.read_file("/d/after") == b"after the recall"


def test_truncating_a_new_small_file_keeps_it_in_memory(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    (mount.path / "d").mkdir()
    before = namenode_requests(address)
    for k in range(100):  # as dd does: open, ftruncate to 0, write; then cut and extend
        fd = os.open(mount.path / "d" / f"f{k}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.ftruncate(fd, 0)
        os.write(fd, _content(k))
        os.ftruncate(fd, 3)
        os.ftruncate(fd, 5)
        os.close(fd)
    made = namenode_requests(address)
    assert made.get("commit", 0) - before.get("commit", 0) < 10  # not one per file
    assert made.get("setattr", 0) == before.get("setattr", 0)
    # Beyond what a file keeps in memory: the file goes to the namenode, whole.
    limit = 4096  # the namenode's default inline limit
    fd = os.open(mount.path / "d" / "big", os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"x" * 10)
    os.ftruncate(fd, limit + 1)
    os.close(fd)
    with SyncClient(address) as fs:
        for k in range(100):
            assert fs.read_file(f"/d/f{k}") == _content(k)[:3] + bytes(2)
        assert fs.read_file("/d/big") == b"x" * 10 + bytes(limit + 1 - 10)


def test_a_new_big_file_is_written_without_a_truncation(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    (mount.path / "d").mkdir()
    data = os.urandom(200_000)
    before = namenode_requests(address)
    for k in range(10):
        (mount.path / "d" / f"big{k}").write_bytes(data)
    made = namenode_requests(address)
    assert made.get("setattr", 0) - before.get("setattr", 0) == 10  # the size, at close
    # Small content queued first (fsync), then more than the inline limit: the file
    # that goes to the datanodes replaces the inline content, which is not kept.
    with open(mount.path / "d" / "grown", "wb") as f:
        f.write(b"small")
        f.flush()
        os.fsync(f.fileno())
        f.write(data)
    with SyncClient(address) as fs:
        for k in range(10):
            assert fs.read_file(f"/d/big{k}") == data
        assert fs.read_file("/d/grown") == b"small" + data


def test_a_new_file_beyond_the_inline_limit_is_created_with_its_content(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    (mount.path / "d").mkdir()
    with open(mount.path / "d" / "first", "wb") as first:
        first.write(b"the directory is on the namenode")
    # fsync of the directory sends the queue, the close's change of `first` included
    # (else the timer may send it during the loop below): what follows is each
    # file's own commit.
    directory = os.open(mount.path / "d", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    data = os.urandom(300_000)
    before = namenode_requests(address)
    for k in range(10):
        (mount.path / "d" / f"f{k}").write_bytes(data)
    made = namenode_requests(address)
    assert made.get("commit", 0) - before.get("commit", 0) == 10  # not two per file
    # A program's times stay with content kept in memory (cp -p sets them before close).
    stamp = 1_600_000_000_123_456_789
    with open(mount.path / "d" / "dated", "wb") as f:
        f.write(data)
        os.utime(f.fileno(), ns=(stamp, stamp))
        # Another open on this host meanwhile sees what was written.
        assert (mount.path / "d" / "dated").read_bytes() == data
    with SyncClient(address) as fs:
        for k in range(10):
            assert fs.read_file(f"/d/f{k}") == data
        assert fs.read_file("/d/dated") == data
        assert fs.stat("/d/dated").mtime_ns == stamp


def test_a_change_through_the_namenode_waits_for_a_send_under_way(mount: Mount) -> None:
    # The queue goes out every 0.1 s in a transaction of a few milliseconds; a chmod
    # right after a close must wait for the one under way that creates the file.
    (mount.path / "d").mkdir()
    for k in range(400):
        path = mount.path / "d" / f"f{k}"
        path.write_bytes(_content(k))
        os.chmod(path, 0o640)
        os.utime(path, ns=(10**18 + k, 10**18 + k))
    for k in range(400):
        st = os.stat(mount.path / "d" / f"f{k}")
        assert st.st_mode & 0o777 == 0o640 and st.st_mtime_ns == 10**18 + k


def test_a_second_mount_sees_the_tree_the_first_one_built(
    mount: Mount, inline_cluster: DataCluster, tmp_path: Path
) -> None:
    tree = mount.path / "tree"
    for t in range(3):
        for k in range(20):
            (tree / f"top{t}").mkdir(parents=True, exist_ok=True)
            (tree / f"top{t}" / f"f{k}").write_bytes(_content(k))
    big = os.urandom(300_000)  # past the inline limit: streamed to the datanodes
    (tree / "top0" / "big").write_bytes(big)
    with mounted(inline_cluster.namenode.address, tmp_path / "second") as other:
        seen = {
            str(Path(d).relative_to(other.path) / f): (Path(d) / f).read_bytes()
            for d, _, files in os.walk(other.path / "tree")
            for f in files
        }
        assert len(seen) == 61 and seen["tree/top0/big"] == big
        assert seen["tree/top2/f5"] == _content(5)
        (other.path / "tree" / "top1" / "from-second").write_bytes(b"second")
        assert (tree / "top1" / "from-second").read_bytes() == b"second"
    subprocess_free_rm(tree)
    with SyncClient(inline_cluster.namenode.address) as fs:
        assert list(fs.scandir("/")) == []


@pytest.mark.slow
def test_rm_rf_of_a_30000_entry_tree_leaves_nothing(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    tree_build(mount.path, 1870, 28600)  # the mount benchmark's tree, under /tree
    walked = [(d, f) for _, d, f in os.walk(mount.path / "tree")]
    assert sum(len(d) for d, _ in walked) == 1870 and sum(len(f) for _, f in walked) == 28600
    removed = subprocess.run(["rm", "-rf", str(mount.path / "tree")], capture_output=True)
    assert removed.returncode == 0, removed.stderr
    assert os.listdir(mount.path) == []
    with SyncClient(inline_cluster.namenode.address) as fs:  # the namenode has it all
        assert list(fs.scandir("/")) == []
        left = fs.summarize("/")
        assert (left.files, left.directories, left.bytes) == (0, 1, 0)


def test_creators_at_once_share_each_reservation_of_inode_numbers(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    # Each create that found the pool empty used to reserve a batch for itself and
    # drop the others': the session kept the dropped numbers, and after ~100,000
    # creates its reservations were refused (EBUSY on every create).
    address = inline_cluster.namenode.address
    before = namenode_requests(address).get("reserve_inodes", 0)
    processes, each = 8, 700
    code = (
        "import os, sys\n"
        "d = sys.argv[1]; os.mkdir(d)\n"
        f"for i in range({each}):\n"
        "    os.close(os.open(f'{d}/e{i}', os.O_CREAT | os.O_EXCL | os.O_WRONLY))\n"
    )
    creators = [
        subprocess.Popen([sys.executable, "-c", code, str(mount.path / f"d{k}")])
        for k in range(processes)
    ]
    assert [c.wait() for c in creators] == [0] * processes
    reserved = namenode_requests(address).get("reserve_inodes", 0) - before
    made = processes * (each + 1)  # files and their directories
    assert 0 < reserved * RESERVE_BATCH - made < RESERVE_BATCH  # none dropped
    assert sum(len(os.listdir(mount.path / f"d{k}")) for k in range(processes)) == processes * each


def test_existing_directories_are_leased_when_the_mount_changes_them(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    with SyncClient(address) as fs:  # a tree the mount did not make
        fs.mkdir("/existing")
        for d in range(10):
            fs.mkdir(f"/old/d{d}", parents=True)
            for f in range(30):
                fs.write_file(f"/old/d{d}/f{f}", _content(f))
    before = namenode_requests(address)
    removed = subprocess.run(["rm", "-rf", str(mount.path / "old")], capture_output=True)
    assert removed.returncode == 0, removed.stderr
    for k in range(100):
        (mount.path / "existing" / f"f{k}").write_bytes(_content(k))
    made = namenode_requests(address)
    assert made.get("commit", 0) - before.get("commit", 0) < 60  # 411 changes, in batches
    assert made.get("lease_dir", 0) - before.get("lease_dir", 0) == 12
    with SyncClient(address) as fs:  # recalls the leases: sees all the mount did
        assert sorted(e.name for e in fs.scandir("/")) == ["existing"]
        names = {e.name for e in fs.scandir("/existing")}
        assert names == {f"f{k}" for k in range(100)}
        assert fs.read_file("/existing/f7") == _content(7)
        fs.write_file("/existing/from-library", b"library")
    assert (mount.path / "existing" / "from-library").read_bytes() == b"library"


def test_a_directory_of_another_owner_is_changed_through_the_namenode(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    with SyncClient(address) as fs:
        fs.mkdir("/theirs", mode=0o777)
        fs.setattr("/theirs", uid=4242)
    before = namenode_requests(address)
    for k in range(5):
        (mount.path / "theirs" / f"f{k}").write_bytes(_content(k))
    (mount.path / "theirs" / "f0").unlink()
    made = namenode_requests(address)
    assert made.get("commit", 0) - before.get("commit", 0) >= 6  # one per change
    with SyncClient(address) as fs:
        assert sorted(e.name for e in fs.scandir("/theirs")) == [f"f{k}" for k in range(1, 5)]
        assert fs.stat("/theirs/f1").uid != 4242  # the mount's user made it


def subprocess_free_rm(top: Path) -> None:
    """rm -rf with system calls, bottom up."""
    for d, dirs, files in os.walk(top, topdown=False):
        for f in files:
            os.unlink(Path(d) / f)
        for sub in dirs:
            os.rmdir(Path(d) / sub)
    os.rmdir(top)


def test_fsync_makes_it_durable_and_a_killed_mount_loses_no_part_of_a_file(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "mnt") as m:
        (m.path / "d").mkdir()
        with open(m.path / "d" / "synced", "wb") as f:
            f.write(b"fsynced content")
            f.flush()
            os.fsync(f.fileno())
        for k in range(50):
            (m.path / "d" / f"maybe{k}").write_bytes(_content(k))
        os.kill(m.pid, signal.SIGKILL)
        unmount(m.path, m.pid)
    with SyncClient(address) as fs:
        assert fs.read_file("/d/synced") == b"fsynced content"
        for entry in fs.scandir("/d"):
            if entry.name.startswith("maybe"):  # sent before the kill: whole
                assert fs.read_file(f"/d/{entry.name}") == _content(int(entry.name[5:]))


def test_a_namenode_restart_hands_leased_directories_back(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    (mount.path / "d").mkdir()
    (mount.path / "d" / "x").write_bytes(b"x")
    fd = os.open(mount.path / "d", os.O_RDONLY)
    try:
        os.fsync(fd)  # fsyncdir: sent and durable
    finally:
        os.close(fd)
    inline_cluster.namenode.kill9()
    inline_cluster.namenode.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            (mount.path / "d" / "y").write_bytes(b"y")
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert sorted(os.listdir(mount.path / "d")) == ["x", "y"]
    with SyncClient(inline_cluster.namenode.address) as fs:
        assert fs.read_file("/d/y") == b"y" and fs.read_file("/d/x") == b"x"


def test_no_write_behind_sends_every_change_at_once(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "mnt", "no_write_behind") as m:
        (m.path / "d").mkdir()
        before = namenode_requests(address)
        for k in range(10):
            (m.path / "d" / f"f{k}").write_bytes(b"x")
        after = namenode_requests(address)
    assert after["create"] - before.get("create", 0) == 10


def test_a_file_open_when_its_directory_is_recalled_keeps_all_that_is_written(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    (mount.path / "d").mkdir()
    fd = os.open(mount.path / "d" / "open", os.O_CREAT | os.O_WRONLY)
    try:
        os.write(fd, b"first part, ")
        with SyncClient(address) as fs:  # recalls the lease while the file is open
            assert [e.name for e in fs.scandir("/d")] == ["open"]
        os.write(fd, b"second part")
    finally:
        os.close(fd)
    with SyncClient(address) as fs:
        assert fs.read_file("/d/open") == b"first part, second part"
    assert (mount.path / "d" / "open").read_bytes() == b"first part, second part"


def test_links_of_directories_follow_a_directory_moved_between_them(mount: Mount) -> None:
    top = mount.path / "top"  # every directory here is leased: their tables answer stat
    (top / "a" / "sub").mkdir(parents=True)
    (top / "b").mkdir()
    assert (os.lstat(top / "a").st_nlink, os.lstat(top / "b").st_nlink) == (3, 2)
    os.rename(top / "a" / "sub", top / "b" / "sub")
    assert (os.lstat(top / "a").st_nlink, os.lstat(top / "b").st_nlink) == (2, 3)
