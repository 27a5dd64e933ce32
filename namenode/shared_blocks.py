"""Blocks that several files' extents name at once (a live file and its snapshots).

A snapshot's files name the blocks the live files named when it was taken; the blocks
are never copied. So a block range has a reference count: one for every extent row
naming it. Nearly every block has exactly one, so only the rest are kept here, as
disjoint segments per datanode with how many references they have beyond the first
(`extra`). When a commit drops an extent, `unshare` says which of its blocks nobody
names any more (to be freed) and counts the others down; a snapshot's creation counts
its blocks up (`share_all`). The counts are rebuilt at namenode start from the extent
rows themselves (`from_rows`), which stay the truth.

The decisions are made when a commit is published, which is in memory and in one
event loop; but a snapshot is taken by reading PostgreSQL at one instant, and a block
a commit drops after that instant is one the snapshot names: while a snapshot is taken
the allocator defers the decisions (`Allocator.defer_drops`) until the snapshot's own
counts are in. Commits are not held up meanwhile; only their freed space waits.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable


class SharedBlocks:
    """Reference counts beyond one of block ranges, per datanode."""

    def __init__(self) -> None:
        # datanode -> (segment starts, segment ends, extra references), sorted, disjoint
        self._segments: dict[int, tuple[list[int], list[int], list[int]]] = {}

    def __bool__(self) -> bool:
        return bool(self._segments)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, int, int]]) -> SharedBlocks:
        """The counts of extent rows (datanode, block start, block count)."""
        shared = cls()
        by_datanode: dict[int, list[tuple[int, int]]] = {}
        for datanode, start, count in rows:
            by_datanode.setdefault(datanode, []).append((start, start + count))
        for datanode, ranges in by_datanode.items():
            covered, _ = _sweep([], ranges, 1)
            extra = [(s, e, n - 1) for s, e, n in covered if n > 1]
            if extra:
                shared._segments[datanode] = _columns(extra)
        return shared

    def extra_blocks(self) -> int:
        """Block references beyond the first, summed over every datanode."""
        return sum(
            sum((e - s) * n for s, e, n in zip(*seg, strict=True))
            for seg in self._segments.values()
        )

    def shared_blocks(self, datanode: int) -> int:
        """Blocks of a datanode named by more than one extent row."""
        seg = self._segments.get(datanode)
        return sum(e - s for s, e in zip(seg[0], seg[1], strict=True)) if seg else 0

    def is_shared(self, datanode: int, start: int, count: int) -> bool:
        """True if some block of the range is named by more than one extent."""
        seg = self._segments.get(datanode)
        if seg is None:
            return False
        i = bisect.bisect_right(seg[1], start)
        return i < len(seg[0]) and seg[0][i] < start + count

    def share_all(self, rows: Iterable[tuple[int, int, int]]) -> None:
        """One more reference to each of the ranges (datanode, start, count)."""
        for datanode, ranges in _by_datanode(rows).items():
            old = self._rows(datanode)
            new, _ = _sweep(old, ranges, 1)
            self._store(datanode, new)

    def unshare(self, datanode: int, start: int, count: int) -> list[tuple[int, int]]:
        """One reference fewer to [start, start + count): the sub-ranges (start, count)
        nobody names any more, to be freed."""
        seg = self._segments.get(datanode)
        end = start + count
        if seg is None:
            return [(start, count)]
        starts, ends, extra = seg
        i = bisect.bisect_right(ends, start)
        j = bisect.bisect_left(starts, end)
        if i >= j:
            return [(start, count)]
        window = list(zip(starts[i:j], ends[i:j], extra[i:j], strict=True))
        new, freed = _sweep(window, [(start, end)], -1)
        starts[i:j] = [s for s, _, _ in new]
        ends[i:j] = [e for _, e, _ in new]
        extra[i:j] = [n for _, _, n in new]
        if not starts:
            del self._segments[datanode]
        return [(s, e - s) for s, e in freed]

    def unshare_all(self, rows: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """One reference fewer to each of the ranges, which must be disjoint per
        datanode: the sub-ranges (datanode, start, count) nobody names any more."""
        freed_all: list[tuple[int, int, int]] = []
        for datanode, ranges in _by_datanode(rows).items():
            new, freed = _sweep(self._rows(datanode), ranges, -1)
            self._store(datanode, new)
            freed_all += [(datanode, s, e - s) for s, e in freed]
        return freed_all

    def freed_by(self, rows: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """What `unshare_all(rows)` would free, the counts left as they are."""
        freed_all: list[tuple[int, int, int]] = []
        for datanode, ranges in _by_datanode(rows).items():
            _, freed = _sweep(self._rows(datanode), ranges, -1)
            freed_all += [(datanode, s, e - s) for s, e in freed]
        return freed_all

    def forget(self, datanode: int) -> None:
        """Drop the counts of a datanode that is gone."""
        self._segments.pop(datanode, None)

    def _rows(self, datanode: int) -> list[tuple[int, int, int]]:
        seg = self._segments.get(datanode)
        return list(zip(*seg, strict=True)) if seg else []

    def _store(self, datanode: int, rows: list[tuple[int, int, int]]) -> None:
        if rows:
            self._segments[datanode] = _columns(rows)
        else:
            self._segments.pop(datanode, None)


def _by_datanode(rows: Iterable[tuple[int, int, int]]) -> dict[int, list[tuple[int, int]]]:
    grouped: dict[int, list[tuple[int, int]]] = {}
    for datanode, start, count in rows:
        grouped.setdefault(datanode, []).append((start, start + count))
    return grouped


def _columns(rows: list[tuple[int, int, int]]) -> tuple[list[int], list[int], list[int]]:
    return [s for s, _, _ in rows], [e for _, e, _ in rows], [n for _, _, n in rows]


def _sweep(
    old: list[tuple[int, int, int]], ranges: list[tuple[int, int]], delta: int
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """Segments (start, end, extra) with `delta` added over `ranges`: those left with
    extra > 0 (adjacent equal ones merged), and the parts that fell below zero (with
    delta -1: ranges nobody else named)."""
    events: dict[int, int] = {}
    for s, e, n in old:
        events[s] = events.get(s, 0) + n
        events[e] = events.get(e, 0) - n
    for s, e in ranges:
        events[s] = events.get(s, 0) + delta
        events[e] = events.get(e, 0) - delta
    kept: list[tuple[int, int, int]] = []
    below: list[tuple[int, int]] = []
    value = 0
    points = sorted(events)
    for here, there in itertools.pairwise(points):
        value += events[here]
        if value > 0:
            if kept and kept[-1][1] == here and kept[-1][2] == value:
                kept[-1] = (kept[-1][0], there, value)
            else:
                kept.append((here, there, value))
        elif value < 0:
            if below and below[-1][1] == here:
                below[-1] = (below[-1][0], there)
            else:
                below.append((here, there))
    return kept, below
