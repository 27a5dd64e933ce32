"""Read-ahead of whole subtrees for programs that walk a tree (`ls -lR`, `du`, `find`).

Such a program lists a directory, then every directory in it, and so on: one listing
request per directory, plus a lookup or getattr per entry whenever the kernel's cache
has expired. When this mount is asked to list a directory whose parent it listed
moments ago, it reads the parent's whole subtree in one walk (a few round trips for
tens of thousands of entries) in the background, and answers listings, lookups and
attributes inside it from what the walk read.

What it answers is never older than the mount lets the kernel keep names and
attributes (the smaller of entry_timeout and attr_timeout; read-ahead is off when
either is 0), so a program sees nothing staler than the kernel's own caches may show
it. Any change made through this mount drops everything read ahead (and stops walks
under way), so the mount's own changes are seen at once, and no walk starts until a
lifetime has passed since the last change (a program that changes a tree as it walks
it, such as rm -rf, would make every walk useless). A name the read-ahead does not
hold is asked of the namenode: absent names are never answered from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from plasmafs.client import Client
from plasmafs.core.attributes import Attr, DirEntry, FileKind

log = logging.getLogger(__name__)

WALK_BUDGET = 50_000  # entries one walk reads at most
MAX_WALKS = 4  # walks under way at once


class _Listing:
    """A directory's whole listing as a walk read it, and when the walk started."""

    __slots__ = ("by_name", "entries", "stamp")

    def __init__(self, stamp: float, entries: list[DirEntry]) -> None:
        self.stamp = stamp
        self.entries = entries
        self.by_name = {e.name: e.attr for e in entries}


@dataclass(slots=True)
class _Reached:
    """A directory a walk has entered: its entries so far, and whether that is all."""

    entries: list[DirEntry] = field(default_factory=list)
    complete: bool = False


class _Walk:
    """One walk under way: the directories it has entered, and an event set whenever
    one of them is complete (replaced after each, for the next waiter)."""

    def __init__(self, root: int, started: float) -> None:
        self.root = root
        self.started = started
        self.reached: dict[int, _Reached] = {}
        self.finished = False
        self._progress = asyncio.Event()

    def progressed(self) -> None:
        event, self._progress = self._progress, asyncio.Event()
        event.set()

    async def next_progress(self) -> None:
        await self._progress.wait()


