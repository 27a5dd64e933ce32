"""The scrub: every block committed files use on this datanode, verified against its
checksum in the background at a bounded byte rate, pass after pass, and the ranges the
namenode asks to verify at once (a client read failed there).

The used blocks come from the namenode (UsedBlocks, paged) at the start of each pass,
each range with the owner the namenode records for it (file, generation, block index).
Before reading any data a pass compares every used block's owner stamp with that owner
(stamps only: 24 bytes a block), and so does an owner check after each registration
with a namenode: a block written since for another file or version — the namespace
was restored to an earlier point, or an allocation went wrong — is reported at once,
as HDFS datanodes' block reports let a new namenode find stale replicas.
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
from typing import NamedTuple

from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.datanode.inflight import InflightWrites, run_to_end
from plasmafs.datanode.ratelimit import RateLimit
from plasmafs.datanode.volume import Owner, Volume, owner_at

log = logging.getLogger(__name__)

PIECE_BYTES = 1024 * 1024  # verified per read request (and taken from the rate at a time)
OWNER_BATCH = 1024  # used ranges whose stamps one read-thread task compares


class UsedRange(NamedTuple):
    """Blocks a committed file uses, and the owner of the first (None: not known)."""

    start: int
    blocks: int
    owner: Owner | None = None


# Where a page of used ranges begins: after the range that starts at this block and
# is named by this file at this index (START: from the first range).
UsedCursor = tuple[int, int, int]
START: UsedCursor = (0, 0, 0)
# cursor -> (the page after it, the cursor of the next page; None: no more)
UsedBlocks = Callable[[UsedCursor], Awaitable[tuple[list[UsedRange], UsedCursor | None]]]


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
        self.foreign_blocks = 0  # of those, blocks holding another owner's data
        self.owner_checks = 0  # owner checks completed (each pass has one)
        self.owners_due = asyncio.Event()  # set: check every owner now (a registration)
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

    async def run_owner_checks(self) -> None:
        """Check every used block's owner whenever `owners_due` is set, until cancelled."""
        while True:
            await self.owners_due.wait()
            self.owners_due.clear()
            try:
                await self._check_owners(await self._used_ranges(), "owner check")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("owner check stopped: %s; next try at the next registration", exc)

    async def wait_passes(self, count: int) -> None:
        """Wait until `count` passes have completed."""
        async with self._passed:
            await self._passed.wait_for(lambda: self.passes >= count)

    async def scrub_pass(self) -> None:
        """One pass over every used block."""
        ranges = await self._used_ranges()
        self.pass_blocks = sum(r.blocks for r in ranges)
        self.pass_verified = self.pass_skipped = 0
        piece = max(1, PIECE_BYTES // self.volume.info.blocksize)
        bad_before = self.corrupt_blocks
        await self._check_owners(ranges, "scrub")
        for start, count, _ in ranges:
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

    async def _used_ranges(self) -> list[UsedRange]:
        capacity = self.volume.info.capacity_blocks
        ranges: list[UsedRange] = []
        cursor: UsedCursor | None = START
        while cursor is not None:
            page, cursor = await self.used_blocks(cursor)
            for used in page:
                count = min(used.blocks, capacity - used.start)  # their records, our volume
                if count > 0:
                    ranges.append(used._replace(blocks=count))
            if not page:
                break
        return ranges

    async def _check_owners(self, ranges: list[UsedRange], why: str) -> None:
        """Report the blocks of `ranges` whose stamp is another owner's. Blocks being
        written are skipped, and a block written while it was checked is not reported:
        what the namenode listed may have been freed and written again since (blocks
        freed wait out every read ticket before reuse, so that takes a while)."""
        for at in range(0, len(ranges), OWNER_BATCH):
            idle = [
                (start, count, owner_at(used.owner, start - used.start))
                for used in ranges[at : at + OWNER_BATCH]
                if used.owner is not None
                for start, count in self.inflight.idle_runs(used.start, used.blocks)
            ]
            if not idle:
                continue
            mark = self.inflight.mark()
            foreign = await run_to_end(self.reader, self.volume.foreign_blocks, idle)
            confirmed = [(b, o) for b, o in foreign if not self.inflight.touched(b, 1, since=mark)]
            if not confirmed:
                continue
            block, owner = confirmed[0]
            log.warning(
                "%d blocks of volume %s hold data written since for another file or version "
                "(the first, block %d, is not block %d of inode %d, generation %d, any more)",
                len(confirmed), self.volume.info.identity, block, owner[2], owner[0], owner[1],
            )  # fmt: skip
            self.corrupt_blocks += len(confirmed)
            self.foreign_blocks += len(confirmed)
            for start, count in _runs([b for b, _ in confirmed]):
                reason = f"{why}: holds another file's or version's data (owner stamp)"
                self.report(pb.BadBlocks(block_start=start, block_count=count, reason=reason))
        self.owner_checks += 1

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
