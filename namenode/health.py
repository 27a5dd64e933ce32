"""The state of every replica, and what a block group needs to be healthy again.

A replica is live when its datanode is live and in normal service and none of its
blocks is known corrupt; otherwise it is suspect (its datanode missed heartbeats),
lost (silent longer than `lost_after`), corrupt, or decommissioning. Only live
replicas count in a file's actual replication. Corrupt ranges are kept here in memory
(sorted per datanode) and in PostgreSQL's corrupt_blocks, which they are loaded from.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from plasmafs.client.attributes import ReplicaState
from plasmafs.namenode.datanodes import NORMAL, DatanodeRegistry
from plasmafs.namenode.records import ExtentRow

# Re-replication priorities, as HDFS's UnderReplicatedBlocks orders them.
ONE_LIVE, VERY_UNDER, UNDER, CLEANUP = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class GroupHealth:
    """What one block group has and needs."""

    live: tuple[ExtentRow, ...]
    sources: tuple[ExtentRow, ...]  # rows a copy may be read from (live or draining)
    others: tuple[tuple[ExtentRow, ReplicaState], ...]  # rows that are not live
    replication: int
    room: int  # datanodes that may take new data and hold no replica of the group
    corrupt: bool

    @property
    def missing(self) -> bool:
        """No live replica."""
        return not self.live

    @property
    def under_replicated(self) -> bool:
        """Fewer live replicas than requested."""
        return len(self.live) < self.replication

    @property
    def droppable(self) -> tuple[ExtentRow, ...]:
        """Rows that are not live and may go once the group allows it (not suspect ones:
        their datanode may still come back)."""
        return tuple(r for r, state in self.others if state is not ReplicaState.SUSPECT)

    @property
    def needs_cleanup(self) -> bool:
        """Rows to drop: surplus live ones, or lost, corrupt and draining ones once there
        are enough live ones, or once no other datanode is left to copy to (then the
        group is as replicated as the cluster allows, and a corrupt replica must make
        room for a good copy on its own datanode)."""
        have = len(self.live)
        if have > self.replication:
            return True
        return (
            have >= 1
            and bool(self.droppable)
            and (have >= self.replication or have + self.room < self.replication)
        )

    @property
    def suspect(self) -> int:
        """Replicas on datanodes that are dead but not yet lost: no copy replaces them
        before `lost_after` (a datanode's restart must not start a flood of copies)."""
        return sum(1 for _, state in self.others if state is ReplicaState.SUSPECT)

    @property
    def wanted(self) -> int:
        """Copies to make now."""
        return max(0, self.replication - len(self.live) - self.suspect)

    @property
    def priority(self) -> int | None:
        """Its place in the re-replication queue; None when nothing is to be done."""
        have = len(self.live)
        if self.wanted and self.sources and self.room:
            if have <= 1:
                return ONE_LIVE
            if have * 3 < self.replication:
                return VERY_UNDER
            return UNDER
        if self.needs_cleanup:
            return CLEANUP
        return None


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

    def forget_datanode(self, datanode: int) -> None:
        """A removed datanode: nothing of it is corrupt any more."""
        self._corrupt.pop(datanode, None)

    def corrupt_datanodes(self) -> set[int]:
        """Datanodes with a known corrupt range."""
        return set(self._corrupt)

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
        others: list[tuple[ExtentRow, ReplicaState]] = []
        holders: set[int] = set()
        corrupt = False
        for row in rows:
            holders.add(row.datanode_id)
            state = self.state(row)
            if state is ReplicaState.LIVE:
                live.append(row)
                sources.append(row)
                continue
            others.append((row, state))
            if state is ReplicaState.DECOMMISSIONING:
                sources.append(row)
            elif state is ReplicaState.CORRUPT:
                corrupt = True
        return GroupHealth(
            tuple(live),
            tuple(sources),
            tuple(others),
            replication,
            len(placeable - holders),
            corrupt,
        )
