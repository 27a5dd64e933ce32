"""The datanode's scrub on a real volume: bad blocks found and reported once read
twice, blocks holding another owner's data found by their stamps, ranges being written
skipped, the used-block listing paged, the rate bounded."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.datanode.inflight import InflightWrites
from plasmafs.datanode.ratelimit import RateLimit
from plasmafs.datanode.scrubber import Scrubber, UsedBlocks, UsedCursor, UsedRange
from plasmafs.datanode.volume import DATA, Volume

BS = 64 * 1024
BLOCKS = 64


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Volume]:
    """A volume of 64 blocks of 64 KiB, every block written with its own pattern."""
    v = Volume.open(tmp_path / "vol", BS, BLOCKS * BS, sync=False)
    v.write_blocks(0, b"".join(bytes([i]) * BS for i in range(BLOCKS)))
    yield v
    v.close()


@pytest.fixture
def reader() -> Iterator[ThreadPoolExecutor]:
    """The scrub's own thread."""
    with ThreadPoolExecutor(1) as pool:
        yield pool


def flip(volume: Volume, block: int, at: int = 100) -> None:
    """Flip one byte of a block in the volume file on disk."""
    with open(volume.directory / DATA, "r+b") as f:
        f.seek(block * BS + at)
        byte = f.read(1)
        f.seek(block * BS + at)
        f.write(bytes([byte[0] ^ 0xFF]))


def listing(
    ranges: list[tuple[int, int]] | list[UsedRange], page: int = 1000
) -> tuple[UsedBlocks, list[UsedCursor]]:
    """A used-block listing as the namenode pages it (ranges without an owner unless
    given as UsedRange; each named by a file of its own, numbered in the order given),
    and the cursors asked for."""
    asked: list[UsedCursor] = []
    keyed = sorted(((r[0], ino, 0), UsedRange(*r)) for ino, r in enumerate(ranges, 1))

    async def used(cursor: UsedCursor) -> tuple[list[UsedRange], UsedCursor | None]:
        asked.append(cursor)
        rest = [(key, r) for key, r in keyed if key > cursor]
        more = len(rest) > page
        return [r for _, r in rest[:page]], rest[page - 1][0] if more else None

    return used, asked


def scrubber(
    volume: Volume,
    reader: ThreadPoolExecutor,
    used: UsedBlocks,
    inflight: InflightWrites | None = None,
    bandwidth: RateLimit | None = None,
    pause: float = 0.0,
) -> tuple[Scrubber, list[pb.BadBlocks]]:
    reports: list[pb.BadBlocks] = []
    s = Scrubber(
        volume,
        inflight or InflightWrites(),
        reader,
        used,
        reports.append,
        bandwidth or RateLimit(0),
        pause,
    )
    return s, reports


