"""fsck: the health of every file under a path, from PostgreSQL's records, and checks
that the namenode's records agree with each other.

Files are walked from PostgreSQL (committed state), their block groups assessed with
the same rules re-replication uses. The records checks: no block range of a datanode
claimed twice (or past its end) in PostgreSQL, the replicas of each file aligned in
groups, the allocator's free space equal to what PostgreSQL leaves free, and the usage
kept for every directory equal to what PostgreSQL's entries add up to.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from plasmafs.core.attributes import FileKind
from plasmafs.namenode.allocator import Allocator
from plasmafs.namenode.datanodes import DatanodeRegistry
from plasmafs.namenode.replica_health import GroupHealth, ReplicaHealth
from plasmafs.namenode.replica_store import BlockGroup, FsckEntry, ReplicaStore
from plasmafs.namenode.store import Store
from plasmafs.namenode.usage import DirectoryUsage

FILE_BATCH = 1000
ACCOUNTING_ATTEMPTS = 3  # a commit between the two reads skews one attempt
USAGE_WAIT = 60.0  # s fsck waits for the usage totals a start is counting


@dataclass(slots=True)
class CheckedGroup:
    """One block group as fsck saw it."""

    group: BlockGroup
    health: GroupHealth


@dataclass(slots=True)
class CheckedFile:
    """One file and its groups."""

    entry: FsckEntry
    groups: list[CheckedGroup]

    @property
    def problem(self) -> bool:
        """Under-replicated, mis-replicated (too few locations), missing or corrupt
        blocks."""
        return any(
            c.under_replicated or c.misplaced or c.corrupt or c.missing
            for c in (g.health.counts for g in self.groups)
        )

    @property
    def corrupt(self) -> bool:
        """A block is missing or has a corrupt replica."""
        return any(g.health.counts.missing or g.health.counts.corrupt for g in self.groups)


@dataclass(slots=True)
class FsckTotals:
    """What fsck counted."""

    files: int = 0
    directories: int = 0
    symlinks: int = 0
    blocks: int = 0
    replica_blocks: int = 0
    bytes: int = 0
    under_replicated: int = 0
    mis_replicated: int = 0
    missing: int = 0
    corrupt: int = 0
    corrupt_files: int = 0
    record_errors: list[str] = field(default_factory=list)


class Fsck:
    """Runs fsck walks."""

    def __init__(
        self,
        replicas: ReplicaStore,
        health: ReplicaHealth,
        registry: DatanodeRegistry,
        allocator: Allocator,
        usage: DirectoryUsage | None = None,
        store: Store | None = None,
    ) -> None:
        self.usage = usage
        self.store = store
        self.replicas = replicas
        self.health = health
        self.registry = registry
        self.allocator = allocator

    async def walk(
        self, root: int, root_path: str, totals: FsckTotals
    ) -> AsyncIterator[CheckedFile]:
        """Every file under `root` with its groups, adding to `totals`."""
        placeable = frozenset(self.registry.placeable())
        batch: list[FsckEntry] = []
        async for entry in self.replicas.subtree(root, root_path):
            if entry.kind is FileKind.DIRECTORY:
                totals.directories += 1
            elif entry.kind is FileKind.SYMLINK:
                totals.symlinks += 1
            else:
                totals.files += 1
                totals.bytes += entry.size
                batch.append(entry)
                if len(batch) >= FILE_BATCH:
                    for checked in await self._check(batch, placeable, totals):
                        yield checked
                    batch = []
        for checked in await self._check(batch, placeable, totals):
            yield checked
        totals.record_errors += await self.check_records()

    async def _check(
        self, entries: list[FsckEntry], placeable: frozenset[int], totals: FsckTotals
    ) -> list[CheckedFile]:
        if not entries:
            return []
        by_ino: dict[int, list[BlockGroup]] = {e.ino: [] for e in entries}
        for group in await self.replicas.groups_of(list(by_ino)):
            by_ino[group.ino].append(group)
        checked = []
        for entry in entries:
            groups = sorted(by_ino[entry.ino], key=lambda g: g.file_index)
            for before, after in itertools.pairwise(groups):
                if before.file_index + before.block_count > after.file_index:
                    totals.record_errors.append(
                        f"{entry.path}: block groups at file blocks {before.file_index} and "
                        f"{after.file_index} overlap"
                    )
            file = CheckedFile(entry, [])
            for group in groups:
                health = self.health.assess(group.rows, group.replication, placeable)
                file.groups.append(CheckedGroup(group, health))
                n = group.block_count
                totals.blocks += n
                totals.replica_blocks += n * len(health.live)
                totals.under_replicated += n if health.counts.under_replicated else 0
                totals.mis_replicated += n if health.counts.misplaced else 0
                totals.missing += n if health.counts.missing else 0
                totals.corrupt += n if health.counts.corrupt else 0
            totals.corrupt_files += 1 if file.corrupt else 0
            checked.append(file)
        return checked

    async def check_records(self) -> list[str]:
        """Disagreements among the namenode's records (empty when consistent)."""
        errors = await self.replicas.overlapping_claims()
        for check in (self._accounting, self._usage):
            for attempt in range(ACCOUNTING_ATTEMPTS):
                found = await check()
                if not found or attempt == ACCOUNTING_ATTEMPTS - 1:
                    errors += found
                    break
        return errors

    async def _usage(self) -> list[str]:
        """The directories whose usage kept in memory differs from PostgreSQL's."""
        if self.usage is None or self.store is None:
            return []
        try:
            async with asyncio.timeout(USAGE_WAIT):
                await self.usage.wait_ready()
        except TimeoutError:
            return [f"directory usage: not counted after {USAGE_WAIT:g}s (see the log)"]
        counted = DirectoryUsage(self.usage.view)
        await counted.count_once(self.store)
        return self.usage.differences(counted)

    async def _accounting(self) -> list[str]:
        now = time.time()
        used = await self.replicas.used_blocks(now)
        errors = []
        allocator = self.allocator
        # No await from here on: the allocator is read at one instant.
        for d in self.registry.ids():
            if not allocator.knows(d):
                continue
            capacity = allocator.capacity_blocks([d])
            free = allocator.free_blocks(d, now)
            reserved = allocator.reserved_blocks(d)
            held = (
                allocator.quarantined_blocks(d, now)
                + allocator.in_doubt_blocks(d)
                + allocator.deferred_blocks(d)
            )
            # Blocks the allocator keeps from use beyond PostgreSQL's count can only be
            # releases it holds a little longer than PostgreSQL records, blocks of
            # commits whose outcome it does not know, and releases waiting for a
            # snapshot being taken.
            extra = capacity - free - reserved - used.get(d, 0)
            if extra < 0:
                errors.append(
                    f"datanode {d}: {-extra} blocks are free or reserved in the namenode's "
                    "memory but used in PostgreSQL (double-booked)"
                )
            elif extra > held:
                errors.append(
                    f"datanode {d}: {extra - held} blocks are neither free nor used "
                    "(leaked from the free-space accounting)"
                )
        return errors
