"""Block allocation: each datanode's free blocks as sorted runs, kept in memory.

New data is placed in long contiguous runs (at least RUN blocks where space allows),
alternating across datanodes run by run, each replica on a distinct datanode, and
continuing right after the file's previous blocks on a datanode when that space is
free (PlasmaFS's placement). Each run goes to the datanodes with the smallest used
fraction, so that datanodes of any size fill alike, and its replicas to as many
distinct locations (racks or zones) as there are: losing a whole rack loses no block
with replication two or more while another rack has room. Blocks released by a
commit while read tickets for them may live are held back (in quarantine) until those
tickets have expired.

The allocator is rebuilt at namenode start from what PostgreSQL says is in use
(extents and quarantined ranges); a transaction's reservations live only here, so a
crash frees them by construction. Blocks of a dead datanode's replaced replicas are
quarantined with no end until that datanode returns.

It counts reservations per datanode (blocks reserved and neither committed nor given
back), so that free + reserved + what PostgreSQL records as used adds up to the
capacity: fsck checks it.
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field

from plasmafs.core.errors import NoSpaceError
from plasmafs.core.value_checks import DEFAULT_LOCATION
from plasmafs.namenode.shared_blocks import SharedBlocks

RUN = 128


@dataclass
class _FreeRuns:
    """Free runs of one datanode: sorted starts and start -> length."""

    starts: list[int] = field(default_factory=list)
    length: dict[int, int] = field(default_factory=dict)
    total: int = 0

    def add(self, start: int, count: int) -> None:
        """Return blocks to the free list, merging with neighbours."""
        i = bisect.bisect_left(self.starts, start)
        if i > 0:
            prev = self.starts[i - 1]
            if prev + self.length[prev] > start:
                raise AssertionError(f"double free of block {start}")
        if i < len(self.starts) and start + count > self.starts[i]:
            raise AssertionError(f"double free of block {self.starts[i]}")
        self.total += count
        if i < len(self.starts) and start + count == self.starts[i]:
            nxt = self.starts.pop(i)
            count += self.length.pop(nxt)
        if i > 0 and self.starts[i - 1] + self.length[self.starts[i - 1]] == start:
            prev = self.starts[i - 1]
            self.length[prev] += count
            return
        self.starts.insert(i, start)
        self.length[start] = count

    def take(self, start: int, count: int) -> None:
        """Remove [start, start+count), which must lie inside one free run."""
        i = bisect.bisect_right(self.starts, start) - 1
        run = self.starts[i]
        run_len = self.length[run]
        assert run <= start and start + count <= run + run_len, "taking non-free blocks"
        del self.length[run]
        self.starts.pop(i)
        if start > run:
            self.starts.insert(i, run)
            self.length[run] = start - run
            i += 1
        tail = run + run_len - (start + count)
        if tail:
            self.starts.insert(i, start + count)
            self.length[start + count] = tail
        self.total -= count

    def best(self, want: int, hint: int | None) -> tuple[int, int] | None:
        """Where to take up to `want` blocks: after `hint` if free, else the smallest run
        that fits, else the largest run."""
        if hint is not None and hint in self.length:
            return hint, min(want, self.length[hint])
        fit: tuple[int, int] | None = None
        largest: tuple[int, int] | None = None
        for start in self.starts:
            n = self.length[start]
            if n >= want and (fit is None or n < fit[1]):
                fit = (start, n)
            if largest is None or n > largest[1]:
                largest = (start, n)
        choice = fit or largest
        return (choice[0], min(want, choice[1])) if choice else None


@dataclass(frozen=True, slots=True)
class Placement:
    """`count` file blocks placed at `starts[i]` on `datanodes[i]`, one per replica."""

    count: int
    datanodes: tuple[int, ...]
    starts: tuple[int, ...]


class Allocator:
    """Free space of every datanode."""

    def __init__(self) -> None:
        self._free: dict[int, _FreeRuns] = {}
        self._capacity: dict[int, int] = {}
        self._quarantine: list[tuple[float, int, int, int]] = []  # (until, dn, start, count)
        self._reserved: dict[int, int] = {}
        # Blocks of commits whose outcome is unknown: used if PostgreSQL has the commit,
        # else leaked; neither free nor reserved until the next load.
        self._in_doubt: dict[int, int] = {}
        self._location: dict[int, str] = {}
        self._turn = 0
        # Blocks several extents name (snapshots): freed when the last one drops them.
        self.shared = SharedBlocks()
        # While a snapshot is taken or deleted: references dropped meanwhile, applied
        # once its own counts are in (`defer_drops`).
        self._deferred: list[tuple[int, int, int, float]] | None = None

    def add_datanode(self, datanode: int, capacity: int, used: list[tuple[int, int]]) -> None:
        """Know a datanode with `capacity` blocks of which the ranges `used` are taken."""
        runs = _FreeRuns()
        position = 0
        for start, count in sorted(used):
            if start > position:
                runs.add(position, start - position)
            position = max(position, start + count)
        if position < capacity:
            runs.add(position, capacity - position)
        self._free[datanode] = runs
        self._capacity[datanode] = capacity
        self._reserved[datanode] = 0

    def set_location(self, datanode: int, location: str) -> None:
        """The rack or zone a datanode is in."""
        self._location[datanode] = location

    def location(self, datanode: int) -> str:
        """The rack or zone a datanode is in."""
        return self._location.get(datanode, DEFAULT_LOCATION)

    def used_fraction(self, datanode: int) -> float:
        """Its blocks not free (used, reserved or held back) over its capacity."""
        capacity = self._capacity.get(datanode, 0)
        return 1.0 - self._free[datanode].total / capacity if capacity else 1.0

    def remove_datanode(self, datanode: int) -> None:
        """Forget a datanode (its held blocks included)."""
        self._free.pop(datanode, None)
        self._location.pop(datanode, None)
        self._capacity.pop(datanode, None)
        self._reserved.pop(datanode, None)
        self._in_doubt.pop(datanode, None)
        self.shared.forget(datanode)
        self._quarantine = [q for q in self._quarantine if q[1] != datanode]

    def knows(self, datanode: int) -> bool:
        """True once `add_datanode` was called for it."""
        return datanode in self._free

    def free_blocks(self, datanode: int | None = None, now: float | None = None) -> int:
        """Free (not quarantined) blocks of one datanode or all (quarantines ending by
        `now`, default the current time, counted as free)."""
        self._expire(now)
        if datanode is not None:
            return self._free[datanode].total
        return sum(r.total for r in self._free.values())

    def free_now(self, datanode: int) -> int:
        """Free blocks of a datanode as last counted (no held-back range expired first:
        for frequent checks; 0 for one not known)."""
        runs = self._free.get(datanode)
        return runs.total if runs is not None else 0

    def held_after(self, now: float) -> dict[int, int]:
        """Per datanode, its released blocks still held back after `now` (those whose
        time is over are free first): one pass, for every datanode at once."""
        self._expire(now)
        held: dict[int, int] = {}
        for until, d, _, count in self._quarantine:
            if until > now:
                held[d] = held.get(d, 0) + count
        return held

    def quarantined_blocks(self, datanode: int, now: float) -> int:
        """Released blocks of a datanode still held back after `now`."""
        return sum(q[3] for q in self._quarantine if q[1] == datanode and q[0] > now)

    def reserved_blocks(self, datanode: int) -> int:
        """Blocks reserved on a datanode and neither committed nor given back."""
        return self._reserved.get(datanode, 0)

    def keep_in_doubt(self, datanode: int, count: int, *, reserved: bool) -> None:
        """`count` blocks of a commit whose outcome is unknown stay from use (they are
        not free, and, if `reserved`, no longer counted reserved) until the allocator is
        loaded again from PostgreSQL."""
        if datanode not in self._free:
            return
        if reserved:
            self._reserved[datanode] -= count
        self._in_doubt[datanode] = self._in_doubt.get(datanode, 0) + count

    def in_doubt_blocks(self, datanode: int) -> int:
        """Blocks kept from use because a commit's outcome is unknown."""
        return self._in_doubt.get(datanode, 0)

    def held_blocks(self, datanodes: list[int] | None = None) -> int:
        """Released blocks held back until read tickets for them expire (of the given,
        default all, datanodes)."""
        self._expire()
        keep = None if datanodes is None else set(datanodes)
        return sum(q[3] for q in self._quarantine if keep is None or q[1] in keep)

    def capacity_blocks(self, datanodes: list[int] | None = None) -> int:
        """Total blocks of the given (default: all) datanodes."""
        keys = self._capacity if datanodes is None else datanodes
        return sum(self._capacity.get(d, 0) for d in keys)

    def allocate(
        self, live: list[int], replication: int, count: int, hints: dict[int, int]
    ) -> list[Placement]:
        """Reserve `count` blocks on `replication` distinct datanodes each.

        `hints` maps a datanode to the block right after the file's last block there.
        All or nothing: raises NoSpaceError (reserving nothing) if it cannot be done.
        """
        self._expire()
        candidates = [d for d in live if d in self._free]
        if len(candidates) < replication:
            raise NoSpaceError(
                f"replication {replication} needs {replication} live datanodes, "
                f"{len(candidates)} are live"
            )
        placed: list[Placement] = []
        remaining = count
        try:
            while remaining:
                # Runs go to the datanodes least used, taking turns among equals: data
                # alternates, and space stays balanced for later replicas.
                turn = self._turn % len(candidates)
                order = sorted(candidates[turn:] + candidates[:turn], key=self.used_fraction)
                chosen = self._spread([d for d in order if self._free[d].total > 0], replication)
                if len(chosen) < replication:
                    raise NoSpaceError(
                        f"not enough free space for {count} blocks with replication {replication}"
                    )
                want = min(remaining, RUN)
                spots = [self._free[d].best(want, hints.get(d)) for d in chosen]
                n = min(s[1] for s in spots if s is not None)
                starts = tuple(s[0] for s in spots if s is not None)
                for d, start in zip(chosen, starts, strict=True):
                    self._take(d, start, n)
                    hints[d] = start + n
                _append(placed, Placement(n, tuple(chosen), starts))
                remaining -= n
                self._turn += 1
        except NoSpaceError:
            for p in placed:
                for d, s in zip(p.datanodes, p.starts, strict=True):
                    self.give_back(d, s, p.count)
            raise
        return placed

    def _spread(self, order: list[int], replication: int) -> list[int]:
        """`replication` datanodes from `order`, first each in a location not chosen yet,
        then (when there are fewer locations) the next in order."""
        chosen: list[int] = []
        places: set[str] = set()
        for d in order:
            place = self.location(d)
            if place not in places:
                chosen.append(d)
                places.add(place)
                if len(chosen) == replication:
                    return chosen
        for d in order:
            if d not in chosen:
                chosen.append(d)
                if len(chosen) == replication:
                    break
        return chosen

    def allocate_on(self, datanode: int, count: int, hint: int | None) -> int | None:
        """Reserve one contiguous run of `count` blocks on `datanode` (right after `hint`
        when that is free); its first block, or None if no run is long enough."""
        self._expire()
        runs = self._free.get(datanode)
        if runs is None:
            return None
        if hint is not None and runs.length.get(hint, 0) >= count:
            start = hint
        else:
            fits = [(n, s) for s, n in runs.length.items() if n >= count]
            if not fits:
                return None
            start = min(fits)[1]
        self._take(datanode, start, count)
        return start

    def _take(self, datanode: int, start: int, count: int) -> None:
        self._free[datanode].take(start, count)
        self._reserved[datanode] = self._reserved.get(datanode, 0) + count

    def settle(self, datanode: int, count: int) -> None:
        """Reserved blocks were committed: they are used, no longer reserved."""
        if datanode in self._reserved:
            self._reserved[datanode] -= count

    def give_back(self, datanode: int, start: int, count: int) -> None:
        """Reserved blocks that were never committed: free again at once."""
        if datanode in self._free:
            self._reserved[datanode] -= count
            self._free[datanode].add(start, count)

    def release(self, datanode: int, start: int, count: int) -> None:
        """Committed blocks no longer used: free again at once."""
        if datanode in self._free:
            self._free[datanode].add(start, count)

    def drop_reference(self, datanode: int, start: int, count: int, until: float) -> None:
        """A committed extent no longer names these blocks: those no other extent names
        are free again once `until` (time.time(); infinity: until `unhold`) has passed."""
        if self._deferred is not None:
            self._deferred.append((datanode, start, count, until))
            return
        shared = self.shared
        for s, n in shared.unshare(datanode, start, count) if shared else [(start, count)]:
            if until <= time.time():
                self.release(datanode, s, n)
            else:
                self.quarantine(datanode, s, n, until)

    def defer_drops(self) -> None:
        """Hold back `drop_reference` decisions until `resume_drops`: a snapshot being
        taken reads PostgreSQL at one instant, and a block a commit dropped after that
        instant is one the snapshot names, which it counts only once taken."""
        assert self._deferred is None, "one snapshot change at a time"
        self._deferred = []

    def resume_drops(self) -> None:
        """Decide the references dropped since `defer_drops`, with the counts as they
        are now."""
        deferred, self._deferred = self._deferred or [], None
        for datanode, start, count, until in deferred:
            self.drop_reference(datanode, start, count, until)

    def deferred_blocks(self, datanode: int) -> int:
        """Blocks whose dropped references wait for a snapshot change to end."""
        return sum(c for d, _, c, _ in self._deferred or () if d == datanode)

    def quarantine(self, datanode: int, start: int, count: int, until: float) -> None:
        """Blocks a commit released: free again once `until` (time.time()) has passed
        (never, with infinity, until `unhold`)."""
        self._quarantine.append((until, datanode, start, count))

    def keep_named(self, named: list[tuple[int, int, int]]) -> None:
        """Take the ranges (datanode, start, count) that extents name out of the held
        releases: a release recorded for a block a snapshot still names (PostgreSQL
        records every release, shared or not) must never make it free."""
        by_datanode: dict[int, list[tuple[int, int]]] = {}
        for d, s, c in named:
            by_datanode.setdefault(d, []).append((s, s + c))
        merged = {d: _merged(ranges) for d, ranges in by_datanode.items()}
        kept: list[tuple[float, int, int, int]] = []
        for until, d, s, c in self._quarantine:
            for start, end in _without(s, s + c, merged.get(d, [])):
                kept.append((until, d, start, end - start))
        self._quarantine = kept

    def unhold(self, datanode: int, until: float) -> None:
        """A dead datanode returned: its held blocks become free after `until`."""
        self._quarantine = [
            (until, d, s, c) if d == datanode and u == math.inf else (u, d, s, c)
            for u, d, s, c in self._quarantine
        ]

    def _expire(self, now: float | None = None) -> None:
        if not self._quarantine:
            return
        now = time.time() if now is None else now
        keep = []
        for item in self._quarantine:
            until, d, s, c = item
            if until <= now and d in self._free:
                self._free[d].add(s, c)
            else:
                keep.append(item)
        self._quarantine = keep


def _append(placed: list[Placement], new: Placement) -> None:
    """Add a placement, merging it into the previous one when it continues it on the
    same datanodes (long contiguous runs make few extents)."""
    if placed:
        last = placed[-1]
        if last.datanodes == new.datanodes and all(
            s == ls + last.count for s, ls in zip(new.starts, last.starts, strict=True)
        ):
            placed[-1] = Placement(last.count + new.count, last.datanodes, last.starts)
            return
    placed.append(new)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, overlapping or touching (start, end) ranges joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _without(start: int, end: int, merged: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) less the sorted, disjoint ranges `merged`."""
    pieces: list[tuple[int, int]] = []
    i = bisect.bisect_right(merged, (start, math.inf)) - 1
    i = max(i, 0)
    position = start
    while i < len(merged) and merged[i][0] < end:
        lo, hi = merged[i]
        if hi > position:
            if lo > position:
                pieces.append((position, lo))
            position = max(position, hi)
        i += 1
    if position < end:
        pieces.append((position, end))
    return pieces
