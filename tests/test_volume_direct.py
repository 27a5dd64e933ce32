"""A volume with direct I/O (the datanode's default): writes and reads into aligned
memory go around the page cache and still verify every block; data that changes while
it is written is stored with the checksum of what was written; a file system that
refuses O_DIRECT is an error when direct I/O was asked for, a fallback otherwise."""

from __future__ import annotations

import logging
import mmap
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client.errors import ConfigError, CorruptionError
from plasmafs.datanode.volume import DATA, Volume

BS = 64 * 1024
BLOCKS = 32


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Volume]:
    v = Volume.open(tmp_path / "vol", BS, BLOCKS * BS, direct=True)
    if not v.reads_around_cache:
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT")
    yield v
    v.close()


def _pattern(blocks: int, seed: int) -> bytes:
    return b"".join(bytes([(seed + i) % 251]) * BS for i in range(blocks))


def test_aligned_reads_return_what_was_written_and_verify_it(volume: Volume) -> None:
    data = _pattern(4, 7)
    volume.write_blocks(3, data)
    segment = mmap.mmap(-1, 4 * BS)
    with memoryview(segment) as view:
        volume.read_into(3, 4, view, aligned=True)
        assert bytes(view) == data
    # Damage one block behind the volume's back, through the page cache: the direct
    # read sees the damage and refuses the block.
    fd = os.open(volume.directory / DATA, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\xff" * 100, 5 * BS + 10)
    finally:
        os.close(fd)
    with memoryview(segment) as view, pytest.raises(CorruptionError, match="block 5"):
        volume.read_into(3, 4, view, aligned=True)
    segment.close()


def test_changing_data_is_written_with_the_checksum_of_its_copy(volume: Volume) -> None:
    source = bytearray(_pattern(3, 1))
    with memoryview(source) as view:
        volume.write_blocks(0, view, changing=True)
    source[:] = b"\0" * len(source)  # the client reuses its memory afterwards
    assert volume.read_blocks(0, 3) == _pattern(3, 1)
    # A short tail is padded and checksummed the same way.
    volume.write_blocks(10, memoryview(b"tail"), changing=True)
    assert volume.read_blocks(10, 1) == b"tail" + bytes(BS - 4)


@pytest.fixture
def ramfs(tmp_path: Path) -> Iterator[Path]:
    """A ramfs mount, a file system that refuses O_DIRECT (tmpfs takes it now)."""
    where = tmp_path / "ramfs"
    where.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "ramfs", "ramfs", str(where)]).returncode
    ):
        pytest.skip("mounting a ramfs takes root")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_a_file_system_refusing_direct_io(ramfs: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError, match="refuses direct I/O"):
        Volume.open(ramfs / "asked", BS, 4 * BS, direct=True)
    with caplog.at_level(logging.WARNING, logger="plasmafs.datanode.volume"):
        volume = Volume.open(ramfs / "default", BS, 4 * BS, direct=True, direct_required=False)
    try:
        assert "refuses direct I/O" in caplog.text
        assert not volume.reads_around_cache
        volume.write_blocks(0, _pattern(2, 3))
        segment = mmap.mmap(-1, 2 * BS)
        with memoryview(segment) as view:
            volume.read_into(0, 2, view, aligned=True)
            assert bytes(view) == _pattern(2, 3)
        segment.close()
    finally:
        volume.close()
