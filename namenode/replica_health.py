"""The state of every replica, and what a block group needs to be healthy again.

A replica is live when its datanode is live and in normal service and none of its
blocks is known corrupt; otherwise it is suspect (its datanode missed heartbeats),
lost (silent longer than `lost_after`), corrupt, or decommissioning. Only live
replicas count in a file's actual replication. A group whose live replicas span fewer
locations (racks or zones) than its replication and the cluster's locations allow is
mis-replicated: one copy to a new location, then the surplus replica in a crowded one
dropped, mends it. Corrupt ranges are kept here in memory
(sorted per datanode) and in PostgreSQL's corrupt_blocks, which they are loaded from.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from plasmafs.core.attributes import ReplicaState
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.datanodes import NORMAL, DatanodeRegistry
from plasmafs.namenode.inode_records import ExtentRow

# Re-replication priorities, as HDFS's UnderReplicatedBlocks orders them.
ONE_LIVE, VERY_UNDER, UNDER, MISPLACED, CLEANUP = 0, 1, 2, 3, 4


@dataclass(frozen=True, slots=True)
class GroupCounts:
    """How many replicas of one block group are in each state, and the rules of what it
    needs (the one place they are decided, for scans and for single groups alike)."""

    block_count: int  # file blocks in the group
    replication: int
    live: int
    suspect: int  # on datanodes dead but not yet lost
    droppable: int  # lost, corrupt or draining: may go once the group allows it
    sources: int  # rows a copy may be read from (live or draining)
    room: int  # datanodes that may take new data and hold no replica of the group
    corrupt: bool
    spread_short: int = 0  # more locations its live replicas should span
    fresh_room: int = 0  # of `room`, those in a location holding no live replica

    @property
    def missing(self) -> bool:
        """No live replica."""
        return self.live == 0

    @property
    def under_replicated(self) -> bool:
        """Fewer live replicas than requested."""
        return self.live < self.replication

    @property
    def misplaced(self) -> bool:
        """Enough live replicas, in too few locations (HDFS's mis-replicated)."""
        return self.spread_short > 0 and not self.under_replicated

    @property
    def wanted(self) -> int:
        """Copies to make now: no copy replaces a suspect replica before it is lost (a
        datanode's restart must not start a flood of copies); a misplaced group wants
        one, to a new location, when there is one with room."""
        missing = max(0, self.replication - self.live - self.suspect)
        if not missing and self.misplaced and self.fresh_room and self.live == self.replication:
            return 1
        return missing

    @property
    def needs_cleanup(self) -> bool:
        """Rows to drop: surplus live ones, or lost, corrupt and draining ones once there
        are enough live ones, or once no other datanode is left to copy to (then the
        group is as replicated as the cluster allows, and a corrupt replica must make
        room for a good copy on its own datanode)."""
        have = self.live
        if have > self.replication:
            return True
        return (
            have >= 1
            and self.droppable > 0
            and (have >= self.replication or have + self.room < self.replication)
        )

    @property
    def priority(self) -> int | None:
        """Its place in the re-replication queue; None when nothing is to be done."""
        if self.wanted and self.sources and self.room:
            if self.live <= 1:
                return ONE_LIVE
            if self.live * 3 < self.replication:
                return VERY_UNDER
            return UNDER if self.under_replicated else MISPLACED
        if self.needs_cleanup:
            return CLEANUP
        return None

    @property
    def tracked(self) -> bool:
        """Worth remembering: not healthy, or work to do."""
        return self.under_replicated or self.corrupt or self.priority is not None


@dataclass(frozen=True, slots=True)
class GroupHealth:
    """One block group's rows by state, for choosing sources and rows to drop."""

    live: tuple[ExtentRow, ...]
    sources: tuple[ExtentRow, ...]  # rows a copy may be read from (live or draining)
    droppable: tuple[ExtentRow, ...]  # lost, corrupt or draining rows
    counts: GroupCounts
    states: tuple[tuple[ExtentRow, ReplicaState], ...]  # every row with its state


class ReplicaHealth:
    """Replica states from the datanodes' liveness and the corrupt ranges."""

    def __init__(self, registry: DatanodeRegistry) -> None:
        self.registry = registry
        self._corrupt: dict[int, list[tuple[int, int]]] = {}  # datanode -> sorted ranges

    def load_corrupt(self, ranges: Iterable[tuple[int, int, int]]) -> None:
        """Know these (datanode, start, count) ranges as corrupt."""
        for datanode, start, count in ranges:
            bisect.insort(self._corrupt.setdefault(datanode, []), (start, count))

    def forget_corrupt(self, datanode: int, start: int, count: int) -> None:
        """Blocks [start, start+count) of `datanode` were released: forget their
        corruption (their next user writes them anew)."""
        ranges = self._corrupt.get(datanode)
        if not ranges:
            return
        kept = [(s, n) for s, n in ranges if not start <= s < start + count]
        if kept:
            self._corrupt[datanode] = kept
        else:
            del self._corrupt[datanode]

    def forget_released(self, cs: ChangeSet) -> None:
        """A committed change set released blocks: forget their corruption, but where
        another extent (a snapshot's) still names them (told before the release is
        counted: the commit observers call this first)."""
        released = [*cs.released, *cs.released_held]
        shared = self.registry.allocator.shared
        for datanode, start, count in shared.freed_by(released) if shared else released:
            self.forget_corrupt(datanode, start, count)

    def forget_datanode(self, datanode: int) -> None:
        """A removed datanode: nothing of it is corrupt any more."""
        self._corrupt.pop(datanode, None)

    def is_corrupt(self, row: ExtentRow) -> bool:
        """True if a block of the replica is known corrupt."""
        ranges = self._corrupt.get(row.datanode_id)
        if not ranges:
            return False
        below_end = ranges[: bisect.bisect_left(ranges, (row.block_start + row.block_count, 0))]
        return any(start + count > row.block_start for start, count in below_end)

    def state(self, row: ExtentRow) -> ReplicaState:
        """The replica's state now."""
        registry, d = self.registry, row.datanode_id
        if self.is_corrupt(row):
            return ReplicaState.CORRUPT
        if not registry.alive(d):
            return ReplicaState.LOST if registry.lost(d) else ReplicaState.SUSPECT
        if registry.admin_state(d) != NORMAL:
            return ReplicaState.DECOMMISSIONING
        return ReplicaState.LIVE

    def assess(
        self, rows: Iterable[ExtentRow], replication: int, placeable: frozenset[int]
    ) -> GroupHealth:
        """The health of one block group; `placeable`: the datanodes new data may go to."""
        live: list[ExtentRow] = []
        sources: list[ExtentRow] = []
        droppable: list[ExtentRow] = []
        holders: set[int] = set()
        states: list[tuple[ExtentRow, ReplicaState]] = []
        suspect = 0
        corrupt = False
        block_count = 0
        for row in rows:
            block_count = row.block_count
            holders.add(row.datanode_id)
            state = self.state(row)
            states.append((row, state))
            if state is ReplicaState.LIVE:
                live.append(row)
                sources.append(row)
            elif state is ReplicaState.SUSPECT:
                suspect += 1
            else:
                droppable.append(row)
                if state is ReplicaState.DECOMMISSIONING:
                    sources.append(row)
                elif state is ReplicaState.CORRUPT:
                    corrupt = True
        room = placeable - holders
        spread_short, fresh_room = self._spread(live, replication, room, block_count)
        counts = GroupCounts(
            block_count,
            replication,
            len(live),
            suspect,
            len(droppable),
            len(sources),
            len(room),
            corrupt,
            spread_short,
            fresh_room,
        )
        return GroupHealth(tuple(live), tuple(sources), tuple(droppable), counts, tuple(states))

    def _spread(
        self, live: list[ExtentRow], replication: int, room: frozenset[int], block_count: int
    ) -> tuple[int, int]:
        """How many more locations the live replicas should span (as many as the
        replication, where the live and placeable datanodes' locations allow), and how
        many placeable datanodes in a location holding none of them have space for the
        group (none: a copy cannot mend it now, and nothing is queued for it)."""
        if len(live) < 2 and replication < 2:
            return 0, 0
        where = self.registry.location
        free = self.registry.allocator.free_now
        taken = {where(r.datanode_id) for r in live}
        fresh = [d for d in room if where(d) not in taken]
        places = len(taken) + len({where(d) for d in fresh})
        with_space = sum(1 for d in fresh if free(d) >= block_count)
        return max(0, min(replication, places) - len(taken)), with_space

    def datanode_sets(self) -> DatanodeSets:
        """The datanodes by what their replicas count as, now (for scans in SQL)."""
        registry = self.registry
        live: list[int] = []
        draining: list[int] = []
        suspect: list[int] = []
        lost: list[int] = []
        for d in registry.ids():
            if not registry.alive(d):
                (lost if registry.lost(d) else suspect).append(d)
            elif registry.admin_state(d) != NORMAL:
                draining.append(d)
            else:
                live.append(d)
        return DatanodeSets(
            live, draining, suspect, lost, registry.placeable(), sorted(self._corrupt)
        )


@dataclass(frozen=True, slots=True)
class DatanodeSets:
    """Datanode ids by the state their replicas are in (corrupt blocks aside)."""

    live: list[int]
    draining: list[int]
    suspect: list[int]
    lost: list[int]
    placeable: list[int]
    with_corrupt: list[int]

    @property
    def not_live(self) -> list[int]:
        """Every datanode whose replicas are not live, or that has corrupt blocks."""
        return sorted({*self.draining, *self.suspect, *self.lost, *self.with_corrupt})
