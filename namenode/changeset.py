"""A transaction's pending writes, held by the namenode until commit.

The change set records the final state it wants, not a log: whole inode rows it
replaces (under an exclusive lock), entries it sets or removes (under an exclusive
lock on the entry), and commutative "touches" of directories (mtime and link count
deltas) that need only a shared lock, so that many transactions can create in one
directory at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.namenode.inode_records import ExtentRow, Inode


@dataclass(slots=True)
class Touch:
    """A commutative directory update: mtime/ctime = max(old, mtime_ns), nlink += delta."""

    mtime_ns: int
    nlink_delta: int = 0
    # The last overlay (a committed row, and that row with this touch applied): each
    # change in the directory looks it up again, and the row rarely changes meanwhile.
    overlaid: tuple[Inode, Inode] | None = None


@dataclass(slots=True)
class ChangeSet:
    """Pending writes of one transaction."""

    inodes: dict[int, Inode | None] = field(default_factory=dict)
    entries: dict[tuple[int, str], int | None] = field(default_factory=dict)
    touches: dict[int, Touch] = field(default_factory=dict)
    created: set[int] = field(default_factory=set)
    deleted_kinds: dict[int, FileKind] = field(default_factory=dict)
    dir_parents: dict[int, int] = field(default_factory=dict)
    children: dict[int, set[str]] = field(default_factory=dict)
    # Block lists: rows to add (keyed by ino, file_index, datanode), committed rows to
    # drop, committed blocks to quarantine at commit, and blocks reserved by this
    # transaction (returned to the allocator if it aborts).
    extents_added: dict[tuple[int, int, int], ExtentRow] = field(default_factory=dict)
    extents_dropped: set[tuple[int, int, int]] = field(default_factory=set)
    released: list[tuple[int, int, int]] = field(default_factory=list)
    # Blocks of replaced replicas on dead datanodes: held until the datanode returns.
    released_held: list[tuple[int, int, int]] = field(default_factory=list)
    reserved: list[tuple[int, int, int]] = field(default_factory=list)
    extents_changed: set[int] = field(default_factory=set)
    extents_replaced: set[tuple[int, int, int]] = field(default_factory=set)
    final_extents: dict[int, tuple[ExtentRow, ...]] = field(default_factory=dict)
    # Released blocks stay unused until then (time.time()): read tickets for them live.
    held_until: float = 0.0
    # Files whose replication changed: replica health checks them again after commit.
    recheck: set[int] = field(default_factory=set)
    # What the commit changes in directories' usage (namenode/usage.py), made at commit.
    usage: list[tuple] = field(default_factory=list)
    # What it was charged against directory quotas while queued (namenode/quotas.py).
    quota_charges: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Its part of its group commit's time in PostgreSQL (fair use charges it).
    database_seconds: float = 0.0
    # Its group commit failed in a way that leaves unknown whether PostgreSQL has it.
    outcome_unknown: bool = False

    def is_empty(self) -> bool:
        """True when committing would change nothing."""
        return not (
            self.inodes
            or self.entries
            or self.touches
            or self.extents_added
            or self.extents_dropped
        )

    def put_inode(self, inode: Inode, *, created: bool = False) -> None:
        """Replace the whole row of `inode`; folds in any pending touch of it."""
        self.inodes[inode.ino] = inode
        self.touches.pop(inode.ino, None)
        if created:
            self.created.add(inode.ino)

    def put_changed_inode(self, inode: Inode, attr: Attr, data: bytes | None) -> Attr:
        """Replace `inode`'s row with these attributes and inline content, as a new
        version once per transaction; returns the attributes written."""
        new = replace(attr, version=attr.version + (0 if attr.ino in self.inodes else 1))
        self.put_inode(replace(inode, attr=new, data=data))
        return new

    def delete_inode(self, ino: int, kind: FileKind) -> None:
        """Remove an inode; an inode created by this transaction simply disappears."""
        self.touches.pop(ino, None)
        self.dir_parents.pop(ino, None)
        if ino in self.created:
            self.created.discard(ino)
            del self.inodes[ino]
            return
        self.inodes[ino] = None
        self.deleted_kinds[ino] = kind

    def set_entry(self, parent: int, name: str, ino: int | None) -> None:
        """Point (parent, name) at `ino`, or remove the entry with None."""
        self.entries[(parent, name)] = ino
        self.children.setdefault(parent, set()).add(name)

    def touch(self, ino: int, now_ns: int, nlink_delta: int = 0) -> None:
        """Update a directory's times (and link count) commutatively."""
        row = self.inodes.get(ino)
        if row is not None:
            attr = row.attr
            self.inodes[ino] = replace(
                row,
                attr=replace(
                    attr,
                    mtime_ns=max(attr.mtime_ns, now_ns),
                    ctime_ns=max(attr.ctime_ns, now_ns),
                    nlink=attr.nlink + nlink_delta,
                ),
            )
            return
        if ino in self.inodes:  # deleted by this transaction
            return
        pending = self.touches.get(ino)
        if pending is None:
            self.touches[ino] = Touch(now_ns, nlink_delta)
        else:
            pending.mtime_ns = max(pending.mtime_ns, now_ns)
            pending.nlink_delta += nlink_delta
            pending.overlaid = None

    def overlay(self, committed: Inode) -> Inode:
        """`committed` as this transaction sees it, with its pending touch applied."""
        pending = self.touches.get(committed.ino)
        if pending is None:
            return committed
        last = pending.overlaid
        if last is not None and last[0] is committed:
            return last[1]
        attr = committed.attr
        shown = replace(
            committed,
            attr=replace(
                attr,
                mtime_ns=max(attr.mtime_ns, pending.mtime_ns),
                ctime_ns=max(attr.ctime_ns, pending.mtime_ns),
                nlink=attr.nlink + pending.nlink_delta,
            ),
        )
        pending.overlaid = (committed, shown)
        return shown
