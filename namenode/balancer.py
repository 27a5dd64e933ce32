"""The balancer: replica groups moved from fuller to emptier datanodes, online.

A datanode added to a cluster starts empty and stays so while the others hold the old
data (HDFS's Balancer exists for that). A balancing run moves groups, one copy at a
time, from datanodes whose used fraction is above the cluster's mean to datanodes
below it, until every datanode is within `threshold` of the mean. A move is a copy to
the emptier datanode, recorded in the file's block list, and then the replica on the
fuller one dropped in the same transaction (the re-replication machinery: a move never
lowers a group's live replication, and a reader holding the old block list reads the
old replica, held back until its tickets expire). A move never puts a group's replicas
in fewer locations (racks) than they are in. Copies to repair come first: the balancer
uses the copy slots repairs leave free, and at most `bandwidth` bytes a second.

The monitor asks `plan` for a move when a datanode below the mean heartbeats; the
balancer picks the fullest datanodes above the mean as sources and reads their groups
from PostgreSQL a page at a time, in block order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from plasmafs.core.attributes import ReplicaState
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.inode_records import ExtentRow
from plasmafs.namenode.replica_health import ReplicaHealth
from plasmafs.namenode.replica_store import ReplicaStore

DEFAULT_BALANCE_THRESHOLD = 0.10  # as HDFS's balancer: 10% of capacity
CANDIDATES_PAGE = 256  # replica ranges of a source read per query
SOURCES_TRIED = 4  # fullest datanodes looked at for one move


@dataclass(slots=True)
class BalanceProgress:
    """A balancing run as it stands."""

    running: bool = False
    background: bool = False  # always on (the namenode's balance_threshold setting)
    threshold: float = DEFAULT_BALANCE_THRESHOLD  # farthest from the mean used fraction
    bandwidth: int = 0  # bytes per second all moves together (0: unlimited)
    started: float = 0.0  # time.time()
    finished: float = 0.0  # time.time() it found the cluster balanced (0: not yet)
    bytes_moved: int = 0
    moves_done: int = 0
    moves_failed: int = 0
    note: str = ""  # why no move is made, when none can be


@dataclass(frozen=True, slots=True)
class Move:
    """A group's replica to copy onto the target, then drop from `source`."""

    ino: int
    source: ExtentRow


@dataclass(slots=True)
class _Source:
    after: int = 0  # the next block start to read candidates from
    candidates: list[tuple[int, int]] = field(default_factory=list)  # (ino, file_index)