class ReadAhead:
    """Subtrees read ahead for one mount (see the module's docstring)."""

    def __init__(self, fs: Client, lifetime: float, *, budget: int = WALK_BUDGET) -> None:
        self.fs = fs
        self.lifetime = lifetime
        self.budget = budget
        self.walks_started = 0
        self._listings: dict[int, _Listing] = {}
        self._attrs: dict[int, tuple[float, Attr]] = {}
        self._parents: dict[int, int] = {}  # directory inode -> the directory holding it
        self._parents_seen: dict[int, float] = {}
        self._listed: dict[int, float] = {}  # directory inode -> when it was last listed
        self._walked: dict[int, float] = {}  # walk root -> when its last walk started
        self._walks: dict[int, _Walk] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._expired_at = 0.0
        self._changed = -float("inf")  # when the mount last changed something

    @property
    def enabled(self) -> bool:
        """False when the mount's lifetimes forbid caching."""
        return self.lifetime > 0

    # --- answers ----------------------------------------------------------------------------

    async def listing(self, ino: int) -> list[DirEntry] | None:
        """Every entry of directory `ino` with attributes, if read ahead (waiting for a
        walk under way that will reach it); None: list it from the namenode. A walk of
        its parent's subtree starts if the parent was listed moments ago."""
        if not self.enabled:
            return None
        now = time.monotonic()
        self._expire(now)
        self._listed[ino] = now
        cached = self._listings.get(ino)
        if cached is not None and now - cached.stamp < self.lifetime:
            return cached.entries
        walk = self._covering(ino)
        if walk is None:
            parent = self._parents.get(ino)
            if parent is not None and self._recently(self._listed, parent, now):
                walk = self._start(parent, now)
        if walk is None:
            return None
        return await self._reach(walk, ino)

    def listed(self, ino: int, page: list[DirEntry]) -> None:
        """A page of directory `ino` was listed from the namenode: its directories'
        parent is `ino` (what starts a walk when one of them is listed next)."""
        if not self.enabled:
            return
        now = time.monotonic()
        self._expire(now)
        for item in page:
            if item.kind is FileKind.DIRECTORY:
                self._learn_parent(item.ino, ino, now)

    def attr(self, ino: int) -> Attr | None:
        """The attributes of `ino`, if read ahead moments ago."""
        cached = self._attrs.get(ino)
        if cached is None or time.monotonic() - cached[0] >= self.lifetime:
            return None
        return cached[1]

    def entry(self, parent: int, name: str) -> Attr | None:
        """The attributes of `name` in directory `parent`, if its listing was read
        ahead moments ago and holds it (None also when it does not: ask the namenode)."""
        cached = self._listings.get(parent)
        if cached is None or time.monotonic() - cached.stamp >= self.lifetime:
            return None
        return cached.by_name.get(name)

    def forget(self) -> None:
        """Drop everything read ahead and stop walks under way (a change was made)."""
        self._changed = time.monotonic()
        if not (self._listings or self._attrs or self._walks):
            return
        self._listings.clear()
        self._attrs.clear()
        self._walked.clear()
        for walk in self._walks.values():
            walk.finished = True
            walk.progressed()
        self._walks.clear()
        for task in self._tasks:
            task.cancel()

    async def close(self) -> None:
        """Stop walks under way."""
        self.forget()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- walks --------------------------------------------------------------------------------

    def _recently(self, times: dict[int, float], ino: int, now: float) -> bool:
        when = times.get(ino)
        return when is not None and now - when < self.lifetime

    def _covering(self, ino: int) -> _Walk | None:
        """A walk under way that has entered `ino`, or will (it is in a directory the
        walk has entered and not finished)."""
        parent = self._parents.get(ino)
        for walk in self._walks.values():
            if ino in walk.reached:
                return walk
            held_by = walk.reached.get(parent) if parent is not None else None
            if held_by is not None and not held_by.complete:
                return walk
        return None

    def _start(self, root: int, now: float) -> _Walk | None:
        if root in self._walks or len(self._walks) >= MAX_WALKS:
            return self._walks.get(root)
        if self._recently(self._walked, root, now):
            return None  # walked moments ago: what it did not reach is listed directly
        if now - self._changed < self.lifetime:
            return None  # the mount is changing things: a walk would be dropped at once
        walk = self._walks[root] = _Walk(root, now)
        self._walked[root] = now
        self.walks_started += 1
        task = asyncio.create_task(self._run(walk))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return walk

    async def _reach(self, walk: _Walk, ino: int) -> list[DirEntry] | None:
        """The entries of `ino` once `walk` has read them all; None if it stops first."""
        while True:
            reached = walk.reached.get(ino)
            if reached is not None and reached.complete:
                return reached.entries
            if walk.finished:
                return None
            parent = walk.reached.get(self._parents.get(ino, -1))
            if reached is None and parent is not None and parent.complete:
                return None  # its parent is read and it is not there
            await walk.next_progress()

    async def _run(self, walk: _Walk) -> None:
        """Read the subtree of `walk.root`, up to the budget, into the caches."""
        stamp = walk.started  # every page is read after this: nothing is older
        open_dirs: list[tuple[str, int]] = []  # (path, inode) of directories being read
        count = 0
        try:
            async with contextlib.aclosing(self.fs.walk(walk.root)) as entries:
                async for item in entries:
                    attr = item.attr
                    self._attrs[attr.ino] = (stamp, attr)
                    if item.path:
                        parent_path, _, name = item.path.rpartition("/")
                        while open_dirs and open_dirs[-1][0] != parent_path:
                            self._complete(walk, open_dirs.pop()[1], stamp)
                        if not open_dirs:
                            break  # cannot happen in a depth-first walk; stop safely
                        parent = open_dirs[-1][1]
                        walk.reached[parent].entries.append(
                            DirEntry(name, attr.ino, attr.kind, attr)
                        )
                        if attr.kind is FileKind.DIRECTORY:
                            self._learn_parent(attr.ino, parent, stamp)
                    if attr.kind is FileKind.DIRECTORY and not item.unreadable:
                        walk.reached[attr.ino] = _Reached()
                        open_dirs.append((item.path, attr.ino))
                    count += 1
                    if count >= self.budget:
                        open_dirs.clear()  # not read to the end: none of these is whole
                        break
                while open_dirs:
                    self._complete(walk, open_dirs.pop()[1], stamp)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the directories are listed directly instead
            log.info("read-ahead of directory inode %d stopped: %s", walk.root, exc)
        finally:
            walk.finished = True
            walk.progressed()
            if self._walks.get(walk.root) is walk:
                del self._walks[walk.root]

    def _complete(self, walk: _Walk, ino: int, stamp: float) -> None:
        reached = walk.reached[ino]
        reached.complete = True
        if self._walks.get(walk.root) is walk:  # not forgotten meanwhile
            self._listings[ino] = _Listing(stamp, reached.entries)
        walk.progressed()

    def _learn_parent(self, ino: int, parent: int, now: float) -> None:
        self._parents[ino] = parent
        self._parents_seen[ino] = now

    def _expire(self, now: float) -> None:
        """Drop what has outlived its lifetime (at most once a lifetime: it scans)."""
        if now - self._expired_at < self.lifetime:
            return
        self._expired_at = now
        for ino in [k for k, v in self._listings.items() if now - v.stamp >= self.lifetime]:
            del self._listings[ino]
        for ino in [k for k, (when, _) in self._attrs.items() if now - when >= self.lifetime]:
            del self._attrs[ino]
        for times in (self._listed, self._walked, self._parents_seen):
            for ino in [k for k, when in times.items() if now - when >= self.lifetime]:
                del times[ino]
        for ino in [k for k in self._parents if k not in self._parents_seen]:
            del self._parents[ino]
