"""An in-memory stand-in for the namenode's `Store`, for unit tests of the namespace
rules: the whole namenode stack above the store (cache, coalescing reader, committer,
transactions, locks, leases, the rules) runs unchanged over plain dictionaries, so a
rule is checked in milliseconds.

It keeps what the rules read and what a group commit writes, with `apply_group`'s
meaning (upserts, unlinks, links, removals, then directory touches, each answered with
the touched directory's new row). It is no model of PostgreSQL: no concurrency of its
own, no durability, no datanode bookkeeping beyond registration, no subtree snapshots.
`tests/integration/test_memory_store_agrees.py` runs the same rule scenarios over
PostgreSQL and over this, and must find the same outcomes; everything else stays in
the PostgreSQL tier.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import NotActiveError, StorageError
from plasmafs.core.value_checks import DEFAULT_LOCATION
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.inode_numbers import INODE_BATCH
from plasmafs.namenode.inode_records import ROOT_INO, ExtentRow, Inode
from plasmafs.namenode.lease_store import LeaseState, Renewal
from plasmafs.namenode.store import DatanodeRow, ListedEntry


def _root() -> Inode:
    """The root directory a migrated database starts with (sql/0001)."""
    now = time.time_ns()
    attr = Attr(
        ino=ROOT_INO, kind=FileKind.DIRECTORY, mode=0o755, uid=0, gid=0, size=0,
        mtime_ns=now, ctime_ns=now, nlink=2, replication=1, blocksize=1024 * 1024, version=0,
    )  # fmt: skip
    return Inode(attr)


class MemoryLeases:
    """The lease of `LeaseStore`, in memory, on this process's clock."""

    def __init__(self) -> None:
        self.term = 0
        self.holder = ""
        self.expires = 0.0

    async def take(
        self, place: str, holder: str, address: str, ttl: float
    ) -> tuple[int, float] | None:
        """The next term, unless another's lease runs (one from `place` does not count:
        `LeaseStore.take`'s rule)."""
        if self.expires > time.time() and self.holder.split(" ")[0] != place:
            return None
        self.term, self.holder, self.expires = self.term + 1, holder, time.time() + ttl
        return self.term, 0.0

    async def renew(self, term: int, ttl: float) -> Renewal:
        """Extend the lease of `term`."""
        if term != self.term:
            return Renewal(False, 0.0)
        self.expires = time.time() + ttl
        return Renewal(True, 0.0)

    async def release(self, term: int) -> None:
        """End the lease of `term` now."""
        if term == self.term:
            self.expires = 0.0

    async def state(self) -> LeaseState:
        """The lease as it stands."""
        return LeaseState(self.term, self.holder, "", self.expires - time.time(), 0.0)

    async def close(self) -> None:
        """Nothing to close."""


