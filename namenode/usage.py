"""Usage kept current: what the subtree of every directory holds, in memory.

For each directory the namenode knows the totals of everything below it — files,
directories, symbolic links, other entries, bytes, space with replication — so that
`du -s` or `count` of any tree is one lookup, and quotas (which need the usage of a
tree at every change in it) cost no walk. HDFS does the same: its namenode computes
quota usage when it loads its image and keeps it current with every change.

The totals are computed from PostgreSQL when the namenode opens its namespace (one
scan of the entries: two queries), in the background, so that a namenode serves at
once however large its namespace: the scan reads a snapshot taken at a quiet moment of
the committer (every commit before it applied, none being written), commits published
after it are kept and applied in order once the scan is done. Until then summaries
walk, and commits wait if some directory has a quota. Then the totals are kept
current by commits, with no row in PostgreSQL that all writers of a tree would
update: at commit,
`prepare` turns the change set into usage operations, reading only the committed state
the transaction's locks keep still (the old rows of the inodes it changes, the old
targets of the names it sets); when the group commit is acknowledged, `publish`
applies them in commit order. A change to a file adds its difference to its
directories and their ancestors as they are at publish time; a directory moving takes
its whole subtree's totals from its old ancestors to its new ones, as they are then. So
a create racing the rename of an ancestor lands on the right side whichever commits
first.

A file with several names counts at each of them (a quota charges every tree a name
of it is in); the tree's `linked` total says how many such names there are, and a
summary that must count each file once walks the tree when it is not zero. `closed`
counts the directories below that not everyone may read and search (a summary for a
caller who may not enter them all walks, so as to count only what it may see).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Container
from dataclasses import dataclass
from typing import Protocol

from plasmafs.core.attributes import FileKind
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.inode_records import ROOT_INO, Inode

log = logging.getLogger(__name__)

# The fields of a total, in their order in the lists kept per directory.
FILES, DIRECTORIES, SYMLINKS, OTHERS, BYTES, SPACE, LINKED, CLOSED = range(8)
WIDTH = 8
RECENT_PARENTS = 100_000  # single-name files whose directory is remembered

_OPEN_TO_ALL = 0o555  # read and search for owner, group and others: anyone may enter

_NEW_DIRECTORY = (0, 1, 0, 0, 0, 0, 0, 0)  # what a directory made in the commit adds itself

# Usage operations, as prepared at commit and applied at publish (tuples: thousands
# per second).
CREATE, DETACH, ATTACH, ADD, SELF, DROP, NAME = range(7)


@dataclass(frozen=True, slots=True)
class Usage:
    """The totals of a subtree, its root included."""

    files: int
    directories: int
    symlinks: int
    others: int
    bytes: int
    space: int
    linked: int  # names of files that have several
    closed: int  # directories not everyone may read and search

    @property
    def entries(self) -> int:
        """Every inode of the tree, by name (what a quota on entries counts)."""
        return self.files + self.directories + self.symlinks + self.others


def is_closed(mode: int) -> bool:
    """True for a directory some users may not read or search."""
    return mode & _OPEN_TO_ALL != _OPEN_TO_ALL


def contribution(inode: Inode | None) -> tuple[int, ...]:
    """What a name of `inode` (not a directory) adds to its directory's totals."""
    if inode is None:
        return (0,) * WIDTH
    a = inode.attr
    if a.kind is FileKind.FILE:
        space = a.size if inode.data is not None else a.size * a.replication
        return (1, 0, 0, 0, a.size, space, 1 if a.nlink > 1 else 0, 0)
    if a.kind is FileKind.SYMLINK:
        return (0, 0, 1, 0, 0, 0, 0, 0)
    return (0, 0, 0, 1, 0, 0, 0, 0)


