"""A lookup that brings the block list of a small file, and the mount's open that uses
it (mount/looked_up.py), against a real cluster: who gets a list, that a reader opened
on it reads the file, and that an open through the mount never reads a version older
than the open, whatever the lookup before it saw."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import At, Client, SyncClient
from plasmafs.mount.looked_up import WITHIN
from tests.conftest import DataCluster
from tests.support.accounts import TOKENS
from tests.support.mounts import Mount, mounted


@pytest.fixture
def mount(inline_cluster: DataCluster, tmp_path: Path) -> Iterator[Mount]:
    """The cluster mounted at tmp_path/mnt, as root."""
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt") as m:
        yield m


async def test_a_lookup_brings_the_block_list_of_a_small_file_the_caller_may_read(
    ifs: Client, inline_cluster: DataCluster
) -> None:
    top = await ifs.mkdir("/top", 0o755)
    await ifs.write_file("/top/small", b"x" * 100)  # kept in the inode
    await ifs.write_file("/top/blocks", os.urandom(300_000))
    await ifs.write_file("/top/big", b"y" * (WITHIN + 1))
    await ifs.write_file("/top/private", b"secret" * 1000)
    await ifs.chmod("/top/private", 0o600)
    within = WITHIN

    for name in ("small", "blocks"):
        attr, blocks = await ifs.lookup_for_reading(At(top.ino, name), within=within)
        assert blocks is not None and blocks.attr == attr
        reader = await ifs.reader_of(blocks)
        assert await reader.read() == await ifs.read_file(f"/top/{name}")
        await reader.close()
    for name in ("big",):
        attr, blocks = await ifs.lookup_for_reading(At(top.ino, name), within=within)
        assert blocks is None and attr.size == WITHIN + 1
    attr, blocks = await ifs.lookup_for_reading(At(1, "top"), within=within)
    assert blocks is None and attr.is_dir
    attr, blocks = await ifs.lookup_for_reading(At(top.ino, "blocks"), within=0)
    assert blocks is None  # not asked for

    async with Client(inline_cluster.namenode.address, token=TOKENS["alice"]) as alice:
        attr, blocks = await alice.lookup_for_reading(At(top.ino, "private"), within=within)
        assert blocks is None and attr.mode == 0o600  # may see it, may not read it
        attr, blocks = await alice.lookup_for_reading(At(top.ino, "blocks"), within=within)
        assert blocks is not None


def test_an_open_after_a_lookup_reads_what_was_committed_before_it(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    first, second = os.urandom(200_000), os.urandom(200_000)  # same size: only the version
    with SyncClient(inline_cluster.namenode.address) as lib:
        lib.write_file("/f", first)
        for _ in range(3):
            path = mount.path / "f"
            os.stat(path)  # the kernel looks the name up and keeps it: the open will not
            lib.write_file("/f", second)
            assert path.read_bytes() == second
            first, second = second, first


def test_files_opened_by_name_after_caches_are_dropped_read_whole(mount: Mount) -> None:
    sizes = [0, 1, 4095, 4097, 65_536, 300_001, WITHIN, WITHIN + 1]
    contents = {f"f{k}": os.urandom(size) for k, size in enumerate(sizes)}
    (mount.path / "d").mkdir()
    for name, data in contents.items():
        (mount.path / "d" / name).write_bytes(data)
    for _ in range(2):
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        for name, data in contents.items():
            copied = subprocess.run(
                ["cat", str(mount.path / "d" / name)], capture_output=True, check=True
            ).stdout
            assert copied == data, name
