"""A volume with direct I/O (the datanode's default): local reads of blocks read once go
around the page cache, of blocks read again through it, and both verify every block;
data that changes while it is written is stored with the checksum of what was written;
a file system that refuses O_DIRECT is an error when direct I/O was asked for, a
fallback otherwise."""

from __future__ import annotations

import logging
import mmap
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.core.errors import ConfigError, CorruptionError
from plasmafs.datanode.recently_read import RecentBlocks
from plasmafs.datanode.volume import DATA, Volume

BS = 64 * 1024
BLOCKS = 32


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Volume]:
    try:
        v = Volume.open(tmp_path / "vol", BS, BLOCKS * BS, direct=True)
    except ConfigError:
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT")
    yield v
    v.close()


def _pattern(blocks: int, seed: int) -> bytes:
    return b"".join(bytes([(seed + i) % 251]) * BS for i in range(blocks))


def _damage(volume: Volume, block: int) -> None:
    """Change a block behind the volume's back, through the page cache."""
    fd = os.open(volume.directory / DATA, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\xff" * 100, block * BS + 10)
    finally:
        os.close(fd)


def test_local_reads_go_around_the_cache_once_then_through_it(volume: Volume) -> None:
    volume.write_blocks(3, _pattern(4, 7))
    volume.write_blocks(10, _pattern(2, 9))
    segment = mmap.mmap(-1, 4 * BS)
    with memoryview(segment) as view:
        assert volume.read_local(3, 4, view) is True  # read once: around the cache
        assert bytes(view) == _pattern(4, 7)
        assert volume.read_local(3, 4, view) is False  # read again: through it
        assert bytes(view) == _pattern(4, 7)
        # Both ways see damage done through the page cache, and refuse the block.
        _damage(volume, 5)
        _damage(volume, 11)
        with pytest.raises(CorruptionError, match="block 5 "):
            volume.read_local(3, 4, view)
        with pytest.raises(CorruptionError, match="block 11 "):
            volume.read_local(10, 2, view[: 2 * BS])  # read once: around the cache
        # Blocks read through the page cache (a remote client's read) are cached:
        # a local read of them goes there too.
        volume.write_blocks(20, _pattern(2, 5))
        volume.read_into(20, 2, memoryview(bytearray(2 * BS)))
        assert volume.read_local(20, 2, view[: 2 * BS]) is False
        assert bytes(view[: 2 * BS]) == _pattern(2, 5)
    segment.close()


def test_recent_blocks_are_a_bounded_lru_within_a_window() -> None:
    recent = RecentBlocks(4, window=10.0)
    assert not recent.read_again(0, 2, now=0.0)
    assert recent.read_again(0, 2, now=1.0)
    assert not recent.read_again(1, 2, now=2.0)  # block 2 is new
    assert not recent.read_again(5, 2, now=3.0)  # blocks 5, 6 push out 0 (least recent)
    assert recent.read_again(1, 2, now=4.0)
    assert not recent.read_again(0, 1, now=5.0)
    # Read again, but only after the window: from the disk again.
    timed = RecentBlocks(100, window=10.0)
    assert not timed.read_again(7, 1, now=0.0)
    assert not timed.read_again(7, 1, now=10.5)
    assert timed.read_again(7, 1, now=20.0)
    with pytest.raises(ValueError, match="not positive"):
        RecentBlocks(0)
    assert RecentBlocks.for_host(BS).capacity > 1000


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
        volume.write_blocks(0, _pattern(2, 3))
        segment = mmap.mmap(-1, 2 * BS)
        with memoryview(segment) as view:
            assert volume.read_local(0, 2, view) is False  # through the page cache
            assert bytes(view) == _pattern(2, 3)
        segment.close()
    finally:
        volume.close()