class DirectoryUsage:
    """The totals below every directory, kept current by commits."""

    def __init__(self, view: CommittedState) -> None:
        self.view = view
        self.quotas: QuotaCharges | None = None  # checks each commit when set
        self._totals: dict[int, list[int]] = {}  # below the directory, itself excluded
        self._parents: dict[int, int] = {}  # of every directory but the root
        self._closed: set[int] = set()  # directories that are closed themselves
        self._recent: dict[int, int] = {}  # single-name file -> its directory
        self.ready = False  # loaded and consistent
        self._ready = asyncio.Event()
        self._following: list[list[tuple]] | None = None  # published while a load runs
        self.inconsistencies = 0
        self.loads = 0
        self.load_seconds = 0.0
        self._source: tuple[UsageSource, Quiet] | None = None
        self._loader: asyncio.Task[None] | None = None
        self._counting = False  # a count runs (`follow`)

    async def wait_ready(self) -> None:
        """Return once the totals are loaded."""
        await self._ready.wait()

    async def follow(self, source: UsageSource, committer: Quiet) -> None:
        """Load the totals, then keep them current: what commits publish while the scan
        runs is applied after it, in order. Counts again until it succeeds (PostgreSQL
        away, an inconsistency while replaying); a task of the namespace's lifetime."""
        self._source = (source, committer)
        self._counting = True
        delay = 0.5
        try:
            while not self.ready:
                try:
                    await self._follow_once(source, committer)
                except Exception as exc:
                    self._following = None
                    log.warning("counting directory usage failed (%s); again in %gs", exc, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 30.0)
        finally:
            self._counting = False

    def recount(self, why: str) -> None:
        """Count every directory's usage again, in the background: what the namenode
        knows may have missed a commit (its outcome unknown)."""
        self._inconsistent(why)

    async def _follow_once(self, source: UsageSource, committer: Quiet) -> None:
        began = asyncio.get_running_loop().time()
        self.ready = False
        self._ready.clear()

        @contextlib.asynccontextmanager
        async def quiet_moment() -> AsyncIterator[None]:
            async with committer.quiet():
                yield
                self._following = []  # what is published from now on comes after

        self.compute(*await source.usage_rows(quiet_moment))
        following, self._following = self._following or [], None
        self.ready = True
        for ops in following:
            self.publish(ops)
        if self.ready:
            self._ready.set()
            self.loads += 1
            self.load_seconds = asyncio.get_running_loop().time() - began
            log.info(
                "usage of %d directories counted in %.2fs", len(self._totals), self.load_seconds
            )

    def compute(self, directories: list[DirectoryRow], direct: list[DirectTotals]) -> None:
        """Every directory's totals from its parent and mode (`directories`, the root
        excepted) and what the entries of each directory add up to (`direct`: parent,
        files, symlinks, others, bytes, space, names of files with several)."""
        totals: dict[int, list[int]] = {ROOT_INO: [0] * WIDTH}
        parents: dict[int, int] = {}
        closed: set[int] = set()
        for parent, ino, mode in directories:
            if is_closed(mode):
                closed.add(ino)
            if ino == ROOT_INO:
                continue  # its own row (parent 0): for its mode
            totals[ino] = [0] * WIDTH
            parents[ino] = parent
        for parent, files, symlinks, others, size, space, linked in direct:
            row = totals.get(parent)
            if row is not None:
                row[FILES], row[SYMLINKS], row[OTHERS] = files, symlinks, others
                row[BYTES], row[SPACE], row[LINKED] = int(size), int(space), linked
        for ino in sorted(parents, key=_depths(parents).__getitem__, reverse=True):
            mine, theirs = totals[ino], totals[parents[ino]]
            for k in range(WIDTH):
                theirs[k] += mine[k]
            theirs[DIRECTORIES] += 1
            theirs[CLOSED] += ino in closed
        self._totals, self._parents, self._closed = totals, parents, closed
        self._recent.clear()

    async def count_once(self, source: UsageSource) -> None:
        """Count every directory's usage from committed state, following no commit
        (fsck's fresh count to compare with)."""
        self.compute(*await source.usage_rows(None))
        self.ready = True
        self._ready.set()

    def of(self, ino: int) -> Usage | None:
        """The totals of directory `ino`'s subtree, itself included; None if it is no
        directory known (or usage is not ready)."""
        row = self._totals.get(ino) if self.ready else None
        if row is None:
            return None
        own = list(row)
        own[DIRECTORIES] += 1
        own[CLOSED] += ino in self._closed
        return Usage(*own)

    def differences(self, counted: DirectoryUsage, most: int = 10) -> list[str]:
        """How these totals differ from `counted` (freshly loaded), at most `most`
        directories named."""
        found = []
        names = ("files", "directories", "symlinks", "others", "bytes", "space", "linked", "closed")
        for ino in sorted(set(self._totals) | set(counted._totals)):
            mine, theirs = self.of(ino), counted.of(ino)
            if mine == theirs and self._parents.get(ino) == counted._parents.get(ino):
                continue
            if mine is None or theirs is None:
                where = "kept" if mine is not None else "counted"
                found.append(f"directory usage: inode {ino} is only {where}")
            elif mine != theirs:
                wrong = [
                    f"{n} {a} kept, {b} counted"
                    for n, a, b in zip(names, _values(mine), _values(theirs), strict=True)
                    if a != b
                ]
                found.append(f"directory usage: inode {ino}: " + "; ".join(wrong))
            else:
                found.append(
                    f"directory usage: inode {ino} is kept in {self._parents.get(ino)}, "
                    f"counted in {counted._parents.get(ino)}"
                )
            if len(found) >= most:
                break
        return found

    async def directories_of(self, cs: ChangeSet, ino: int, before: Inode | None) -> list[int]:
        """The directories holding the names of file `ino` (`before`: its committed
        row, None if `cs` made it), one per name."""
        if ino in cs.created:
            return [parent for (parent, _), target in cs.entries.items() if target == ino]
        return await self._names(ino, before, [])

    def above(self, ino: int, made: dict[int, int] | None = None) -> list[int]:
        """Directory `ino` and every directory above it, as of the last publish (or,
        first, as `made`, a transaction's new directories' parents, says)."""
        chain: list[int] = []
        node: int | None = ino
        parents = self._parents
        while node is not None and len(chain) <= len(parents) + len(made or ()):
            chain.append(node)
            node = made[node] if made and node in made else parents.get(node)
        return chain

    # --- commits ----------------------------------------------------------------

    async def prepare_commit(self, cs: ChangeSet) -> None:
        """Record in `cs` what it changes in directories' usage, as it is about to be
        queued for commit."""
        cs.usage = await self.prepare(cs)
        if self.quotas is not None and cs.usage and self.quotas.limits_any():
            await self.wait_ready()  # being counted (a start): charges need the totals
            self.quotas.charge(cs)

    def charges_quotas(self) -> bool:
        """True if commits are charged to quotas (some directory has one)."""
        return self.quotas is not None and self.quotas.limits_any()

    def committed(self, cs: ChangeSet) -> None:
        """Apply what a committed change set changed (in commit order)."""
        if cs.usage:
            self.publish(cs.usage)
        if self.quotas is not None:
            self.quotas.committed(cs)

    def aborted(self, cs: ChangeSet) -> None:
        """A change set that was prepared will not be committed."""
        if self.quotas is not None and cs.quota_charges:
            self.quotas.release(cs)

    def added_below(
        self, ops: list[tuple], directories: Container[int]
    ) -> dict[int, tuple[int, int]]:
        """What operations `ops` add to the entries and space of each of `directories`
        above what they change, in the tree as it will be once they are applied."""
        moved: dict[int, int | None] = {}  # directory -> its parent after the commit
        for op in ops:
            if op[0] == DETACH:
                moved.setdefault(op[1], None)
            elif op[0] == ATTACH:
                moved[op[1]] = op[2]
        added: dict[int, list[int]] = {}

        def charge(start: int, entries: int, space: int) -> None:
            node: int | None = start
            for _ in range(len(self._parents) + len(moved) + 1):
                if node is None:
                    return
                if node in directories:
                    total = added.setdefault(node, [0, 0])
                    total[0] += entries
                    total[1] += space
                node = moved[node] if node in moved else self._parents.get(node)

        for op in ops:
            code = op[0]
            if code == ADD:
                v = op[2]
                charge(op[1], v[FILES] + v[DIRECTORIES] + v[SYMLINKS] + v[OTHERS], v[SPACE])
            elif code in (ATTACH, DETACH):
                whole = self._whole(op[1]) if op[1] in self._totals else _NEW_DIRECTORY
                sign = 1 if code == ATTACH else -1
                entries = whole[FILES] + whole[DIRECTORIES] + whole[SYMLINKS] + whole[OTHERS]
                charge(op[2], sign * entries, sign * whole[SPACE])
        return {ino: (e, s) for ino, (e, s) in added.items()}

    async def prepare(self, cs: ChangeSet) -> list[tuple]:
        """The usage operations of a change set about to be queued for commit. Reads
        the committed rows its transaction's locks keep unchanged until it commits."""
        view = self.view
        removed: dict[int, list[int]] = {}  # inode -> directories losing a name of it
        added: dict[int, list[int]] = {}
        for (parent, name), new in cs.entries.items():
            old = None if parent in cs.created else await view.committed_entry(parent, name)
            if old == new:
                continue
            if old is not None:
                removed.setdefault(old, []).append(parent)
            if new is not None:
                added.setdefault(new, []).append(parent)
        first: list[tuple] = []  # created directories, then directories leaving a place
        middle: list[tuple] = []
        last: list[tuple] = []
        for ino in {*removed, *added, *cs.inodes}:
            created = ino in cs.created
            before = None if created else await view.committed_inode(ino)
            after = cs.inodes.get(ino, before)
            either = after or before
            if either is None:
                continue
            gone, came = removed.get(ino, []), added.get(ino, [])
            if created and after is not None and after.kind is not FileKind.DIRECTORY:
                share = contribution(after)  # the common case, made short: a new file
                middle.extend((ADD, p, share) for p in came)
                last.append((NAME, ino, came[0] if len(came) == 1 else None))
                continue
            if either.kind is FileKind.DIRECTORY:
                if created and after is not None:
                    first.append((CREATE, ino, is_closed(after.attr.mode)))
                first.extend((DETACH, ino, p) for p in gone)
                middle.extend((ATTACH, ino, p) for p in came)
                if after is None:
                    last.append((DROP, ino))
                elif before is not None and is_closed(before.attr.mode) != is_closed(
                    after.attr.mode
                ):
                    middle.append((SELF, ino, is_closed(after.attr.mode)))
                continue
            share_before, share_after = contribution(before), contribution(after)
            if share_before == share_after:  # only names moved: the changed ones say where
                names_before, names_after = list(gone), list(came)
            else:
                names_before = [] if created else await self._names(ino, before, gone)
                names_after = _without(names_before, gone) + list(came)
            if any(share_before):
                negative = tuple(-v for v in share_before)
                middle.extend((ADD, p, negative) for p in names_before)
            if any(share_after):
                middle.extend((ADD, p, share_after) for p in names_after)
            if after is None or after.attr.nlink != 1:
                last.append((NAME, ino, None))
            elif len(names_after) == 1:
                last.append((NAME, ino, names_after[0]))
        return first + middle + last

    async def _names(
        self,
        ino: int,
        before: Inode | None,
        gone: list[int],
    ) -> list[int]:
        """The directories holding the committed names of file `ino`."""
        if before is not None and before.attr.nlink == 1:
            if gone:
                return [gone[0]]
            recent = self._recent.get(ino)
            if recent is not None:
                return [recent]
        return await self.view.committed_parents(ino)

    def publish(self, ops: list[tuple]) -> None:
        """Apply a committed change set's operations (in commit order)."""
        if self._following is not None:
            self._following.append(ops)
            return
        if not self.ready:
            return
        for op in ops:
            code = op[0]
            if code == ADD:
                self._add_up(op[1], op[2], 1)
            elif code == ATTACH:
                ino, parent = op[1], op[2]
                self._parents[ino] = parent
                self._add_up(parent, self._whole(ino), 1)
            elif code == DETACH:
                ino, parent = op[1], op[2]
                if self._parents.pop(ino, None) != parent:
                    self._inconsistent(f"directory {ino} left {parent}, where it was not")
                    return
                self._add_up(parent, self._whole(ino), -1)
            elif code == CREATE:
                self._totals[op[1]] = [0] * WIDTH
                if op[2]:
                    self._closed.add(op[1])
            elif code == SELF:
                self._self_changed(op[1], op[2])
            elif code == DROP:
                self._totals.pop(op[1], None)
                self._closed.discard(op[1])
            elif code == NAME:
                self._remember(op[1], op[2])

    def _whole(self, ino: int) -> tuple[int, ...]:
        row = self._totals.get(ino)
        if row is None:
            self._inconsistent(f"directory {ino} has no totals")
            return (0,) * WIDTH
        whole = list(row)
        whole[DIRECTORIES] += 1
        whole[CLOSED] += ino in self._closed
        return tuple(whole)

    def _self_changed(self, ino: int, closed: bool) -> None:
        if (ino in self._closed) == closed:
            return
        if closed:
            self._closed.add(ino)
        else:
            self._closed.discard(ino)
        parent = self._parents.get(ino)
        if parent is not None:
            delta = [0] * WIDTH
            delta[CLOSED] = 1
            self._add_up(parent, delta, 1 if closed else -1)

    def _add_up(self, ino: int, delta: tuple[int, ...] | list[int], sign: int) -> None:
        """Add `delta` (times `sign`) to directory `ino` and every ancestor it has now."""
        node: int | None = ino
        totals, parents = self._totals, self._parents
        changes = [(k, sign * v) for k, v in enumerate(delta) if v]  # mostly zeros
        while node is not None:
            row = totals.get(node)
            if row is None:
                self._inconsistent(f"directory {node} has no totals")
                return
            for k, v in changes:
                row[k] += v
            node = parents.get(node)

    def _remember(self, ino: int, parent: int | None) -> None:
        if parent is None:
            self._recent.pop(ino, None)
            return
        if len(self._recent) >= RECENT_PARENTS:
            self._recent.clear()  # cheaper than an LRU: a miss costs one query
        self._recent[ino] = parent

    def _inconsistent(self, what: str) -> None:
        """A bug: stop answering from totals that cannot be trusted, and count them
        again (in the background, as at start)."""
        self.inconsistencies += 1
        if self.ready:
            log.error("usage totals disabled until counted again: %s", what)
        self.ready = False
        self._ready.clear()
        self._recent.clear()
        if self._source is not None and not self._counting:
            self._counting = True
            self._loader = asyncio.get_running_loop().create_task(
                self.follow(*self._source), name="pfs-usage-recount"
            )

    async def close(self) -> None:
        """Stop counting again, if it does."""
        if self._loader is not None:
            self._loader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loader