class MemoryStore:
    """The committed namespace in dictionaries, behind `Store`'s methods."""

    def __init__(self) -> None:
        self.inodes: dict[int, Inode] = {ROOT_INO: _root()}
        self.entries: dict[tuple[int, str], int] = {}
        self.extents: dict[int, list[ExtentRow]] = {}
        self.rows: list[DatanodeRow] = []
        self.leases = MemoryLeases()
        self.unflushed = 0
        self.groups = 0  # group commits applied
        self._next_ino = 2  # the inode_numbers sequence starts at 2
        self.quota_rows: dict[int, tuple[int | None, int | None]] = {}

    # --- what `Leadership`, `Committer` and start-up ask -----------------------------

    async def open(self) -> None:
        """Nothing to connect to."""

    async def close(self) -> None:
        """Nothing to close."""

    async def read_grants_until(self) -> float:
        """No read grants were ever given."""
        return 0.0

    async def extend_read_grants(self, until: float) -> None:
        """Nothing to remember across restarts."""

    async def cluster_settings(self, blocksize: int, make_secret: bytes) -> tuple[int, bytes]:
        """The first namenode's settings, as the database keeps them."""
        return blocksize, make_secret

    async def sync(self) -> None:
        """Everything is as durable as it gets."""
        self.unflushed = 0

    async def reset_writer(self, lane: int) -> None:
        """No connection to reset."""

    # --- datanodes -------------------------------------------------------------------

    async def datanodes(self) -> list[DatanodeRow]:
        """Every registered datanode."""
        return list(self.rows)

    async def register_datanode(
        self,
        identity: str,
        host: str,
        address: str,
        blocksize: int,
        capacity: int,
        local_socket: str,
        principal: str | None = None,
        plaintext: bool = False,
        location: str = DEFAULT_LOCATION,
    ) -> DatanodeRow | None:
        """A new datanode row (or the known identity's, with new addresses)."""
        for i, row in enumerate(self.rows):
            if row.identity == identity:
                self.rows[i] = replace(
                    row, host=host, address=address, local_socket=local_socket, location=location
                )
                return self.rows[i]
        row = DatanodeRow(
            len(self.rows) + 1, identity, host, address, blocksize, capacity, local_socket,
            principal=principal, plaintext=plaintext, location=location,
        )  # fmt: skip
        self.rows.append(row)
        return row

    async def blocks_in_use(self) -> dict[int, list[tuple[int, int]]]:
        """Per datanode, the ranges committed extents occupy."""
        used: dict[int, list[tuple[int, int]]] = {}
        for rows in self.extents.values():
            for x in rows:
                used.setdefault(x.datanode_id, []).append((x.block_start, x.block_count))
        return used

    async def released_until(self) -> list[tuple[int, int, int, float]]:
        """No quarantined ranges are kept: a restart is not modelled."""
        return []

    # --- reads of committed state ------------------------------------------------------

    async def get_inodes(self, inos: list[int]) -> dict[int, Inode]:
        """The committed inodes among `inos`."""
        return {ino: self.inodes[ino] for ino in inos if ino in self.inodes}

    async def get_entries(self, keys: list[tuple[int, str]]) -> dict[tuple[int, str], Inode]:
        """The committed entries among `keys`, with their inodes."""
        return {k: self.inodes[self.entries[k]] for k in keys if k in self.entries}

    async def get_parent(self, ino: int) -> int | None:
        """The directory holding an entry of `ino`, or None."""
        return next((parent for (parent, _), i in self.entries.items() if i == ino), None)

    async def list_entries(
        self, parent: int, after: str, limit: int, with_inodes: bool
    ) -> list[ListedEntry]:
        """Up to `limit` entries of `parent` after `after`, in byte order of their
        names (PostgreSQL's "C" collation; code point order is UTF-8's byte order)."""
        names = sorted(n for (p, n) in self.entries if p == parent and n > after)[:limit]
        listed = []
        for name in names:
            ino = self.entries[(parent, name)]
            # As the store's listing: an inode without the inline data it may hold.
            inode = replace(self.inodes[ino], data=None) if with_inodes else None
            listed.append(ListedEntry(name, ino, inode))
        return listed

    async def get_extents(self, inos: list[int]) -> dict[int, tuple[ExtentRow, ...]]:
        """The committed extents of each inode in `inos` (every key present)."""
        return {ino: tuple(sorted(self.extents.get(ino, []), key=lambda x: x.key)) for ino in inos}

    async def snapshot_rows(self) -> list[tuple[int, str, int, int, int, int]]:
        """Every snapshot (this store takes none: snapshots are PostgreSQL's work)."""
        return []

    async def extent_ranges_if_shared(self) -> list[tuple[int, int, int]]:
        """No extents share blocks without snapshots."""
        return []

    async def reserve_inode_numbers(self) -> int:
        """The first of INODE_BATCH fresh inode numbers."""
        first, self._next_ino = self._next_ino, self._next_ino + INODE_BATCH
        return first

    async def get_parents(self, ino: int) -> list[int]:
        """The directories of every name of `ino`, one per name."""
        return [parent for (parent, _), i in self.entries.items() if i == ino]

    async def usage_rows(
        self, moment: Callable[[], AbstractAsyncContextManager[None]] | None
    ) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int, int, int, int, int]]]:
        """`Store.usage_rows` over the dictionaries (a snapshot: no await after the
        moment)."""
        if moment is not None:
            async with moment():
                pass
        directories, direct = [(0, ROOT_INO, self.inodes[ROOT_INO].attr.mode)], {}
        for (parent, _), ino in self.entries.items():
            a = self.inodes[ino].attr
            if a.kind is FileKind.DIRECTORY:
                directories.append((parent, ino, a.mode))
                continue
            row = direct.setdefault(parent, [parent, 0, 0, 0, 0, 0, 0])
            if a.kind is FileKind.FILE:
                inline = self.inodes[ino].data is not None
                row[1] += 1
                row[4] += a.size
                row[5] += a.size if inline else a.size * a.replication
                row[6] += a.nlink > 1
            elif a.kind is FileKind.SYMLINK:
                row[2] += 1
            else:
                row[3] += 1
        return directories, [tuple(r) for r in direct.values()]  # type: ignore[misc]

    async def quotas(self) -> list[tuple[int, int | None, int | None]]:
        """Every directory quota."""
        return [(ino, e, s) for ino, (e, s) in self.quota_rows.items()]

    async def set_quota(self, ino: int, entries: int | None, space: int | None) -> None:
        """Give directory `ino` this quota."""
        self.quota_rows[ino] = (entries, space)

    async def clear_quota(self, ino: int) -> None:
        """Remove directory `ino`'s quota."""
        self.quota_rows.pop(ino, None)

    async def count_kinds(self) -> dict[FileKind, int]:
        """How many inodes of each kind exist."""
        counts: dict[FileKind, int] = {}
        for inode in self.inodes.values():
            counts[inode.kind] = counts.get(inode.kind, 0) + 1
        return counts

    # --- the group commit ----------------------------------------------------------------

    async def apply(
        self, changesets: Sequence[ChangeSet], lane: int, term: int, durable: bool = True
    ) -> list[Inode]:
        """Apply `changesets` as `apply_group` does, in its order; the touched
        directories' new rows."""
        if term != self.leases.term:
            raise NotActiveError(f"namenode term {term} has ended; another namenode is active")
        before = (
            dict(self.inodes),
            dict(self.entries),
            {i: list(x) for i, x in self.extents.items()},
        )
        try:
            touched = self._apply(changesets)
            self._check_constraints()
        except StorageError:
            self.inodes, self.entries, self.extents = before  # one transaction: all or nothing
            raise
        self.groups += 1
        if not durable:
            self.unflushed += 1
        return touched

    def _apply(self, changesets: Sequence[ChangeSet]) -> list[Inode]:
        touches: dict[int, list[int]] = {}
        for cs in changesets:
            for ino, inode in cs.inodes.items():
                if inode is not None:
                    self.inodes[ino] = inode
            for ino, file_index, datanode in cs.extents_dropped | cs.extents_replaced:
                rows = self.extents.get(ino, [])
                self.extents[ino] = [x for x in rows if x.key != (file_index, datanode)]
            for (ino, _, _), x in cs.extents_added.items():
                self.extents.setdefault(ino, []).append(x)
            for key, target in cs.entries.items():
                if target is None:
                    self.entries.pop(key, None)
            for key, target in cs.entries.items():
                if target is not None:
                    self.entries[key] = target
            for ino, inode in cs.inodes.items():
                if inode is None:
                    self.inodes.pop(ino, None)
                    self.quota_rows.pop(ino, None)  # its quota goes with it (ON DELETE CASCADE)
            for ino, touch in cs.touches.items():
                merged = touches.setdefault(ino, [0, 0])
                merged[0] = max(merged[0], touch.mtime_ns)
                merged[1] += touch.nlink_delta
        touched = []
        for ino in sorted(touches):
            inode = self.inodes.get(ino)
            if inode is None:
                continue
            mtime_ns, nlink_delta = touches[ino]
            a = inode.attr
            attr = replace(
                a,
                mtime_ns=max(a.mtime_ns, mtime_ns),
                ctime_ns=max(a.ctime_ns, mtime_ns),
                nlink=a.nlink + nlink_delta,
                version=a.version + 1,
            )
            self.inodes[ino] = replace(inode, attr=attr)
            touched.append(self.inodes[ino])
        return touched

    def _check_constraints(self) -> None:
        """The schema's foreign keys and name check: what PostgreSQL would refuse."""
        for (parent, name), ino in self.entries.items():
            if parent not in self.inodes:
                raise StorageError(f"group commit: constraint entries_parent_fkey ({parent})")
            if ino not in self.inodes:
                raise StorageError(f"group commit: constraint entries_ino_fkey ({ino})")
            size = len(name.encode("utf-8"))
            if not 1 <= size <= 255 or name in (".", "..") or "/" in name:
                raise StorageError(f"group commit: constraint entries_name_check ({name!r})")
        for ino, rows in self.extents.items():
            if rows and ino not in self.inodes:
                raise StorageError(f"group commit: constraint extents_ino_fkey ({ino})")
