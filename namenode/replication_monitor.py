"""Re-replication: the queue of block groups that need copies or removals, the copy
work handed to datanodes in heartbeat replies, and recording what they did.

Groups are checked when something that affects them happens (a datanode dies, is
lost, returns or is drained; a corrupt block is found; a file's replication or block
list changes) and by a full scan at start and every `scan_interval` seconds. A group
short of live replicas waits in one of three queues by urgency (one live replica,
fewer than a third, the rest), as in HDFS; a group with replicas to drop (surplus,
lost, corrupt or drained ones once enough live ones exist) is cleaned up here.

A copy goes to a target datanode that may take new data and holds no replica of the
group; the blocks are reserved on it (in memory: a restart frees them) and it pulls
the range from a source with a read ticket. Its result is recorded in a transaction
that checks the group still holds the source (else the copy is discarded and the
reservation given back) and drops what the new replica makes surplus. Nothing is
freed before it is certainly unreferenced; a lost replica's blocks are held until
its datanode returns or is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from plasmafs.core.errors import ConflictError, NotFoundError, PlasmaError
from plasmafs.namenode.balancer import Balancer, Move
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.copy_work import (
    CopyJob,
    CopyOutcome,
    CopyTask,
    HeartbeatReport,
    HeartbeatWork,
)
from plasmafs.namenode.datanodes import NORMAL
from plasmafs.namenode.file_rules import FileRules
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.inode_records import ExtentRow
from plasmafs.namenode.leadership import Leadership
from plasmafs.namenode.replica_health import CLEANUP, GroupCounts, GroupHealth, ReplicaHealth
from plasmafs.namenode.replica_store import BlockGroup, ReplicaStore, unpack_pattern
from plasmafs.namenode.transaction import Txn
from plasmafs.namenode.view import View

log = logging.getLogger(__name__)

GroupKey = tuple[int, int]  # (ino, file_index)
LOCK_WAIT = 2.0  # seconds a recording waits for a writer holding the file
SCHEDULE_LOOKS = 2000  # queued groups looked at per heartbeat, at most
CHECK_BATCH = 1000  # files checked per query
FULL_SCAN_FILES = 20 * CHECK_BATCH  # more files to check than this: a full scan is cheaper
MAX_VERIFY = 1 << 20  # blocks a client may ask to verify at once
LOGGED_CORRUPT = 20  # corrupt ranges of one report logged one by one


@dataclass(slots=True)
class ReplicationStats:
    """Counters the namenode exports."""

    copies_done: int = 0
    copies_failed: int = 0
    copies_discarded: int = 0
    bytes_copied: int = 0
    replicas_dropped: int = 0
    scans: int = 0  # full passes over every block group
    last_scan_seconds: float = 0.0


class ReplicationMonitor:
    """The namenode's replica accounting and the work that restores it."""

    def __init__(
        self,
        files: FileRules,
        data: FileData,
        view: View,
        leadership: Leadership,
        replicas: ReplicaStore,
        health: ReplicaHealth,
        *,
        streams_per_datanode: int,
        scan_interval: float,
        check_interval: float,
    ) -> None:
        self.files = files
        self.data = data
        self.view = view
        self.leadership = leadership
        self.registry = data.registry
        self.replicas = replicas
        self.health = health
        self.streams = streams_per_datanode
        self.scan_interval = scan_interval
        self.check_interval = check_interval
        self.stats = ReplicationStats()
        self.balancer = Balancer(data, replicas, health)
        self.tracked: dict[GroupKey, GroupCounts] = {}
        self._tracked_files: Counter[int] = Counter()
        self.queues: list[dict[GroupKey, None]] = [{} for _ in range(CLEANUP + 1)]
        self.jobs: dict[int, CopyJob] = {}
        # Finished copies being recorded: they still count for their group, so that no
        # second copy of it starts before the first is in its block list.
        self.recording: dict[int, CopyJob] = {}
        self._verify: dict[int, set[tuple[int, int]]] = {}
        self._dirty: set[int] = set()
        self._down: frozenset[int] = frozenset()  # not live, or not in normal service
        self._lost: frozenset[int] = frozenset()
        self._task_base = 0
        self._next_task = 0
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._last_scan = 0.0

    # --- life -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load corrupt ranges and start the loop (which scans once first)."""
        self.health.load_corrupt(await self.replicas.corrupt_ranges())
        # Task ids carry the term: a task of an earlier namenode is never taken for ours.
        self._task_base = self.leadership.current_term() << 32
        self._runner = asyncio.create_task(self._run(), name="pfs-replication")

    async def stop(self) -> None:
        """Stop the loop and the recordings in flight."""
        for task in (self._runner, *self._tasks):
            if task is not None:
                task.cancel()
        await asyncio.gather(
            *(t for t in (self._runner, *self._tasks) if t is not None), return_exceptions=True
        )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self) -> None:
        while True:
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except PlasmaError as exc:
                log.warning("replica check failed: %s", exc)
            except Exception:
                log.exception("replica check failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.check_interval):
                    await self._wake.wait()
            self._wake.clear()

    async def _tick(self) -> None:
        self._expire_jobs()
        now = time.monotonic()
        if now - self._last_scan >= self.scan_interval:
            await self.scan_all()
            self._last_scan = now
        await self._datanode_changes()
        if self._dirty:
            dirty, self._dirty = self._dirty, set()
            try:
                await self.check_files(dirty)
            except BaseException:
                self._dirty |= dirty  # checked at the next tick instead
                raise
        await self._clean_up()

    async def _datanode_changes(self) -> None:
        """Check again the files with replicas on datanodes that died, were declared
        lost, returned, or changed service; many files make a full scan instead."""
        registry = self.registry
        down = frozenset(
            d for d in registry.ids() if not registry.alive(d) or registry.admin_state(d) != NORMAL
        )
        lost = frozenset(d for d in down if registry.lost(d))
        changed = (down ^ self._down) | (lost ^ self._lost)
        if changed:
            files = await self.replicas.files_on(sorted(changed))
            if len(files) > FULL_SCAN_FILES:
                await self.scan_all()
            else:
                self._dirty.update(files)
        self._down, self._lost = down, lost

    # --- checking groups ----------------------------------------------------------------------

    def _placeable(self) -> frozenset[int]:
        return frozenset(self.registry.placeable())

    async def scan_all(self) -> None:
        """Check every group that may need work (a full pass)."""
        started = time.monotonic()
        found = await unhealthy_groups(self.replicas, self.health)
        self.stats.scans += 1
        self.stats.last_scan_seconds = time.monotonic() - started
        self.tracked = found
        self._tracked_files = Counter(key[0] for key in found)
        self.queues = [{} for _ in range(CLEANUP + 1)]
        for key, item in found.items():
            if item.priority is not None:
                self.queues[item.priority][key] = None

    async def check_files(self, inos: Iterable[int]) -> None:
        """Check every group of the files `inos` again."""
        inos = sorted(set(inos))
        placeable = self._placeable()
        for at in range(0, len(inos), CHECK_BATCH):
            batch = inos[at : at + CHECK_BATCH]
            wanted = set(batch)
            for key in [k for k in self.tracked if k[0] in wanted]:
                self._untrack(key)
            for group in await self.replicas.groups_of(batch):
                self._track(group, placeable)

    def _track(self, group: BlockGroup, placeable: frozenset[int]) -> None:
        counts = self.health.assess(group.rows, group.replication, placeable).counts
        key = group.key
        self._untrack(key)
        if counts.tracked:
            self.tracked[key] = counts
            self._tracked_files[key[0]] += 1
            if counts.priority is not None:
                self.queues[counts.priority][key] = None

    def _untrack(self, key: GroupKey) -> None:
        if self.tracked.pop(key, None) is not None:
            self._tracked_files[key[0]] -= 1
            if not self._tracked_files[key[0]]:
                del self._tracked_files[key[0]]
            for queue in self.queues:
                queue.pop(key, None)

    def committed(self, cs: ChangeSet) -> None:
        """After every commit that changed block lists or replication: check again the
        files whose replication changed, that are tracked, or that got replicas on a
        datanode that is down (cheap for the common case: none of these)."""
        if not (cs.extents_changed or cs.recheck):
            return
        dirty = set(cs.recheck)
        files = self._tracked_files
        if files:
            dirty.update(ino for ino in cs.extents_changed if ino in files)
        down = self._down
        if down:
            dirty.update(ino for ino, _, d in cs.extents_added if d in down)
        if dirty:
            self._dirty |= dirty
            self._wake.set()

    def counts(self) -> tuple[int, int, int]:
        """File blocks under-replicated, missing and with a corrupt replica."""
        under = missing = corrupt = 0
        for c in self.tracked.values():
            n = c.block_count
            under += n if c.under_replicated else 0
            missing += n if c.missing else 0
            corrupt += n if c.corrupt else 0
        return under, missing, corrupt

    def queued_for(self, datanode: int | None = None) -> int:
        """Copies waiting: all, or those `datanode` may be given (all of them while it
        takes new data, none otherwise)."""
        waiting = sum(len(q) for q in self.queues[:CLEANUP])
        if datanode is None or datanode in self.registry.placeable():
            return waiting
        return 0

    def has_work_for(self, datanode: int) -> bool:
        """Whether the datanode runs or may soon be given copies or checks: groups wait
        for copies, a balancing run is on, it runs copies, or it has ranges to verify."""
        return bool(
            any(self.queues[:CLEANUP])
            or self.balancer.progress.running
            or self.running_on(datanode)
            or self._verify.get(datanode)
        )

    def running_on(self, datanode: int) -> int:
        """Copies a datanode runs as target."""
        return sum(1 for job in self.jobs.values() if job.target.datanode_id == datanode)

    # --- heartbeats ---------------------------------------------------------------------------

    async def heartbeat(self, datanode: int, report: HeartbeatReport) -> HeartbeatWork:
        """Take a datanode's reports and give it work."""
        work = HeartbeatWork()
        for outcome in report.finished:
            self._finished(datanode, outcome)
        for task_id in report.running:
            job = self.jobs.get(task_id)
            if job is None or job.target.datanode_id != datanode:
                work.cancel.append(task_id)
            else:
                job.acknowledged = True
        self.registry.set_busy_unknown(datanode, bool(work.cancel))
        if report.corrupt:
            self._spawn(self.record_corrupt(datanode, report.corrupt))
        pending = self._verify.get(datanode)
        if pending:
            pending.difference_update(report.verified)
            work.verify.extend(sorted(pending))
        if self.registry.is_placeable(datanode):
            await self._give_work(datanode, work)
        return work

    def request_verify(self, datanode: int, start: int, count: int) -> None:
        """Have a datanode check blocks a client could not read (in its next heartbeat)."""
        if self.registry.row(datanode) is None:
            raise NotFoundError(f"no datanode {datanode}")
        self._verify.setdefault(datanode, set()).add((start, max(1, min(count, MAX_VERIFY))))

    def _finished(self, datanode: int, result: CopyOutcome) -> None:
        job = self.jobs.get(result.task_id)
        if job is None or job.target.datanode_id != datanode:
            return  # reported before, or not ours
        del self.jobs[result.task_id]
        if result.ok:
            self.stats.bytes_copied += result.bytes_copied
            self.recording[job.task_id] = job
            self._spawn(self._record(job))
            return
        self.stats.copies_failed += 1
        if job.move_from is not None:
            self.balancer.failed()
        log.info(
            "copy %d of file %d blocks %d+%d to datanode %d failed: %s",
            job.task_id, job.ino, job.source.file_index, job.source.block_count,
            datanode, result.message,
        )  # fmt: skip
        self._give_back(job)
        if result.source_corrupt:  # have the source's blocks checked
            s = job.source
            self._verify.setdefault(s.datanode_id, set()).add((s.block_start, s.block_count))
        self._dirty.add(job.ino)
        self._wake.set()

    def _expire_jobs(self) -> None:
        """Forget copies whose target died, or never started one it was given (a lost
        reply); their reservations are free again. A target that still runs one after
        all is told to cancel it and gets no new data meanwhile."""
        period = self.registry.heartbeat_ms / 1000
        now = time.monotonic()
        for task_id, job in list(self.jobs.items()):
            target = job.target.datanode_id
            unheard = not job.acknowledged and now - job.given > 5 * period + 5
            if self.registry.alive(target) and not unheard:
                continue
            del self.jobs[task_id]
            self.stats.copies_failed += 1
            if job.move_from is not None:
                self.balancer.failed()
            self._give_back(job)
            self._dirty.add(job.ino)

    def _give_back(self, job: CopyJob) -> None:
        """The blocks reserved for a copy that will not be recorded are free again."""
        t = job.target
        self.data.allocator.give_back(t.datanode_id, t.block_start, t.block_count)

    async def _give_work(self, datanode: int, work: HeartbeatWork) -> None:
        slots = self.streams - self.running_on(datanode)
        if slots <= 0:
            return
        if not self.balancer.progress.running and not any(self.queues[:CLEANUP]):
            return  # (most heartbeats: nothing to plan, no datanode list to build)
        placeable = self._placeable()
        reading: dict[int, int] = {}
        for running in self.jobs.values():
            source_id = running.source.datanode_id
            reading[source_id] = reading.get(source_id, 0) + 1
        looked = 0
        for queue in self.queues[:CLEANUP]:
            for key in list(queue):
                looked += 1
                if slots <= 0 or looked > SCHEDULE_LOOKS:
                    return
                job = await self._plan(key, datanode, placeable, reading)
                if job is None:
                    continue
                await self._hand_out(job, work, reading)
                slots -= 1
        while slots > 0:  # repairs first; the balancer gets the slots left
            move = await self.balancer.plan(datanode, placeable, self._busy)
            if move is None or reading.get(move.source.datanode_id, 0) >= self.streams:
                return
            job = self._move_job(move, datanode)
            if job is None:
                return
            await self._hand_out(job, work, reading)
            slots -= 1

    async def _hand_out(self, job: CopyJob, work: HeartbeatWork, reading: dict[int, int]) -> None:
        """Give a planned copy to its target in this heartbeat's reply."""
        self.jobs[job.task_id] = job
        reading[job.source.datanode_id] = reading.get(job.source.datanode_id, 0) + 1
        source = await self.data.source_ticket(job.ino, job.source)
        work.copies.append(
            CopyTask(
                task_id=job.task_id,
                source_datanode_id=job.source.datanode_id,
                source_address=source.address,
                source_plaintext=source.plaintext,
                source_block_start=job.source.block_start,
                source_ticket=source.ticket,
                block_start=job.target.block_start,
                block_count=job.target.block_count,
            )
        )

    def _busy(self, ino: int, file_index: int) -> bool:
        """A copy of the group is under way (given, or being recorded)."""
        return any(
            j.ino == ino and j.source.file_index == file_index
            for j in (*self.jobs.values(), *self.recording.values())
        )

    def _move_job(self, move: Move, target: int) -> CopyJob | None:
        """The balancer's move as a copy to `target`, its blocks reserved (None: no run
        long enough there)."""
        source = move.source
        start = self.data.allocator.allocate_on(target, source.block_count, None)
        if start is None:
            return None
        self._next_task += 1
        copy = dataclasses.replace(source, datanode_id=target, block_start=start)
        return CopyJob(
            self._task_base + self._next_task, move.ino, source, copy,
            move_from=source.datanode_id,
        )  # fmt: skip

    async def _plan(
        self, key: GroupKey, datanode: int, placeable: frozenset[int], reading: dict[int, int]
    ) -> CopyJob | None:
        """A copy of group `key` to `datanode`, with its blocks reserved, or None."""
        item = self.tracked.get(key)
        if item is None:
            return None
        ino, file_index = key
        committed = await self.data.committed(ino)
        rows = tuple(r for r in committed if r.file_index == file_index)
        if not rows or any(r.block_count != rows[0].block_count for r in rows):
            self._untrack(key)
            self._dirty.add(ino)
            return None
        block_count = rows[0].block_count
        health = self.health.assess(rows, item.replication, placeable)
        underway = [
            j
            for j in (*self.jobs.values(), *self.recording.values())
            if (j.ino, j.source.file_index) == key
        ]
        if len(underway) >= health.counts.wanted:
            return None
        holders = {r.datanode_id for r in rows} | {j.target.datanode_id for j in underway}
        if datanode in holders:
            return None
        if not self._well_placed(datanode, health, underway, holders, placeable, block_count):
            return None
        sources = [r for r in health.sources if reading.get(r.datanode_id, 0) < self.streams]
        if not sources:
            return None
        source = min(sources, key=lambda r: reading.get(r.datanode_id, 0))
        hint = _after_file_blocks(committed, datanode)
        start = self.data.allocator.allocate_on(datanode, block_count, hint)
        if start is None:
            return None
        self._next_task += 1
        target = dataclasses.replace(source, datanode_id=datanode, block_start=start)
        return CopyJob(self._task_base + self._next_task, ino, source, target)

    def _well_placed(
        self,
        datanode: int,
        health: GroupHealth,
        underway: list[CopyJob],
        holders: set[int],
        placeable: frozenset[int],
        block_count: int,
    ) -> bool:
        """Whether a copy of the group may go to `datanode`: into a location holding no
        live or coming replica, unless none with room is left (then anywhere, for a
        group short of replicas; never, for one only misplaced)."""
        where = self.registry.location
        taken = {where(r.datanode_id) for r in health.live}
        taken |= {where(j.target.datanode_id) for j in underway}
        if where(datanode) not in taken:
            return True
        if health.counts.misplaced:
            return False
        free = self.data.allocator.free_blocks
        return not any(
            where(d) not in taken and free(d) >= block_count for d in placeable - holders
        )

    # --- recording ----------------------------------------------------------------------------

    async def _record(self, job: CopyJob) -> None:
        """Add a finished copy to its file, if the file's group is as it was."""
        handed_over = False  # the recording transaction owns the reservation once true

        async def change(txn: Txn) -> bool:
            nonlocal handed_over
            handed_over = True  # add_replica puts it in the change set at once
            if not await self.data.add_replica(txn, job.ino, job.source, job.target):
                return False
            await self._drop_surplus(txn, job.ino, job.source.file_index, job.move_from)
            return True

        done = False
        try:
            done = await self.files.change_file_blocks(
                f"copy/{job.task_id}", job.ino, change, LOCK_WAIT
            )
        except PlasmaError as exc:
            log.info("copy %d not recorded: %s", job.task_id, exc)
        finally:
            self.recording.pop(job.task_id, None)
            if not done and not handed_over:
                self._give_back(job)
            self._dirty.add(job.ino)
            self._wake.set()
        if done:
            self.stats.copies_done += 1
        else:
            self.stats.copies_discarded += 1
        if job.move_from is not None:
            if done:
                self.balancer.moved(job.target.block_count * self.registry.blocksize)
            else:
                self.balancer.failed()

    async def _drop_surplus(
        self, txn: Txn, ino: int, file_index: int, moved_from: int | None = None
    ) -> None:
        """Drop the group's rows it no longer needs: lost, corrupt or drained ones once it
        has enough live ones, and live ones beyond its replication (the replica on
        `moved_from` first, for a balancer's move)."""
        rows = [r for r in await self.data.view(txn, ino) if r.file_index == file_index]
        inode = await self.view.inode(txn, ino)  # a file: its change holds its lock
        if inode is None:
            raise NotFoundError(f"no inode {ino}")
        replication = inode.attr.replication
        health = self.health.assess(rows, replication, self._placeable())
        drop = list(health.droppable) if health.counts.needs_cleanup else []
        live = list(health.live)
        moved = [r for r in live if r.datanode_id == moved_from]
        if moved and len(live) > replication:
            live.remove(moved[0])
            drop.append(moved[0])
        drop += self._surplus(live, replication)
        if drop:
            await self.data.drop_replicas(txn, ino, drop, self._hold)
            self.stats.replicas_dropped += len(drop)

    def _surplus(self, live: list[ExtentRow], replication: int) -> list[ExtentRow]:
        """The live replicas beyond `replication` to drop: one at a time, from the
        location holding the most of them, the fullest datanode there."""
        where = self.registry.location
        used = self.data.allocator.used_fraction
        drop: list[ExtentRow] = []
        while len(live) > replication:
            crowd = Counter(where(r.datanode_id) for r in live)
            victim = max(live, key=lambda r: (crowd[where(r.datanode_id)], used(r.datanode_id)))
            live.remove(victim)
            drop.append(victim)
        return drop

    def _hold(self, datanode: int) -> bool:
        return not self.registry.alive(datanode)

    async def _clean_up(self, limit: int = 64) -> None:
        """Drop replicas groups no longer need (a transaction per file)."""
        files = sorted({key[0] for key in list(self.queues[CLEANUP])[:limit]})
        for ino in files:
            keys = [k for k in self.queues[CLEANUP] if k[0] == ino]

            async def change(txn: Txn, ino: int = ino, keys: list[GroupKey] = keys) -> bool:
                for _, file_index in keys:
                    await self._drop_surplus(txn, ino, file_index)
                return bool(txn.cs.extents_changed)

            with contextlib.suppress(ConflictError):  # a writer has it: later
                await self.files.change_file_blocks("cleanup", ino, change, LOCK_WAIT)
            self._dirty.add(ino)

    async def record_corrupt(self, datanode: int, ranges: list[tuple[int, int, str]]) -> None:
        """Record blocks a datanode found corrupt (only those replicas use)."""
        hits = await self.replicas.record_corrupt(datanode, ranges)
        self.health.load_corrupt((datanode, start, count) for _, start, count in hits)
        for ino, start, count in hits[:LOGGED_CORRUPT]:
            log.warning(
                "datanode %d: blocks %d+%d of file %d are corrupt", datanode, start, count, ino
            )
        if len(hits) > LOGGED_CORRUPT:
            # A failing disk reports its blocks by the thousand: a line each would keep
            # the event loop from renewing the lease.
            log.warning(
                "datanode %d: %d more corrupt block ranges (not listed; fsck -list-corrupt)",
                datanode,
                len(hits) - LOGGED_CORRUPT,
            )
        self._dirty.update(ino for ino, _, _ in hits)
        self._wake.set()

    def wake(self) -> None:
        """Look at the datanodes and the queues again now."""
        self._wake.set()

    def forget_datanode(self, datanode: int) -> None:
        """A datanode was removed: drop the copies it ran as target and its checks."""
        for task_id, job in list(self.jobs.items()):
            if job.target.datanode_id == datanode:
                del self.jobs[task_id]
        self._verify.pop(datanode, None)


async def unhealthy_groups(
    replicas: ReplicaStore, health: ReplicaHealth
) -> dict[GroupKey, GroupCounts]:
    """Every group that is not healthy or has work to do. PostgreSQL returns the groups
    with a replica on a datanode that is not live and in service or that has corrupt
    blocks, or whose replica count differs from the file's replication, with their
    replicas counted by state; groups touching corrupt blocks, and those whose replicas
    span too few locations (another query), are looked at row by row."""
    sets = health.datanode_sets()
    placeable = frozenset(sets.placeable)
    found: dict[GroupKey, GroupCounts] = {}
    row_by_row: set[int] = set()
    room = len(placeable)
    judged: dict[int, GroupCounts | None] = {}  # pattern -> its counts, if tracked
    async for batch in replicas.group_counts(sets):
        for ino, file_index, pattern, on_corrupt in batch:
            if on_corrupt:
                row_by_row.add(ino)
                continue
            counts = judged.get(pattern, _UNSEEN)
            if counts is _UNSEEN:
                bc, rep, live, suspect, lost, draining, placed = unpack_pattern(pattern)
                counts = GroupCounts(
                    bc, rep, live, suspect, lost + draining, live + draining, room - placed,
                    corrupt=False,
                )  # fmt: skip
                counts = judged[pattern] = counts if counts.tracked else None
            if counts is not None:
                found[(ino, file_index)] = counts
    where = health.registry.location
    row_by_row.update(await replicas.misplaced_files({d: where(d) for d in sets.live}))
    inos = sorted(row_by_row)
    for at in range(0, len(inos), CHECK_BATCH):
        for group in await replicas.groups_of(inos[at : at + CHECK_BATCH]):
            counts = health.assess(group.rows, group.replication, placeable).counts
            if counts.tracked:
                found[group.key] = counts
    return found


_UNSEEN = GroupCounts(0, 0, 0, 0, 0, 0, 0, corrupt=False)


def _after_file_blocks(rows: Iterable[ExtentRow], datanode: int) -> int | None:
    """The block after the file's last replica on `datanode` (to place a copy next to
    it), or None."""
    ends = [r.block_start + r.block_count for r in rows if r.datanode_id == datanode]
    return max(ends) if ends else None