async def test_a_flipped_byte_is_found_and_reported(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    flip(volume, 5)
    flip(volume, 6, at=BS - 1)
    flip(volume, 40)
    used, _ = listing([(0, 20), (30, 20)])
    s, reports = scrubber(volume, reader, used)
    await s.scrub_pass()
    assert [(r.block_start, r.block_count) for r in reports] == [(5, 2), (40, 1)]
    assert all(r.reason.startswith("scrub") for r in reports)
    assert s.corrupt_blocks == 3
    assert s.passes == 1
    assert s.pass_blocks == s.pass_verified == 40
    assert s.transient == 0


async def test_blocks_outside_the_used_ranges_are_not_read(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    flip(volume, 25)  # free space: whatever it holds is nobody's business
    used, _ = listing([(0, 20), (30, 20)])
    s, reports = scrubber(volume, reader, used)
    await s.scrub_pass()
    assert reports == []


async def test_a_range_being_written_is_skipped(volume: Volume, reader: ThreadPoolExecutor) -> None:
    flip(volume, 12)
    flip(volume, 50)
    inflight = InflightWrites()
    used, _ = listing([(0, BLOCKS)])
    s, reports = scrubber(volume, reader, used, inflight)
    with inflight.writing(10, 4):
        await s.scrub_pass()
    assert [(r.block_start, r.block_count) for r in reports] == [(50, 1)]
    assert s.pass_skipped == 4
    assert s.pass_verified == BLOCKS - 4


class RewritingExecutor(ThreadPoolExecutor):
    """The scrub's thread, during whose first read a writer rewrites `block` whole
    (registered as being written, as WriteBlocks does): the read sees a mismatch that
    is no corruption."""

    def __init__(self, volume: Volume, inflight: InflightWrites, block: int) -> None:
        super().__init__(1)
        self.volume, self.inflight, self.block = volume, inflight, block
        self.first = True

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if not self.first:
            return super().submit(fn, *args, **kwargs)
        self.first = False

        def read_while_written() -> Any:
            result = fn(*args, **kwargs)
            with self.inflight.writing(self.block, 1):
                self.volume.write_blocks(self.block, bytes([7]) * BS)
            return result

        return super().submit(read_while_written)


async def test_a_mismatch_while_the_block_was_written_is_not_reported(volume: Volume) -> None:
    flip(volume, 3)  # what the read sees; the writer then replaces the block
    inflight = InflightWrites()
    used, _ = listing([(0, 8)])
    with RewritingExecutor(volume, inflight, 3) as reader:
        s, reports = scrubber(volume, reader, used, inflight)
        await s.scrub_pass()
    assert reports == []
    assert s.transient == 1
    assert volume.verify_blocks(0, 8) == []


async def test_the_listing_is_paged_and_clamped_to_the_volume(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    ranges = [(b, 1) for b in range(0, BLOCKS, 2)] + [(BLOCKS - 1, 10), (BLOCKS + 5, 3)]
    flip(volume, BLOCKS - 1)
    used, asked = listing(ranges, page=7)
    s, reports = scrubber(volume, reader, used)
    await s.scrub_pass()
    assert len(asked) == 5  # 34 ranges, 7 a page
    assert s.pass_blocks == BLOCKS // 2 + 1
    assert [(r.block_start, r.block_count) for r in reports] == [(BLOCKS - 1, 1)]


async def test_verify_checks_a_range_at_once_clamped_to_the_volume(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    flip(volume, BLOCKS - 2)
    used, _ = listing([])
    s, _ = scrubber(volume, reader, used)
    bad = await s.verify(BLOCKS - 10, 1000)
    assert [(b.block_start, b.block_count) for b in bad] == [(BLOCKS - 2, 1)]
    assert bad[0].reason.startswith("verification")
    assert await s.verify(BLOCKS + 10, 5) == []
    assert s.passes == 0


async def test_the_scrub_reads_at_the_bounded_rate(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    clock = [0.0]

    async def sleep(seconds: float) -> None:
        clock[0] += seconds

    rate = 256 * 1024
    limit = RateLimit(rate, clock=lambda: clock[0], sleep=sleep)
    used, _ = listing([(0, BLOCKS)])
    s, _ = scrubber(volume, reader, used, bandwidth=limit)
    await s.scrub_pass()
    total = BLOCKS * BS
    assert limit.taken == total
    piece = 1024 * 1024  # the scrub's read size
    assert clock[0] == pytest.approx((total - piece) / rate)


async def test_passes_repeat_after_the_pause(volume: Volume, reader: ThreadPoolExecutor) -> None:
    flip(volume, 9)
    used, asked = listing([(8, 4)])
    s, reports = scrubber(volume, reader, used, pause=0.01)
    running = asyncio.create_task(s.run())
    try:
        await asyncio.wait_for(s.wait_passes(3), 30)
    finally:
        running.cancel()
    assert len(asked) >= 3  # a fresh listing each pass
    assert len(reports) >= 3  # reported each pass (the namenode ignores repeats)
    assert {(r.block_start, r.block_count) for r in reports} == {(9, 1)}


async def test_a_listing_that_fails_is_tried_again(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    calls = 0

    async def used(cursor: UsedCursor) -> tuple[list[UsedRange], UsedCursor | None]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("the namenode is away")
        return [UsedRange(0, 4)], None

    s, _ = scrubber(volume, reader, used, pause=0.01)
    running = asyncio.create_task(s.run())
    try:
        await asyncio.wait_for(s.wait_passes(1), 30)
    finally:
        running.cancel()
    assert calls >= 2
    assert s.pass_verified == 4


def test_verify_blocks_reports_a_block_the_disk_cannot_read_back(volume: Volume) -> None:
    os.truncate(volume.directory / DATA, (BLOCKS - 1) * BS + 10)  # a short last block
    assert volume.verify_blocks(BLOCKS - 3, 3) == [BLOCKS - 1]


def test_the_scrub_checks_blocks_against_their_owner_stamps(volume: Volume) -> None:
    volume.write_blocks(10, os.urandom(4 * BS), owner=(7, 1 << 32 | 1, 0))
    volume.write_blocks(20, os.urandom(2 * BS), owner=(8, 1 << 32 | 2, 5))
    assert volume.verify_blocks(10, 12) == []  # stamped blocks verify as stamped
    assert volume.stamp_of(12) == (7, 1 << 32 | 1, 2)
    # Block 20's bytes and checksum copied over block 11, whose stamp says inode 7.
    for name, size in (("volume.data", BS), ("volume.crc", 4)):
        with open(volume.directory / name, "r+b") as f:
            f.seek(20 * size)
            copied = f.read(size)
            f.seek(11 * size)
            f.write(copied)
    assert volume.verify_blocks(10, 12) == [11]


async def test_blocks_written_since_for_another_owner_are_found_by_their_stamps(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    volume.write_blocks(0, os.urandom(8 * BS), owner=(7, 1 << 32 | 1, 0))
    volume.write_blocks(8, os.urandom(4 * BS), owner=(9, 1 << 32 | 2, 0))  # reused: was 8's
    used, _ = listing(
        [
            UsedRange(0, 8, (7, 1 << 32 | 1, 0)),
            UsedRange(8, 4, (8, 1 << 32 | 1, 3)),  # what the (older) namespace records
            UsedRange(12, 4, (5, 0, 0)),  # written before stamps: any stamp will do
        ]
    )
    s, reports = scrubber(volume, reader, used)
    await s.scrub_pass()
    assert [(r.block_start, r.block_count) for r in reports] == [(8, 4)]
    assert "owner stamp" in reports[0].reason
    assert s.foreign_blocks == s.corrupt_blocks == 4  # their checksums match their stamps
    assert s.owner_checks == 1


async def test_an_owner_check_after_a_registration_reads_stamps_only(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    volume.write_blocks(0, os.urandom(2 * BS), owner=(7, 1 << 32 | 1, 4))
    flip(volume, 1)  # bad data, right stamp: for the data pass, not the owner check
    inflight = InflightWrites()
    used, _ = listing([UsedRange(0, 2, (7, 1 << 32 | 1, 5)), UsedRange(2, 2, (3, 1 << 32, 0))])
    s, reports = scrubber(volume, reader, used, inflight)
    checks = asyncio.create_task(s.run_owner_checks())
    try:
        with inflight.writing(3, 1):  # being written: not judged now
            s.owners_due.set()
            while s.owner_checks < 1:
                await asyncio.sleep(0.01)
    finally:
        checks.cancel()
    # Block 0 holds file block 4, not 5, and block 1 file block 5, not 6; block 2 has
    # the fixture's data (no owner) where inode 3 was expected; block 3 was skipped.
    assert [(r.block_start, r.block_count) for r in reports] == [(0, 3)]
    assert s.passes == 0 and s.pass_verified == 0


async def test_ranges_sharing_a_start_across_a_page_end_are_all_scrubbed(
    volume: Volume, reader: ThreadPoolExecutor
) -> None:
    """Several files name blocks from one start (a file and its snapshots); a page that
    ends among them is followed by the ranges after the last one given, so the longer
    range listed after them is read too."""
    flip(volume, 14)
    used, asked = listing([(10, 1), (10, 1), (10, 1), (10, 6), (20, 1)], page=2)
    s, reports = scrubber(volume, reader, used)
    await s.scrub_pass()
    assert [(r.block_start, r.block_count) for r in reports] == [(14, 1)]
    assert s.pass_blocks == 10
    assert len(asked) == 3
