"""The scrub: every block committed files use on this datanode, verified against its
checksum in the background at a bounded byte rate, pass after pass, and the ranges the
namenode asks to verify at once (a client read failed there).

The used blocks come from the namenode (UsedBlocks, paged) at the start of each pass.
Blocks being written are skipped (their data and checksum are two writes, so they can
mismatch for a moment), and a mismatch is read again, once no write touched the block,
before it is reported: a report means the block is bad on disk. Disk reads run on the
scrub's own thread, so a pass never occupies the threads that serve clients.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.datanode.inflight import InflightWrites, run_to_end
from plasmafs.datanode.ratelimit import RateLimit
from plasmafs.datanode.volume import Volume

log = logging.getLogger(__name__)

PIECE_BYTES = 1024 * 1024  # verified per read request (and taken from the rate at a time)

# after -> (ranges starting at or after block `after`, whether more follow)
UsedBlocks = Callable[[int], Awaitable[tuple[list[tuple[int, int]], bool]]]


class Scrubber:
    """Verifies `volume`'s used blocks; `report` receives every confirmed bad range."""

    def __init__(
        self,
        volume: Volume,
        inflight: InflightWrites,
        reader: Executor,
        used_blocks: UsedBlocks,
        report: Callable[[pb.BadBlocks], None],
        bandwidth: RateLimit,
        pause: float,
    ) -> None:
        self.volume = volume
        self.inflight = inflight
        self.reader = reader
        self.used_blocks = used_blocks
        self.report = report
        self.bandwidth = bandwidth
        self.pause = pause
        self.passes = 0  # passes completed
        self.pass_blocks = 0  # used blocks in the current pass
        self.pass_verified = 0  # blocks of the current pass verified so far
        self.pass_skipped = 0  # blocks of the current pass skipped while being written
        self.corrupt_blocks = 0  # bad blocks found (and reported), all passes
        self.transient = 0  # mismatches that were gone (or written) when read again
        self._passed = asyncio.Condition()

    async def run(self) -> None:
        """Scrub pass after pass, `pause` seconds apart, until cancelled; a pass that
        cannot list the used blocks (the namenode is away) is tried again after the pause."""
        while True:
            try:
                await self.scrub_pass()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("scrub pass stopped: %s; next try in %gs", exc, self.pause)
            await asyncio.sleep(self.pause)

    async def wait_passes(self, count: int) -> None:
        """Wait until `count` passes have completed."""
        async with self._passed:
            await self._passed.wait_for(lambda: self.passes >= count)

    async def scrub_pass(self) -> None:
        """One pass over every used block."""
        ranges = await self._used_ranges()
        self.pass_blocks = sum(n for _, n in ranges)
        self.pass_verified = self.pass_skipped = 0
        piece = max(1, PIECE_BYTES // self.volume.info.blocksize)
        bad_before = self.corrupt_blocks
        for start, count in ranges:
            for at in range(start, start + count, piece):
                n = min(piece, start + count - at)
                await self.bandwidth.take(n * self.volume.info.blocksize)
                bad, verified = await self._check(at, n, "scrub")
                self.pass_verified += verified
                self.pass_skipped += n - verified
                for report in bad:
                    self.report(report)
        self.passes += 1
        log.info(
            "scrub pass %d done: %d blocks verified, %d skipped while written, %d bad",
            self.passes,
            self.pass_verified,
            self.pass_skipped,
            self.corrupt_blocks - bad_before,
        )
        async with self._passed:
            self._passed.notify_all()

    async def verify(self, block_start: int, block_count: int) -> list[pb.BadBlocks]:
        """Verify a range now (clamped to the volume); the bad ranges found."""
        end = min(block_start + block_count, self.volume.info.capacity_blocks)
        piece = max(1, PIECE_BYTES // self.volume.info.blocksize)
        found = []
        for at in range(block_start, end, piece):
            found += (await self._check(at, min(piece, end - at), "verification"))[0]
        return found

    async def _used_ranges(self) -> list[tuple[int, int]]:
        capacity = self.volume.info.capacity_blocks
        ranges: list[tuple[int, int]] = []
        after = 0
        while True:
            page, more = await self.used_blocks(after)
            for start, count in page:
                count = min(count, capacity - start)  # the namenode's records, our volume
                if count > 0:
                    ranges.append((start, count))
            if not more or not page:
                return ranges
            after = max(after + 1, page[-1][0] + page[-1][1])

    async def _check(
        self, block_start: int, block_count: int, why: str
    ) -> tuple[list[pb.BadBlocks], int]:
        """Verify the blocks not being written; the confirmed bad ones as ranges, and
        how many blocks were verified."""
        confirmed: list[int] = []
        verified = 0
        for start, count in self.inflight.idle_runs(block_start, block_count):
            mark = self.inflight.mark()
            bad = await run_to_end(self.reader, self.volume.verify_blocks, start, count)
            verified += count
            for block in bad:
                if await self._confirm(block, mark):
                    confirmed.append(block)
        self.corrupt_blocks += len(confirmed)
        bad_ranges = [
            pb.BadBlocks(block_start=s, block_count=n, reason=f"{why}: checksum mismatch")
            for s, n in _runs(confirmed)
        ]
        return bad_ranges, verified

    async def _confirm(self, block: int, mark: int) -> bool:
        """Whether a block that mismatched when read after `mark` is bad for certain: no
        write touched it since, and it mismatches again when read with none under way."""
        if self.inflight.touched(block, 1, since=mark):
            self.transient += 1
            return False
        again = self.inflight.mark()
        bad = await run_to_end(self.reader, self.volume.verify_blocks, block, 1)
        if not bad or self.inflight.touched(block, 1, since=again):
            self.transient += 1
            return False
        log.warning("block %d of volume %s fails its checksum", block, self.volume.info.identity)
        return True


def _runs(blocks: list[int]) -> list[tuple[int, int]]:
    """Sorted block numbers as (start, count) runs of consecutive blocks."""
    runs: list[tuple[int, int]] = []
    for block in blocks:
        if runs and runs[-1][0] + runs[-1][1] == block:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((block, 1))
    return runs
