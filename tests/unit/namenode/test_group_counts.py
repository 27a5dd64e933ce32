"""The rules of what a block group needs (plasmafs.namenode.replica_health.GroupCounts) and the
packing of replica counts a scan receives from PostgreSQL."""

from __future__ import annotations

import pytest

from plasmafs.namenode.replica_health import CLEANUP, ONE_LIVE, UNDER, VERY_UNDER, GroupCounts
from plasmafs.namenode.replica_store import unpack_pattern


def counts(
    replication: int,
    live: int,
    *,
    suspect: int = 0,
    droppable: int = 0,
    draining: int = 0,
    room: int = 1,
    corrupt: bool = False,
) -> GroupCounts:
    return GroupCounts(
        8, replication, live, suspect, droppable, live + draining, room, corrupt=corrupt
    )


def test_a_healthy_group_needs_nothing() -> None:
    c = counts(2, 2, room=1)
    assert (c.under_replicated, c.missing, c.wanted, c.priority, c.tracked) == (
        False,
        False,
        0,
        None,
        False,
    )


@pytest.mark.parametrize(
    ("replication", "live", "priority"),
    [(2, 1, ONE_LIVE), (3, 1, ONE_LIVE), (10, 2, VERY_UNDER), (3, 2, UNDER), (10, 4, UNDER)],
)
def test_copies_are_queued_by_urgency(replication: int, live: int, priority: int) -> None:
    c = counts(replication, live, droppable=replication - live)
    assert c.priority == priority
    assert c.wanted == replication - live


def test_no_copy_replaces_a_suspect_replica() -> None:
    c = counts(2, 1, suspect=1)
    assert c.under_replicated and c.wanted == 0 and c.priority is None and c.tracked


def test_nothing_to_copy_from_or_to() -> None:
    assert counts(2, 0, droppable=2).priority is None  # missing: no source
    assert counts(2, 0, droppable=2).missing
    assert counts(2, 1, droppable=1, room=0).priority == CLEANUP  # no target: drop first


def test_a_draining_replica_is_a_source_but_not_live() -> None:
    c = counts(2, 1, droppable=1, draining=1)
    assert c.under_replicated and c.priority == ONE_LIVE


def test_surplus_and_replaced_replicas_are_cleaned_up() -> None:
    assert counts(1, 3).priority == CLEANUP  # setrep down
    assert counts(2, 2, droppable=1).priority == CLEANUP  # a lost one replaced
    assert counts(2, 2, suspect=1).priority is None  # a suspect one is kept


def test_a_corrupt_replica_makes_room_when_no_other_datanode_is_left() -> None:
    c = counts(3, 2, droppable=1, room=0, corrupt=True)
    assert c.needs_cleanup and c.priority == CLEANUP
    assert counts(3, 2, droppable=1, room=1, corrupt=True).priority == UNDER


def test_unpacking_a_pattern_inverts_the_packing() -> None:
    fields = (16384, 32, 63, 1, 2, 3, 4)
    block_count, replication, *small = fields
    pattern = block_count << 36 | replication << 30
    for value, shift in zip(small, (24, 18, 12, 6, 0), strict=True):
        pattern |= value << shift
    assert pattern < 2**63
    assert unpack_pattern(pattern) == fields
