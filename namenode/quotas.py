"""Directory quotas: at most so many entries and so many bytes of space (with
replication) in a directory's tree, as HDFS's name and space quotas.

The limits live in PostgreSQL (directory_quotas) and in memory; the usage they are
held to is the one the namenode keeps current (namenode/usage.py). A commit is checked
as it is about to be queued: what it adds to each limited directory above what it
changes (creates, growth, replication, renames into the tree) is charged against the
limit, with the charges of commits queued before it and not yet applied, and the
commit is refused with QuotaExceededError (EDQUOT) if a limit would be passed. A
commit that only removes, or moves within one limited tree, is never refused. So a
limit is hit exactly: usage may reach it, never pass it — except when a limit is set
below what the tree holds already (allowed, as HDFS allows it: the tree then only
shrinks until it is under).

The directory itself counts as one entry (a limit of 1 keeps a directory empty). A
file with several names in a tree counts at each. Removing a directory removes its
quota (the row goes with the inode).
"""

from __future__ import annotations

from dataclasses import dataclass

from plasmafs.core.errors import InvalidArgumentError, NotFoundError, QuotaExceededError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.inode_records import Inode
from plasmafs.namenode.store import Store
from plasmafs.namenode.usage import SPACE, DirectoryUsage, Usage, contribution


@dataclass(frozen=True, slots=True)
class Limit:
    """A directory's quota; None: no limit of that kind."""

    entries: int | None
    space: int | None


