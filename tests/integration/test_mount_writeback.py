"""`pfs mount -o writeback_cache` against a real cluster: the kernel gathers small
writes into large ones, and still every open sees what other clients committed before
it, `stat` sees their changes within the entry lifetime, and small files keep going to
the namenode in batches with the times programs give them (mount/kernelview.py)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import SyncClient
from plasmafs.mount.options import MountOptions
from tests.conftest import DataCluster
from tests.support.cluster import namenode_requests
from tests.support.mounts import Mount, mounted
from tests.support.waiting import eventually_sync

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def mount(inline_cluster: DataCluster, tmp_path: Path) -> Iterator[Mount]:
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt", "writeback_cache") as m:
        yield m


def test_small_writes_arrive_whole_through_the_page_cache(
    mount: Mount, inline_cluster: DataCluster, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.write_bytes(os.urandom(3 * 1024 * 1024 + 123))
    (mount.path / "made").mkdir()  # leased: a new file starts in memory there
    for target in ("copy", "made/copy"):
        copied = subprocess.run(
            ["dd", f"if={source}", f"of={mount.path / target}", "bs=1K", "conv=fsync"],
            capture_output=True,
            text=True,
        )
        assert copied.returncode == 0, copied.stderr
        assert (mount.path / target).read_bytes() == source.read_bytes()
    with SyncClient(inline_cluster.namenode.address) as lib:
        assert lib.read_file("/copy") == lib.read_file("/made/copy") == source.read_bytes()
    # Appends and writes inside the file, through the cache too.
    with open(mount.path / "copy", "r+b") as f:
        f.seek(1000)
        f.write(b"inside")
        f.seek(0, os.SEEK_END)
        f.write(b"appended")
    expected = bytearray(source.read_bytes())
    expected[1000:1006] = b"inside"
    expected += b"appended"
    with SyncClient(inline_cluster.namenode.address) as lib:
        assert lib.read_file("/copy") == bytes(expected)


def test_every_open_sees_what_another_client_committed_before_it(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    path = mount.path / "shared"
    with SyncClient(inline_cluster.namenode.address) as lib:
        lib.write_file("/shared", b"first")
        assert path.read_bytes() == b"first"
        for version in (b"a longer second version", b"3", b"", b"fourth"):
            lib.write_file("/shared", version)  # no wait: the kernel still has the inode
            assert path.read_bytes() == version
            assert os.stat(path).st_size == len(version)
        path.write_bytes(b"from the mount")
        assert lib.read_file("/shared") == b"from the mount"
        with open(path, "ab") as f:
            f.write(b", appended")
        assert lib.read_file("/shared") == b"from the mount, appended"


def test_stat_sees_another_clients_change_within_the_entry_lifetime(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    path = mount.path / "grows"
    with SyncClient(inline_cluster.namenode.address) as lib:
        lib.write_file("/grows", b"x")
        assert os.stat(path).st_size == 1
        lib.write_file("/grows", b"x" * 5000)
        time.sleep(1.5)  # the default entry and attribute lifetimes are 1 s
        assert os.stat(path).st_size == 5000


def test_an_open_file_keeps_its_version_while_another_client_writes(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    path = mount.path / "held"
    with SyncClient(inline_cluster.namenode.address) as lib:
        lib.write_file("/held", b"old version")
        with open(path, "rb") as held:
            lib.write_file("/held", b"a newer and longer version")
            assert held.read() == b"old version"
        assert path.read_bytes() == b"a newer and longer version"


def test_small_files_still_go_in_batches_with_the_times_programs_set(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    tree = mount.path / "tree"
    tree.mkdir()
    before = namenode_requests(address).get("commit", 0)
    for k in range(200):
        (tree / f"f{k}").write_bytes(b"x" * (k + 1))
    subprocess.run(["touch", "-d", "2001-01-01 00:00:00 UTC", str(tree / "f5")], check=True)
    os.utime(tree / "f6", ns=(0, 1_234_567_890_123_456_789))
    with SyncClient(address) as lib:
        assert namenode_requests(address).get("commit", 0) - before < 40  # not one per file
        assert all(lib.read_file(f"/tree/f{k}") == b"x" * (k + 1) for k in range(200))
        assert lib.stat("/tree/f5").mtime_ns == 978_307_200 * 10**9
        assert lib.stat("/tree/f6").mtime_ns == 1_234_567_890_123_456_789
    assert os.stat(tree / "f5").st_mtime == 978_307_200


def test_sync_and_ro_turn_the_cache_off() -> None:
    assert MountOptions.parse("writeback_cache").writeback
    assert not MountOptions.parse("writeback_cache,sync").writeback
    assert not MountOptions.parse("writeback_cache,ro").writeback
    assert not MountOptions.parse("").writeback


def test_a_file_this_mount_made_is_not_looked_up_again_at_every_open(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    address = inline_cluster.namenode.address
    (mount.path / "made").mkdir()  # leased: the mount's table answers for the file
    (mount.path / "made" / "empty").write_bytes(b"")
    (mount.path / "made" / "small").write_bytes(b"small")
    eventually_sync(lambda: _queue_sent(address), "the write-behind queue sent")

    before = namenode_requests(address).get("blocks", 0)
    for _ in range(5):
        assert (mount.path / "made" / "empty").read_bytes() == b""
        assert (mount.path / "made" / "small").read_bytes() == b"small"
    # One block list per open, and at most one retry per file (its first open may
    # find the table's mtime a little off the namenode's).
    assert namenode_requests(address).get("blocks", 0) - before <= 12


def _queue_sent(address: str) -> bool:
    """The namenode served the mount's queued changes: both creates, the small file's
    content and the commit after the directory's own."""
    served = namenode_requests(address)
    return (
        served.get("create", 0) >= 2
        and served.get("write_inline", 0) >= 1
        and served.get("commit", 0) >= 2
    )
