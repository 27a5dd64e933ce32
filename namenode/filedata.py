"""Files' block lists inside transactions: allocation, lookup, truncation and release.

A transaction sees a file's committed extents plus its own changes. Allocation and
truncation lock the inode exclusively, so a transaction's view of a file it changes is
exact, and at commit that view becomes the committed one.

Blocks a commit drops are held back only while a read ticket for them may live: the
namenode remembers until when it issued read tickets for each file, so the blocks of a
file nobody read within a ticket's lifetime are free again at once, and those of a
file being read stay unused (PostgreSQL's released_extents and the allocator) until
the readers' tickets expire, so a reader that fetched the old block list reads the old
data to the end. Readers renew their tickets only while the file is unchanged. Tickets
issued before a restart are covered by a horizon kept in PostgreSQL, raised before a
ticket that would outlive it goes out. Blocks a transaction reserved and then dropped,
or that an abort discards, are free again at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Callable, Iterable

from plasmafs.core import tickets
from plasmafs.core.attributes import Extent, FileKind, Replica, ReplicaState
from plasmafs.core.errors import InvalidArgumentError, IsDirectoryError
from plasmafs.namenode.allocator import Allocator
from plasmafs.namenode.cache import MISSING, NamespaceCache
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.datanodes import DatanodeRegistry
from plasmafs.namenode.inode_records import ExtentRow, Inode
from plasmafs.namenode.store import Store
from plasmafs.namenode.transaction import Txn

MAX_ALLOCATE = 16384  # blocks per request


class FileData:
    """Block lists of files for the namespace."""

    def __init__(
        self,
        store: Store,
        cache: NamespaceCache,
        allocator: Allocator,
        registry: DatanodeRegistry,
        ticket_ttl: float,
        replica_state: Callable[[ExtentRow], ReplicaState],
        term: Callable[[], int] = lambda: 0,
        read_ticket_ttl: float | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.allocator = allocator
        self.registry = registry
        self.ticket_ttl = ticket_ttl  # of write tickets
        # Read tickets live shorter: released blocks wait only this long for readers.
        self.read_ticket_ttl = min(read_ticket_ttl or ticket_ttl, ticket_ttl)
        self._read_grants: dict[int, float] = {}  # ino -> its read tickets expire by then
        self._prune_at = 4096
        self._horizon = 0.0  # no read ticket lives past it (also recorded in PostgreSQL)
        self._horizon_lock = asyncio.Lock()
        self._started_horizon = 0.0  # the same for tickets issued before this start
        self.replica_state = replica_state  # of a replica in block lists (replica health's)
        self.term = term  # this namenode's term, signed into every ticket
        self._allocations = 0  # in this term (see _next_generation)

    async def load(self) -> None:
        """Read how long read tickets issued before this start may live."""
        self._horizon = self._started_horizon = await self.store.read_grants_until()

    # --- views ----------------------------------------------------------------------------

    async def committed(self, ino: int) -> tuple[ExtentRow, ...]:
        """The committed extents of `ino` (cached)."""
        cached = self.cache.extents.get(ino)
        if cached is not MISSING and cached is not None:
            return cached  # type: ignore[return-value]
        epoch = self.cache.epoch
        rows = (await self.store.get_extents([ino]))[ino]
        self.cache.extents.fill(ino, rows, epoch)
        return rows

    async def view(self, txn: Txn | None, ino: int) -> list[ExtentRow]:
        """The extents `txn` sees, sorted by file index then datanode."""
        # A file this transaction created has nothing committed (inode numbers are
        # never reused): no query for it.
        created = txn is not None and ino in txn.cs.created
        rows = [] if created else list(await self.committed(ino))
        if txn is not None and ino in txn.cs.extents_changed:
            cs = txn.cs
            gone = cs.extents_dropped | cs.extents_replaced
            rows = [r for r in rows if (ino, *r.key) not in gone]
            rows += [x for (i, _, _), x in cs.extents_added.items() if i == ino]
        rows.sort(key=lambda r: r.key)
        return rows

    # --- changes ----------------------------------------------------------------------------

    async def allocate(
        self, txn: Txn, inode: Inode, file_index: int, count: int, credential: int = 0
    ) -> list[Extent]:
        """Reserve `count` blocks from `file_index` on `replication` datanodes each, with
        write tickets issued to `credential`."""
        if inode.kind is not FileKind.FILE:
            raise IsDirectoryError("blocks belong to files")
        if not 1 <= count <= MAX_ALLOCATE:
            raise InvalidArgumentError(f"allocate 1..{MAX_ALLOCATE} blocks, not {count}")
        ino = inode.ino
        current = await self.view(txn, ino)
        await self._drop_range(txn, ino, current, file_index, file_index + count)
        hints = {
            r.datanode_id: r.block_start + r.block_count
            for r in current
            if r.file_end == file_index
        }
        placements = self.allocator.allocate(
            self.registry.placeable(), inode.attr.replication, count, hints
        )
        cs = txn.cs
        grants: list[Extent] = []
        position = file_index
        generation = self._next_generation()
        for p in placements:
            replicas = []
            for datanode, start in zip(p.datanodes, p.starts, strict=True):
                cs.reserved.append((datanode, start, p.count))
                row = ExtentRow(position, p.count, datanode, start, generation)
                cs.extents_added[(ino, position, datanode)] = row
                replicas.append(self._grant(ino, row, write=True, credential=credential))
            grants.append(Extent(position, p.count, tuple(replicas)))
            position += p.count
        cs.extents_changed.add(ino)
        return grants

    async def blocks(
        self, txn: Txn | None, inode: Inode, file_index: int, count: int, credential: int = 0
    ) -> list[Extent]:
        """The extents covering [file_index, file_index + count) (count 0: to the end),
        with read tickets issued to `credential`."""
        if inode.kind is not FileKind.FILE:
            raise IsDirectoryError("blocks belong to files")
        # Noted before the block list is read: a commit that releases these blocks while
        # this request waits must already hold them back.
        await self._grant_reads(inode.ino)
        end = file_index + count if count else None
        grouped: dict[tuple[int, int], list[ExtentRow]] = {}
        for row in await self.view(txn, inode.ino):
            if row.file_end <= file_index or (end is not None and row.file_index >= end):
                continue
            grouped.setdefault((row.file_index, row.block_count), []).append(row)
        extents = []
        for (fi, n), rows in sorted(grouped.items()):
            states = [(self.replica_state(r), r) for r in rows]
            # Live replicas first: a reader tries them before the others.
            states.sort(key=lambda item: item[0] is not ReplicaState.LIVE)
            extents.append(
                Extent(
                    fi,
                    n,
                    tuple(
                        self._grant(inode.ino, r, write=False, state=st, credential=credential)
                        for st, r in states
                    ),
                )
            )
        return extents

    async def source_ticket(self, ino: int, row: ExtentRow) -> Replica:
        """A read ticket for one replica of file `ino`, for a datanode copying it: a read
        grant like a client's, so the blocks stay unused while the copy may read them."""
        await self._grant_reads(ino)
        return self._grant(ino, row, write=False)

    async def _grant_reads(self, ino: int) -> None:
        """Note that read tickets for file `ino` go out now (raising the horizon kept in
        PostgreSQL first when they would outlive it)."""
        until = self._note_read_grant(ino)
        if until > self._horizon:
            await self._raise_horizon(until)

    def _note_read_grant(self, ino: int) -> float:
        until = time.time() + self.read_ticket_ttl
        self._read_grants[ino] = until
        if len(self._read_grants) >= self._prune_at:
            now = time.time()
            self._read_grants = {i: u for i, u in self._read_grants.items() if u > now}
            self._prune_at = max(4096, 2 * len(self._read_grants))
        return until

    async def _raise_horizon(self, until: float) -> None:
        async with self._horizon_lock:
            if until > self._horizon:
                # Raised by a whole ticket lifetime at once: one write per lifetime at most.
                horizon = until + self.read_ticket_ttl
                await self.store.extend_read_grants(horizon)
                self._horizon = horizon

    def held_until(self, inos: Iterable[int]) -> float:
        """Until when released blocks of the files `inos` may be read with live tickets
        (time.time(); in the past when none may)."""
        until = self._started_horizon
        grants = self._read_grants
        for ino in inos:
            until = max(until, grants.get(ino, 0.0))
        return until

    async def truncate(self, txn: Txn, ino: int, size: int, blocksize: int) -> None:
        """Drop the blocks past `size` (the caller holds the inode's exclusive lock)."""
        keep = (size + blocksize - 1) // blocksize
        current = await self.view(txn, ino)
        await self._drop_range(txn, ino, current, keep, None)

    async def drop_all(self, txn: Txn, ino: int) -> None:
        """Release every block of a file being removed."""
        await self._drop_range(txn, ino, await self.view(txn, ino), 0, None)

    async def _drop_range(
        self, txn: Txn, ino: int, rows: list[ExtentRow], start: int, end: int | None
    ) -> None:
        cs = txn.cs
        for row in rows:
            lo = max(row.file_index, start)
            hi = row.file_end if end is None else min(row.file_end, end)
            if lo >= hi:
                continue
            self._remove(cs, ino, row)
            offset = row.block_start - row.file_index
            if row.file_index < lo:  # keep the head
                self._put(
                    cs,
                    ino,
                    dataclasses.replace(row, block_count=lo - row.file_index),
                )
            if hi < row.file_end:  # keep the tail
                tail = dataclasses.replace(
                    row, file_index=hi, block_count=row.file_end - hi, block_start=hi + offset
                )
                self._put(cs, ino, tail)
            self._free(cs, ino, row.datanode_id, lo + offset, hi - lo, row)
        cs.extents_changed.add(ino)

    async def move_all(self, txn: Txn, source: int, target: int, base: int) -> None:
        """Move every block of file `source` to file `target`, source block i becoming
        target block base + i: the rows change file, the blocks stay where they are,
        their owner stamps recorded with them (ExtentRow.owner)."""
        cs = txn.cs
        for row in await self.view(txn, source):
            self._remove(cs, source, row)
            moved = dataclasses.replace(
                row,
                file_index=row.file_index + base,
                stamp_ino=row.stamp_ino or source,
                stamp_shift=row.stamp_shift - base,
            )
            self._put(cs, target, moved)
        cs.extents_changed.update((source, target))

    @staticmethod
    def _remove(cs: ChangeSet, ino: int, row: ExtentRow) -> None:
        key = (ino, row.file_index, row.datanode_id)
        if cs.extents_added.pop(key, None) is None or key in cs.extents_replaced:
            cs.extents_replaced.discard(key)
            cs.extents_dropped.add(key)

    @staticmethod
    def _put(cs: ChangeSet, ino: int, row: ExtentRow) -> None:
        key = (ino, row.file_index, row.datanode_id)
        if key in cs.extents_dropped:  # a committed row comes back shorter: delete, insert
            cs.extents_dropped.discard(key)
            cs.extents_replaced.add(key)
        cs.extents_added[key] = row

    @staticmethod
    def _free(
        cs: ChangeSet, ino: int, datanode: int, start: int, count: int, row: ExtentRow
    ) -> None:
        reserved_here = any(
            d == datanode and s <= start and start + count <= s + n for d, s, n in cs.reserved
        )
        if reserved_here:
            cs.reserved.append((datanode, -start - 1, count))  # marks a reservation given back
        else:
            cs.released.append((datanode, start, count))

    def _next_generation(self) -> int:
        """A generation no allocation had: this term's, and a count within it (terms
        only grow, so after a restore of the metadata the generations the restored
        extents name are older than any written since)."""
        self._allocations += 1
        return (self.term() << 32) | self._allocations

    def _grant(
        self,
        ino: int,
        row: ExtentRow,
        *,
        write: bool,
        state: ReplicaState = ReplicaState.LIVE,
        credential: int = 0,
    ) -> Replica:
        ticket = tickets.sign(
            self.registry.secret,
            row.datanode_id,
            row.block_start,
            row.block_count,
            write=write,
            ttl_seconds=self.ticket_ttl if write else self.read_ticket_ttl,
            credential=credential,
            term=self.term(),
            owner=row.owner(ino),
        )
        node = self.registry.row(row.datanode_id)
        return Replica(
            row.datanode_id,
            node.address if node else "",
            row.block_start,
            ticket.SerializeToString(),
            node.host if node else "",
            node.local_socket if node else "",
            state,
            node.plaintext if node else False,
        )

    # --- replica changes (re-replication) ----------------------------------------------------

    async def add_replica(self, txn: Txn, ino: int, source: ExtentRow, copy: ExtentRow) -> bool:
        """Add `copy` (blocks reserved for it on its datanode, filled from `source`) to
        the file's block group at source.file_index, if that group is unchanged: it
        still has `source` and nothing on copy's datanode. False (nothing changed, the
        reservation is given back at abort) otherwise."""
        txn.cs.reserved.append((copy.datanode_id, copy.block_start, copy.block_count))
        group = [r for r in await self.view(txn, ino) if r.file_index == source.file_index]
        if source not in group or any(r.datanode_id == copy.datanode_id for r in group):
            return False
        txn.cs.extents_added[(ino, copy.file_index, copy.datanode_id)] = copy
        txn.cs.extents_changed.add(ino)
        return True

    async def drop_replicas(
        self, txn: Txn, ino: int, rows: Iterable[ExtentRow], hold: Callable[[int], bool]
    ) -> None:
        """Drop replica rows of file `ino` that the transaction still sees; their blocks
        are released, or held for their datanode's return where `hold(datanode)`."""
        current = set(await self.view(txn, ino))
        cs = txn.cs
        for row in rows:
            if row not in current:
                continue
            self._remove(cs, ino, row)
            released = (row.datanode_id, row.block_start, row.block_count)
            if hold(row.datanode_id):
                cs.released_held.append(released)
            else:
                cs.released.append(released)
            cs.extents_changed.add(ino)

    # --- the end of a transaction ----------------------------------------------------------

    async def prepare_commit(self, txn: Txn) -> None:
        """Record the final block lists the commit will publish."""
        cs = txn.cs
        for ino in cs.extents_changed:
            cs.final_extents[ino] = tuple(await self.view(txn, ino))
        cs.held_until = self.held_until(cs.extents_changed)

    def publish_committed(self, cs: ChangeSet) -> None:
        """After PostgreSQL committed `cs`: publish block lists, settle the allocator."""
        epoch = self.cache.epoch
        for ino, rows in cs.final_extents.items():
            self.cache.extents.put(ino, rows, epoch)
        for ino in cs.created - cs.final_extents.keys():
            created = cs.inodes.get(ino)
            if created is not None and created.kind is FileKind.FILE:
                # A new file has no blocks: its writer need not ask PostgreSQL.
                self.cache.extents.put(ino, (), epoch)
        # Tickets issued while the group was being written count too.
        until = max(cs.held_until, self.held_until(cs.extents_changed))
        allocator = self.allocator
        # (A snapshot may still name some of them: those stay used.)
        for datanode, start, count in cs.released:
            allocator.drop_reference(datanode, start, count, until)
        for datanode, start, count in cs.released_held:
            allocator.drop_reference(datanode, start, count, math.inf)
        self._give_back(cs, committed=True)

    def aborted(self, cs: ChangeSet) -> None:
        """The transaction ended without committing: its reservations are free again.
        Unless its commit's outcome is unknown: then PostgreSQL may hold its blocks as
        the file's, and they stay from use, as the blocks it released do, until the
        allocator is loaded again (at the next start or takeover)."""
        if not cs.outcome_unknown:
            self._give_back(cs, committed=False)
            return
        for datanode, start, count in cs.reserved:
            if start >= 0:
                self.allocator.keep_in_doubt(datanode, count, reserved=True)
        for datanode, _, count in (*cs.released, *cs.released_held):
            self.allocator.keep_in_doubt(datanode, count, reserved=False)
        cs.reserved.clear()

    def _give_back(self, cs: ChangeSet, *, committed: bool) -> None:
        for datanode, start, count in cs.reserved:
            if start < 0:  # reserved, then dropped by the same transaction
                if committed:
                    self.allocator.release(datanode, -start - 1, count)
            elif committed:
                self.allocator.settle(datanode, count)
            else:
                self.allocator.give_back(datanode, start, count)
        cs.reserved.clear()