class Quotas:
    """The limits of every directory that has one, and the charges of commits queued."""

    def __init__(self, usage: DirectoryUsage, store: Store) -> None:
        self.usage = usage
        self.store = store
        self._limits: dict[int, Limit] = {}
        # Directories with a limit or getting one: no lease is granted in their trees.
        self.limited: set[int] = set()
        self._charged: dict[int, list[int]] = {}  # directory -> [entries, space] queued
        self.refused = 0

    async def load(self) -> None:
        """Read every limit."""
        rows = await self.store.quotas()
        self._limits = {ino: Limit(entries, space) for ino, entries, space in rows}
        self.limited.clear()
        self.limited.update(self._limits)

    def limits_any(self) -> bool:
        """True if some directory has a quota."""
        return bool(self._limits)

    def limit_of(self, ino: int) -> Limit | None:
        """The quota of directory `ino`, None if it has none."""
        return self._limits.get(ino)

    async def fill(self, ino: int, out: pb.Quota) -> bool:
        """Put directory `ino`'s quota and its tree's usage into `out` (once the usage
        is counted, after a start); False (and `out` untouched) if it has no quota."""
        limit = self._limits.get(ino)
        if limit is None:
            return False
        await self.usage.wait_ready()
        if limit.entries is not None:
            out.max_entries = limit.entries
        if limit.space is not None:
            out.max_space = limit.space
        used = self.usage.of(ino)
        if used is not None:
            out.entries, out.space = used.entries, used.space
        return True

    async def set(self, ino: int, entries: int | None, space: int | None) -> Limit:
        """Give directory `ino` these limits (None keeps a kind as it is); the quota."""
        if entries is not None and entries < 1:
            raise InvalidArgumentError("a quota on entries is at least 1 (the directory)")
        if space is not None and space < 0:
            raise InvalidArgumentError("a quota on space is not negative")
        known = self._limits.get(ino)
        old = known or Limit(None, None)
        new = Limit(
            old.entries if entries is None else entries, old.space if space is None else space
        )
        if new.entries is None and new.space is None:
            raise InvalidArgumentError("a quota needs a limit on entries or on space")
        # In force from now; a removal of the directory committed meanwhile takes it
        # away (as PostgreSQL's cascade takes the row), and it is not put back.
        self._limits[ino] = new
        self.limited.add(ino)
        try:
            await self.store.set_quota(ino, new.entries, new.space)
        except BaseException:
            if self._limits.get(ino) is new:
                self._restore(ino, known)
            raise
        if self._limits.get(ino) is not new:
            raise NotFoundError(f"directory inode {ino} was removed")
        return new

    def _restore(self, ino: int, limit: Limit | None) -> None:
        if limit is None:
            self._limits.pop(ino, None)
            self.limited.discard(ino)
        else:
            self._limits[ino] = limit

    async def clear(self, ino: int) -> None:
        """Remove directory `ino`'s quota (none: nothing happens)."""
        await self.store.clear_quota(ino)
        self._limits.pop(ino, None)
        self.limited.discard(ino)

    def charge(self, cs: ChangeSet) -> None:
        """Charge a commit about to be queued to the limits above what it changes;
        QuotaExceededError (nothing charged) if one would be passed."""
        if not self._limits or not cs.usage:
            return
        added = self.usage.added_below(cs.usage, self._limits)
        charges = {}
        for ino, (entries, space) in added.items():
            if entries <= 0 and space <= 0:
                continue  # this commit makes the tree no bigger
            self._check(ino, entries, space)
            charges[ino] = (max(entries, 0), max(space, 0))
        for ino, (entries, space) in charges.items():
            queued = self._charged.setdefault(ino, [0, 0])
            queued[0] += entries
            queued[1] += space
        cs.quota_charges = charges

    async def check_growth(
        self, cs: ChangeSet, inode: Inode, before: Inode | None, at_least: int
    ) -> None:
        """QuotaExceededError if file `inode` (committed as `before`), once it holds
        at least `at_least` bytes, would take a tree with a limit on space past it: a
        writer is stopped as it allocates blocks past a limit, not only at its commit
        (which charges the exact size). Only what is certain is charged — the bytes up
        to the first of the blocks allocated — so a write is not refused for blocks it
        may not fill (space the same transaction frees elsewhere counts at its commit)."""
        if not self._limits:
            return
        space = at_least * inode.attr.replication
        grows = space - contribution(before)[SPACE]
        if grows <= 0:
            return
        await self.usage.wait_ready()
        limited: set[int] = set()
        for parent in await self.usage.directories_of(cs, inode.ino, before):
            above = self.usage.above(parent, cs.dir_parents)
            limited.update(d for d in above if d in self._limits)
        for ino in limited:
            if self._limits[ino].space is not None:
                self._check(ino, 0, grows)

    def committed(self, cs: ChangeSet) -> None:
        """A commit was applied to usage: its charges end; the quotas of the
        directories it removed go with them."""
        self.release(cs)
        if self._limits:
            for ino in cs.deleted_kinds:
                if self._limits.pop(ino, None) is not None:
                    self.limited.discard(ino)

    def release(self, cs: ChangeSet) -> None:
        """A charged commit was applied to usage, or failed: its charges end."""
        for ino, (entries, space) in cs.quota_charges.items():
            queued = self._charged.get(ino)
            if queued is None:
                continue
            queued[0] -= entries
            queued[1] -= space
            if queued == [0, 0]:
                del self._charged[ino]
        cs.quota_charges = {}

    def _check(self, ino: int, entries: int, space: int) -> None:
        limit = self._limits[ino]
        used = self.usage.of(ino) or Usage(0, 1, 0, 0, 0, 0, 0, 0)
        queued = self._charged.get(ino, (0, 0))
        self._hold(ino, "entries", limit.entries, used.entries + queued[0], entries)
        self._hold(
            ino, "bytes of space (with replication)", limit.space, used.space + queued[1], space
        )

    def _hold(self, ino: int, what: str, most: int | None, taken: int, more: int) -> None:
        """QuotaExceededError if adding `more` to `taken` passes `most` (None: no limit)."""
        if most is None or more <= 0 or taken + more <= most:
            return
        self.refused += 1
        raise QuotaExceededError(
            f"the quota of directory inode {ino} allows {most} {what}; "
            f"this change would make {taken + more}"
        )
