"""Whole subtrees in a few round trips: the totals `du` and `count` print, and walks
that list every entry below a directory a page at a time (`find`, `ls -R`).

Both read committed state from a snapshot of PostgreSQL (one per summary, one per
page of a walk), many directories per query: a summary descends one level of the tree
per query, and a walk, while it lists a directory, fetches the entries of the
directories it will reach next along with it. A directory the caller may not read and
search (the bits `readdir` with attributes asks for) is counted and listed, never
entered; the root's own path is resolved with the usual search checks.

A walk's order is depth-first by name, each directory's entries right after it, and
its cursor is the path of the last entry returned, so pages are stable under
concurrent changes as directory pages are: an entry present for the whole walk is
returned once, one created or removed meanwhile may or may not be.

A walk in key order (the order of an object store's listing, which the S3 gateway
serves) sorts each entry by its path with a "/" after a directory's name: so "a.txt"
comes before the entries of directory "a", and "a0" after them. Entries are still
fetched in name order; a directory waits (deferred) until the first name that sorts
after its name and "/", and a cursor is such a key ("d/" for a directory itself).
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

from plasmafs.core.attributes import FileKind
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.inode_records import Inode, Listed
from plasmafs.namenode.permissions import Caller, R, X, may
from plasmafs.namenode.tree_store import TreeSnapshot, TreeStore
from plasmafs.namenode.usage import DirectoryUsage, Usage, is_closed
from plasmafs.namenode.view import View

WALK_PAGE_MAX = 10_000  # entries per page of a walk
PREFETCH_DIRECTORIES = 256  # directories whose entries one walk query may fetch
LEVEL_BATCH = 10_000  # directories per query of a summary


@dataclass(slots=True)
class Summary:
    """The totals of a subtree."""

    files: int = 0
    directories: int = 0
    symlinks: int = 0
    bytes: int = 0
    space: int = 0  # with replication; a small file kept inline counts its size once
    unreadable: int = 0  # directories not entered
    root: int = 0  # the root's inode number


class WalkItem(NamedTuple):
    """One entry of a walk: its path relative to the root ("" for the root itself).
    (A tuple: a page makes thousands.)"""

    path: str
    inode: Listed
    unreadable: bool = False


def _space(inode: Inode) -> int:
    a = inode.attr
    return a.size if inode.data is not None else a.size * a.replication


@dataclass(slots=True)
class _Frame:
    """A directory the walk is in: entries fetched and not returned yet, and whether
    they are all it has after `after`."""

    ino: int
    path: str
    after: str
    buffer: collections.deque[tuple[str, Listed]] = field(default_factory=collections.deque)
    complete: bool = False
    # Key order: directories fetched and waiting for their place, each name a prefix
    # of the next (the last is the next to come).
    deferred: list[tuple[str, Listed]] = field(default_factory=list)


class Subtrees:
    """Summaries and walks of subtrees."""

    def __init__(self, tree: TreeStore, view: View, usage: DirectoryUsage | None = None) -> None:
        self.tree = tree
        self.view = view
        self.usage = usage
        self.from_usage = 0  # summaries answered from the usage totals (no walk)

    async def summarize(self, who: Caller, where: Place) -> Summary:
        """The totals of the subtree at `where` (a symbolic link at its end followed)."""
        root = await self.view.resolve_place(who, None, where, follow_last=True)
        await self.view.leases.admit_below(root.ino, self.view.committed_parent)
        totals = Summary(root=root.ino)
        if root.kind is FileKind.FILE:
            totals.files, totals.bytes, totals.space = 1, root.attr.size, _space(root)
            return totals
        if root.kind is FileKind.SYMLINK:
            totals.symlinks = 1
            return totals
        totals.directories = 1
        if not _enterable(who, Listed.of(root)):
            totals.unreadable = 1
            return totals
        kept = self.usage.of(root.ino) if self.usage is not None else None
        if (
            kept is not None
            and not kept.linked
            and (who.superuser or not _closed_below(kept, root))
        ):
            # Every directory in it is one the caller may enter, no file has two names:
            # the totals kept are the walk's answer.
            self.from_usage += 1
            return Summary(
                kept.files, kept.directories, kept.symlinks, kept.bytes, kept.space, 0, root.ino
            )
        frontier = [root.ino]
        linked: set[int] = set()  # files with several names, counted once
        async with self.tree.snapshot() as snap:
            while frontier:
                below: list[int] = []
                for start in range(0, len(frontier), LEVEL_BATCH):
                    level, directories = await snap.level(frontier[start : start + LEVEL_BATCH])
                    for ino, size, space in level.linked:
                        if ino not in linked:
                            linked.add(ino)
                            totals.files, totals.bytes = totals.files + 1, totals.bytes + size
                            totals.space += int(space)
                    totals.files += level.files
                    totals.directories += level.directories
                    totals.symlinks += level.symlinks
                    totals.bytes += level.bytes
                    totals.space += level.space
                    entered = [d.ino for d in directories if may(who, d.mode, d.uid, d.gid, R | X)]
                    totals.unreadable += len(directories) - len(entered)
                    below.extend(entered)
                frontier = below
        return totals

    async def walk(
        self,
        who: Caller,
        where: Place,
        after: list[str],
        limit: int,
        depth: int = 0,
        *,
        key_order: bool = False,
        after_directory: bool = False,
    ) -> tuple[list[WalkItem], bool]:
        """Up to `limit` entries of the subtree at `where` following the entry at
        relative path `after` (names; empty: from the root itself), and whether more
        may follow; `depth` N > 0: only entries at most N levels below the root.
        `key_order`: in the order of keys (see the module), `after` a key, which
        `after_directory` ends with "/"; it need not exist."""
        resolved = await self.view.resolve_place(who, None, where, follow_last=True)
        await self.view.leases.admit_below(resolved.ino, self.view.committed_parent)
        root = Listed.of(resolved)
        enterable = _enterable(who, root)
        items: list[WalkItem] = []
        if not after:
            items.append(WalkItem("", root, root.kind == _DIRECTORY and not enterable))
        if not enterable:
            return items, False
        async with self.tree.snapshot() as snap:
            if key_order:
                stack = await _resume_by_key(snap, who, root, after, after_directory, depth)
            else:
                stack = await _resume(snap, who, root, after, depth)
            # The root rides along with its first page: a page of one entry would
            # leave no cursor after it.
            page = _Page(snap, who, stack, items, limit + len(items), depth, key_order)
            more = await page.fill()
        return items, more


_DIRECTORY = int(FileKind.DIRECTORY)


def _closed_below(kept: Usage, root: Inode) -> int:
    """Directories below `root` (itself not counted: the caller may enter it) that some
    may not enter."""
    return kept.closed - is_closed(root.attr.mode)


def _enterable(who: Caller, inode: Listed) -> bool:
    return inode.kind == _DIRECTORY and may(who, inode.mode, inode.uid, inode.gid, R | X)


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


async def _resume(
    snap: TreeSnapshot, who: Caller, root: Listed, after: list[str], depth: int
) -> list[_Frame]:
    """The directories a walk is in just after the entry at `after` (at most `depth`
    deep, if set). Where a name of it is gone (or no longer an enterable directory),
    its directory goes on after it."""
    stack = [_Frame(root.ino, "", after[0] if after else "")]
    for level, name in enumerate(after):
        if depth and len(stack) >= depth:
            break
        inode = await snap.entry(stack[-1].ino, name)
        if inode is None or not _enterable(who, inode):
            break
        following = after[level + 1] if level + 1 < len(after) else ""
        stack.append(_Frame(inode.ino, _join(stack[-1].path, name), following))
    return stack


async def _resume_by_key(
    snap: TreeSnapshot,
    who: Caller,
    root: Listed,
    after: list[str],
    after_directory: bool,
    depth: int,
) -> list[_Frame]:
    """The directories a key-order walk is in just after key `after` (names, with a
    "/" after the last one if `after_directory`): at each level the names that sort
    after the key's name and "/" (or the name itself, at the last level), the
    directories waiting among the name's prefixes, and the named directory entered
    where the key goes on below it."""
    stack = [_Frame(root.ino, "", "")]
    for level, name in enumerate(after):
        frame = stack[-1]
        within = level + 1 < len(after) or after_directory
        # A directory named by a prefix of `name` whose next character sorts before
        # "/" has its place after `name`: it is still to come.
        prefixes = [name[:end] for end in range(1, len(name)) if name[end] < "/"]
        found = await snap.entries_named(frame.ino, [*prefixes, name])
        frame.deferred = [
            (prefix, found[prefix])
            for prefix in prefixes
            if prefix in found and found[prefix].kind == _DIRECTORY
        ]
        here = found.get(name)
        if not within:
            frame.after = name
            if here is not None and here.kind == _DIRECTORY:
                frame.deferred.append((name, here))
            break
        frame.after = name + "/"
        if here is None or not _enterable(who, here) or (depth and len(stack) >= depth):
            break
        stack.append(_Frame(here.ino, _join(frame.path, name), ""))
    return stack


class _Page:
    """One page of a walk: depth first from `stack`, with the entries of directories
    the walk will reach soon fetched along with the one it needs now."""

    def __init__(
        self,
        snap: TreeSnapshot,
        who: Caller,
        stack: list[_Frame],
        items: list[WalkItem],
        limit: int,
        depth: int,
        key_order: bool = False,
    ) -> None:
        self.snap = snap
        self.key_order = key_order
        self.who = who
        self.stack = stack
        self.items = items
        self.limit = limit
        self.depth = depth  # 0: no limit
        # Entries fetched ahead for directories not entered yet (ino -> entries,
        # complete), bounded to about one page of rows.
        self.ahead: dict[int, tuple[collections.deque[tuple[str, Listed]], bool]] = {}
        self.ahead_rows = 0

    async def fill(self) -> bool:
        """Add entries until the page is full (True: more may follow) or the walk ends."""
        stack, items = self.stack, self.items
        while stack:
            top = stack[-1]
            if not top.buffer and not top.complete:
                await self._fetch()
            if top.deferred and (not top.buffer or top.deferred[-1][0] + "/" < top.buffer[0][0]):
                if len(items) >= self.limit:
                    return True
                self._add(*top.deferred.pop())
                continue
            if not top.buffer:
                stack.pop()
                continue
            if len(items) >= self.limit:
                return True
            name, inode = top.buffer.popleft()
            top.after = name
            if self.key_order and inode.kind == _DIRECTORY:
                top.deferred.append((name, inode))
                continue
            self._add(name, inode)
        return False

    def _add(self, name: str, inode: Listed) -> None:
        """Return the entry `name` of the top directory, and enter it if it is one the
        walk goes into."""
        stack = self.stack
        path = _join(stack[-1].path, name)
        may_enter = _enterable(self.who, inode)
        self.items.append(WalkItem(path, inode, inode.kind == _DIRECTORY and not may_enter))
        if may_enter and (not self.depth or len(stack) < self.depth):
            stack.append(self._frame(inode.ino, path))

    def _frame(self, ino: int, path: str) -> _Frame:
        frame = _Frame(ino, path, "")
        if ino in self.ahead:
            frame.buffer, frame.complete = self.ahead.pop(ino)
            self.ahead_rows -= len(frame.buffer)
        return frame

    async def _fetch(self) -> None:
        """Entries of the top directory after its cursor, and of directories waiting in
        the stack's buffers (nearest first), in one query."""
        top = self.stack[-1]
        targets = [(top.ino, top.after)]
        if self.ahead_rows < self.limit:
            for level in range(len(self.stack) - 1, -1, -1):
                if self.depth and level + 1 >= self.depth:
                    continue  # its directories are not entered
                frame = self.stack[level]
                for _, inode in itertools.chain(reversed(frame.deferred), frame.buffer):
                    if len(targets) >= PREFETCH_DIRECTORIES:
                        break
                    if inode.ino not in self.ahead and _enterable(self.who, inode):
                        targets.append((inode.ino, ""))
        budget = max(1, self.limit - len(self.items))
        found = await self.snap.children(targets, budget)
        full = len(found) == budget
        last = found[-1][0] if found else -1
        by_position: dict[int, collections.deque[tuple[str, Listed]]] = collections.defaultdict(
            collections.deque
        )
        for position, name, inode in found:
            by_position[position].append((name, inode))
        for position, (ino, _) in enumerate(targets):
            if full and position > last:
                break  # not reached by this query
            complete = not full or position < last
            entries = by_position.get(position, collections.deque())
            if position == 0:
                top.buffer.extend(entries)
                top.complete = complete
            else:
                self.ahead[ino] = (entries, complete)
                self.ahead_rows += len(entries)