class Quiet(Protocol):
    """The committer's quiet moments."""

    def quiet(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Every acknowledged commit published, none being written."""
        ...


# A directory as a count reads it: (parent, inode, mode).
DirectoryRow = tuple[int, int, int]
# What the entries of one directory add up to: (parent, files, symbolic links, others,
# bytes, space, names of files with several).
DirectTotals = tuple[int, int, int, int, int, int, int]
QuietMoment = Callable[[], contextlib.AbstractAsyncContextManager[None]]


class UsageSource(Protocol):
    """Where the counts come from (the store)."""

    async def usage_rows(
        self, moment: QuietMoment | None
    ) -> tuple[list[DirectoryRow], list[DirectTotals]]:
        """Every directory and the totals of every directory's entries, from one
        snapshot of committed state, taken inside `moment` if given."""
        ...


class QuotaCharges(Protocol):
    """What checks commits against directory quotas (namenode/quotas.py)."""

    def limits_any(self) -> bool:
        """True if some directory has a quota."""
        ...

    def charge(self, cs: ChangeSet) -> None:
        """Charge a prepared commit, or refuse it."""
        ...

    def committed(self, cs: ChangeSet) -> None:
        """A charged commit was applied."""
        ...

    def release(self, cs: ChangeSet) -> None:
        """A charged commit failed."""
        ...


class CommittedState(Protocol):
    """What `prepare` reads (the namenode's view of committed state)."""

    async def committed_entry(self, parent: int, name: str) -> int | None:
        """The inode a committed name points to."""
        ...

    async def committed_inode(self, ino: int) -> Inode | None:
        """A committed inode row."""
        ...

    async def committed_parents(self, ino: int) -> list[int]:
        """The directories of every committed name of `ino`, one per name."""
        ...


def _values(usage: Usage) -> tuple[int, ...]:
    return (
        usage.files, usage.directories, usage.symlinks, usage.others, usage.bytes,
        usage.space, usage.linked, usage.closed,
    )  # fmt: skip


def _without(names: list[int], gone: list[int]) -> list[int]:
    """`names` less one occurrence of each of `gone`."""
    left = list(names)
    for parent in gone:
        if parent in left:
            left.remove(parent)
    return left


def _depths(parents: dict[int, int]) -> dict[int, int]:
    """Every directory's depth below the root."""
    depths: dict[int, int] = {ROOT_INO: 0}
    for start in parents:
        chain = []
        node = start
        while node not in depths:
            chain.append(node)
            node = parents.get(node, ROOT_INO)
            if len(chain) > len(parents):
                raise ValueError("the directory tree has a cycle")
        depth = depths[node]
        for ino in reversed(chain):
            depth += 1
            depths[ino] = depth
    return depths
