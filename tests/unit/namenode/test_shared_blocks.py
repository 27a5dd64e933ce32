"""Reference counts of shared block ranges, and the allocator's decisions on dropped
references deferred while a snapshot changes."""

from __future__ import annotations

import math
import time

from plasmafs.namenode.allocator import Allocator
from plasmafs.namenode.shared_blocks import SharedBlocks


def test_a_range_nobody_shares_is_freed_whole() -> None:
    shared = SharedBlocks()
    assert shared.unshare(1, 10, 5) == [(10, 5)]
    assert not shared


def test_shared_blocks_are_freed_by_the_last_reference_only() -> None:
    shared = SharedBlocks()
    shared.share_all([(1, 0, 10)])  # a snapshot of a file on blocks 0-9
    assert shared.shared_blocks(1) == 10
    assert shared.is_shared(1, 9, 5) and not shared.is_shared(1, 10, 5)
    assert not shared.is_shared(2, 0, 10)
    assert shared.unshare(1, 0, 10) == []  # the live file drops them: the snapshot keeps
    assert shared.unshare(1, 0, 10) == [(0, 10)]  # the snapshot goes: free
    assert not shared


def test_partly_shared_ranges_free_exactly_the_unshared_part() -> None:
    shared = SharedBlocks()
    shared.share_all([(1, 4, 4)])
    shared.share_all([(1, 6, 4)])  # blocks 6-7 shared three times, 4-5 and 8-9 twice
    assert shared.extra_blocks() == 2 + 2 * 2 + 2
    assert shared.unshare(1, 0, 12) == [(0, 4), (10, 2)]
    assert shared.freed_by([(1, 0, 12)]) == [(1, 0, 6), (1, 8, 4)]  # counts unchanged
    assert shared.unshare_all([(1, 4, 6)]) == [(1, 4, 2), (1, 8, 2)]
    assert shared.unshare(1, 6, 2) == [(6, 2)]
    assert not shared


def test_counts_are_rebuilt_from_extent_rows() -> None:
    rows = [(1, 0, 8), (1, 0, 8), (1, 4, 2), (2, 0, 3), (2, 3, 3)]
    shared = SharedBlocks.from_rows(rows)
    assert shared.shared_blocks(1) == 8 and shared.shared_blocks(2) == 0
    assert shared.unshare(1, 0, 8) == []
    assert shared.unshare(1, 4, 2) == []
    assert shared.unshare(1, 0, 8) == [(0, 8)]


def test_datanodes_are_counted_apart() -> None:
    shared = SharedBlocks()
    shared.share_all([(1, 0, 4), (2, 0, 4)])
    shared.forget(2)
    assert shared.unshare(2, 0, 4) == [(0, 4)]
    assert shared.unshare(1, 0, 4) == []


def test_drops_wait_while_a_snapshot_is_taken_and_then_see_its_counts() -> None:
    allocator = Allocator()
    allocator.add_datanode(1, 100, [(0, 10), (50, 5)])
    assert allocator.free_blocks(1) == 85
    allocator.defer_drops()
    allocator.drop_reference(1, 0, 10, 0.0)  # a commit dropped the live file's blocks
    assert allocator.free_blocks(1) == 85 and allocator.deferred_blocks(1) == 10
    allocator.shared.share_all([(1, 0, 4)])  # the snapshot, taken before, names 0-3
    allocator.resume_drops()
    assert allocator.free_blocks(1) == 91 and allocator.deferred_blocks(1) == 0
    allocator.drop_reference(1, 0, 4, math.inf)  # the snapshot goes; held (dead node)
    assert allocator.free_blocks(1) == 91 and allocator.held_blocks() == 4
    allocator.drop_reference(1, 50, 5, time.time() + 60)  # read tickets may be out
    assert allocator.free_blocks(1) == 91 and allocator.held_blocks() == 9


def test_releases_loaded_for_blocks_extents_still_name_are_not_held() -> None:
    allocator = Allocator()
    allocator.add_datanode(1, 100, [(0, 20), (40, 10)])  # extents and releases as loaded
    future = time.time() + 60
    allocator.quarantine(1, 0, 20, future)  # released by the live file, but 5-14 are named
    allocator.quarantine(1, 40, 10, math.inf)  # held for a dead datanode, all named
    allocator.keep_named([(1, 5, 5), (1, 8, 7), (1, 38, 20)])
    assert allocator.held_blocks() == 10  # 0-4 and 15-19 only
    assert allocator.free_blocks(1, now=future + 1) == 70 + 10
    allocator.unhold(1, 0.0)
    assert allocator.free_blocks(1) == 80  # 40-49 stay used: extents name them
