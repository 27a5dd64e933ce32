"""The allocator in process: contiguous runs, distinct datanodes, all-or-nothing,
release and held-back blocks."""

from __future__ import annotations

import time

import pytest

from plasmafs.core.errors import NoSpaceError
from plasmafs.namenode.allocator import RUN, Allocator


def _cluster(capacity: int = 1024, datanodes: int = 3) -> Allocator:
    allocator = Allocator()
    for d in range(1, datanodes + 1):
        allocator.add_datanode(d, capacity, [])
    return allocator


def test_replicas_go_to_distinct_datanodes_in_long_runs() -> None:
    allocator = _cluster()
    placements = allocator.allocate([1, 2, 3], 2, 3 * RUN, {})
    assert sum(p.count for p in placements) == 3 * RUN
    for p in placements:
        assert len(set(p.datanodes)) == 2
        assert p.count >= RUN or p is placements[-1]
    assert allocator.free_blocks() == 3 * 1024 - 2 * 3 * RUN


def test_used_ranges_are_not_handed_out() -> None:
    allocator = Allocator()
    allocator.add_datanode(1, 100, [(0, 40), (60, 40)])
    assert allocator.free_blocks(1) == 20
    (p,) = allocator.allocate([1], 1, 20, {})
    assert (p.starts, p.count) == ((40,), 20)


def test_a_request_that_cannot_be_met_reserves_nothing() -> None:
    allocator = _cluster(capacity=100, datanodes=2)
    with pytest.raises(NoSpaceError):
        allocator.allocate([1, 2], 2, 101, {})
    with pytest.raises(NoSpaceError):
        allocator.allocate([1], 2, 1, {})  # one live datanode for two replicas
    assert allocator.free_blocks() == 200


def test_a_hint_continues_the_previous_run() -> None:
    allocator = _cluster(capacity=1000, datanodes=1)
    (first,) = allocator.allocate([1], 1, 10, {})
    allocator.allocate([1], 1, 10, {})  # another file right after it
    hints = {1: first.starts[0] + first.count}
    (again,) = allocator.allocate([1], 1, 5, dict(hints))
    assert again.starts[0] != hints[1]  # taken by the other file: placed elsewhere
    allocator.release(1, 10, 10)
    (cont,) = allocator.allocate([1], 1, 5, {1: 10})
    assert cont.starts == (10,)


def test_released_blocks_are_free_again_and_double_frees_are_caught() -> None:
    allocator = _cluster(capacity=10, datanodes=1)
    (p,) = allocator.allocate([1], 1, 10, {})
    allocator.release(1, p.starts[0], 10)
    assert allocator.free_blocks() == 10
    with pytest.raises(AssertionError, match="double free"):
        allocator.release(1, 0, 1)


def test_held_blocks_come_back_when_their_time_is_over() -> None:
    allocator = _cluster(capacity=10, datanodes=2)
    allocator.allocate([1, 2], 1, 20, {})
    allocator.quarantine(1, 0, 10, time.time() + 3600)
    allocator.quarantine(2, 0, 10, time.time() - 1)
    assert allocator.held_blocks() == 10
    assert allocator.held_blocks([2]) == 0
    assert allocator.free_blocks(1) == 0
    assert allocator.free_blocks(2) == 10


def test_replicas_go_to_distinct_locations_when_there_are_enough() -> None:
    allocator = _cluster(capacity=64 * RUN, datanodes=6)
    for d in range(1, 7):
        allocator.set_location(d, "/rack-a" if d <= 4 else "/rack-b")  # four and two
    for _ in range(40):
        for p in allocator.allocate(list(range(1, 7)), 2, RUN, {}):
            assert {allocator.location(d) for d in p.datanodes} == {"/rack-a", "/rack-b"}
    # Three replicas on two racks: both racks, and three distinct datanodes.
    for p in allocator.allocate(list(range(1, 7)), 3, RUN, {}):
        assert len(set(p.datanodes)) == 3
        assert {allocator.location(d) for d in p.datanodes} == {"/rack-a", "/rack-b"}


def test_datanodes_of_different_sizes_fill_to_the_same_fraction() -> None:
    allocator = Allocator()
    sizes = {1: 100 * RUN, 2: 150 * RUN, 3: 300 * RUN, 4: 350 * RUN}
    for d, capacity in sizes.items():
        allocator.add_datanode(d, capacity, [])
    for _ in range(300):
        allocator.allocate(list(sizes), 2, RUN, {})
    fractions = [allocator.used_fraction(d) for d in sizes]
    assert max(fractions) - min(fractions) <= 0.02, fractions


def test_a_rack_that_is_full_leaves_replicas_on_the_others() -> None:
    allocator = _cluster(capacity=4 * RUN, datanodes=3)
    allocator.set_location(1, "/rack-a")
    allocator.set_location(2, "/rack-b")
    allocator.set_location(3, "/rack-b")
    allocator.allocate([1], 1, 4 * RUN, {})  # rack-a is full now
    placements = allocator.allocate([1, 2, 3], 2, RUN, {})
    assert [set(p.datanodes) for p in placements] == [{2, 3}]