class Balancer:
    """Plans moves while a run is on; counts what they did."""

    def __init__(self, data: FileData, replicas: ReplicaStore, health: ReplicaHealth) -> None:
        self.registry = data.registry
        self.allocator = data.allocator
        self.replicas = replicas
        self.data = data
        self.health = health
        self.progress = BalanceProgress()
        self._sources: dict[int, _Source] = {}
        self._tokens = 0.0
        self._refilled = time.monotonic()

    # --- runs --------------------------------------------------------------------------------

    def start(self, threshold: float, bandwidth: int, background: bool = False) -> BalanceProgress:
        """Start a run (or change the running one's threshold and bandwidth); one in the
        `background` never ends by itself: it moves data whenever the cluster is out of
        balance."""
        if not self.progress.running:
            self.progress = BalanceProgress(running=True, started=time.time())
            self._sources.clear()
        self.progress.threshold = threshold
        self.progress.bandwidth = max(0, bandwidth)
        self.progress.background = background or self.progress.background
        return self.progress

    def stop(self) -> BalanceProgress:
        """End the run, background or not (moves under way finish)."""
        self.progress.running = False
        self.progress.background = False
        return self.progress

    def fractions(self, placeable: frozenset[int] | list[int]) -> tuple[dict[int, float], float]:
        """The used fraction of each datanode that may take data, and the mean (used
        blocks over capacity, all of them together). Blocks held back for read tickets
        count as free: a moved replica's are, once those expire (else a run would
        drain its sources below the mean meanwhile)."""
        allocator = self.allocator
        held = allocator.held_after(time.time())
        free = {d: allocator.free_now(d) + held.get(d, 0) for d in placeable}
        capacity = {d: allocator.capacity_blocks([d]) for d in placeable}
        used = {d: 1 - free[d] / capacity[d] if capacity[d] else 1.0 for d in placeable}
        total = sum(capacity.values())
        mean = 1 - sum(free.values()) / total if total else 0.0
        return used, mean

    def balanced(self, used: dict[int, float], mean: float) -> bool:
        """Every datanode of `used` (as `fractions` gives them) within the threshold of
        the mean."""
        return all(abs(f - mean) <= self.progress.threshold for f in used.values())

    # --- moves -------------------------------------------------------------------------------

    async def plan(
        self, target: int, placeable: frozenset[int], busy: Callable[[int, int], bool]
    ) -> Move | None:
        """A move onto `target` (a datanode heartbeating with a free copy slot), or None;
        `busy(ino, file_index)`: a copy of that group is under way."""
        progress = self.progress
        if not progress.running or target not in placeable:
            return None
        used, mean = self.fractions(placeable)
        threshold = progress.threshold
        if self.balanced(used, mean):
            progress.running = progress.background
            progress.finished = progress.finished or time.time()
            progress.note = ""
            return None
        progress.finished = 0.0
        if used[target] >= mean:
            return None
        sources = sorted(
            (d for d in placeable if used[d] > mean and (used[d] > mean + threshold
             or used[target] < mean - threshold)),
            key=lambda d: -used[d],
        )  # fmt: skip
        for source in sources[:SOURCES_TRIED]:
            move = await self._move_from(source, target, busy)
            if move is not None:
                if not self._spend(move.source.block_count * self.registry.blocksize):
                    return None
                progress.note = ""
                return move
        progress.note = "no group can move to the emptier datanodes now"
        return None

    async def _move_from(
        self, source: int, target: int, busy: Callable[[int, int], bool]
    ) -> Move | None:
        state = self._sources.setdefault(source, _Source())
        looked = 0
        while looked < 2 * CANDIDATES_PAGE:
            if not state.candidates:
                ranges = await self.replicas.used_ranges(source, state.after, CANDIDATES_PAGE)
                if not ranges:
                    state.after = 0  # from the start again next time
                    return None
                state.after = ranges[-1].start + 1
                state.candidates = [(r.ino, r.file_index) for r in ranges]
            ino, file_index = state.candidates.pop(0)
            looked += 1
            if busy(ino, file_index):
                continue
            rows = [r for r in await self.data.committed(ino) if r.file_index == file_index]
            move = self._movable(rows, source, target)
            if move is not None:
                return Move(ino, move)
        return None

    def _movable(self, rows: list[ExtentRow], source: int, target: int) -> ExtentRow | None:
        """The source's row of the group if it may move to `target`: every replica live,
        none on the target already, no fewer locations afterwards, and its blocks named by
        this file alone."""
        if not rows or any(r.datanode_id == target for r in rows):
            return None
        if any(self.health.state(r) is not ReplicaState.LIVE for r in rows):
            return None
        moving = next((r for r in rows if r.datanode_id == source), None)
        if moving is None:
            return None
        if self.data.allocator.shared.is_shared(source, moving.block_start, moving.block_count):
            return None  # a snapshot names them too: moving would free nothing here

        where = self.registry.location
        before = {where(r.datanode_id) for r in rows}
        after = {where(r.datanode_id) for r in rows if r is not moving} | {where(target)}
        return moving if len(after) >= len(before) else None

    def _spend(self, nbytes: int) -> bool:
        """Take `nbytes` of the bandwidth, if there is that much left now."""
        rate = self.progress.bandwidth
        if not rate:
            return True
        now = time.monotonic()
        self._tokens = min(self._tokens + (now - self._refilled) * rate, rate + nbytes)
        self._refilled = now
        if self._tokens < nbytes:
            return False
        self._tokens -= nbytes
        return True

    def moved(self, nbytes: int) -> None:
        """A move was recorded."""
        self.progress.bytes_moved += nbytes
        self.progress.moves_done += 1

    def failed(self) -> None:
        """A move's copy failed or was discarded."""
        self.progress.moves_failed += 1
