"""Directory leases: while a client session holds one on a directory, it alone reads
and changes that directory's entries, so it may answer for them itself and send its
changes in batches (the mount's write-behind of small files).

A lease is taken when the directory is made (MkDir with `lease`), inside the making
transaction: nobody else can have seen the directory, so the holder knows every entry
it will ever have. Its owner may also lease an existing directory (LeaseDir) that no
transaction is changing: the holder then lists it once to know every entry. Another
session
that needs the entries (a name looked up or resolved in it, a listing, a change in it,
removing it, a walk or summary of a subtree) recalls the lease: the holder hears of it
through its Recalls request, sends what it has pending and releases it, and the other
session waits until then, or until the recall timeout, after which the lease is taken
away. A session's leases end with it.

Who asks is the session serving the request (`serving`, set once per client stream);
work of the namenode itself (no session) is never held up.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from plasmafs.core.errors import BusyError
from plasmafs.namenode.inode_records import ROOT_INO

log = logging.getLogger(__name__)

MAX_DEPTH = 4096  # directory levels followed up from a leased directory at most
UNSURE_WAIT = 0.05  # s a recall waits for leased directories still being made

serving: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "pfs_lease_session", default=None
)


@dataclass(slots=True)
class _Holder:
    """One session's leases and what it has not been told yet."""

    dirs: set[int] = field(default_factory=set)
    recalled: set[int] = field(default_factory=set)
    revoked: set[int] = field(default_factory=set)
    news: asyncio.Event = field(default_factory=asyncio.Event)


class LeaseTable:
    """The namenode's directory leases."""

    def __init__(self, recall_timeout: float) -> None:
        self.recall_timeout = recall_timeout
        self._owner: dict[int, object] = {}  # directory inode -> holding session
        self._let_go: dict[int, asyncio.Event] = {}  # set when the lease ends
        self._holders: dict[object, _Holder] = {}
        self.recalls = 0
        self.revocations = 0

    def __len__(self) -> int:
        return len(self._owner)

    def free_for_caller(self, ino: int) -> bool:
        """True unless a session other than the one serving this request leases `ino`."""
        owner = self._owner.get(ino)
        return owner is None or owner is serving.get()

    def held_by_caller(self, ino: int) -> bool:
        """True if the session serving this request leases `ino`."""
        owner = self._owner.get(ino)
        return owner is not None and owner is serving.get()

    def take(self, ino: int) -> None:
        """Lease directory `ino` to the session serving this request (again: no change)."""
        session = serving.get()
        if session is None:
            raise RuntimeError("a lease needs a client session")
        if self._owner.get(ino) is session:
            return
        self._owner[ino] = session
        self._let_go[ino] = asyncio.Event()
        self._holders.setdefault(session, _Holder()).dirs.add(ino)

    async def admit(self, ino: int) -> None:
        """Return once the entries of directory `ino` may be used by the session serving
        this request: at once unless another session leases it; else once that one
        released it (recalled now) or lost it to the recall timeout."""
        if not self._owner:
            return
        owner = self._owner.get(ino)
        if owner is None or owner is serving.get() or serving.get() is None:
            return
        await self._recall(owner, ino)

    async def admit_below(
        self, root: int, parent_of: Callable[[int], Awaitable[int | None]]
    ) -> None:
        """Return once no other session leases a directory in the subtree of `root`
        (for walks and summaries); `parent_of` gives a directory's parent. Directories
        made since are not waited for: a walk may or may not see what changes while it
        runs."""
        me = serving.get()
        if me is None or not self._owner:
            return
        foreign = [(o, ino) for ino, o in list(self._owner.items()) if o is not me]
        inside = [(o, ino) for o, ino in foreign if await _below(ino, root, parent_of)]
        await asyncio.gather(*(self._recall(o, ino) for o, ino in inside))

    async def recall_below(
        self, root: int, parent_of: Callable[[int], Awaitable[int | None]], rounds: int = 8
    ) -> None:
        """Return once no session at all leases a directory in the subtree of `root`
        (for the namenode's own work that must see every entry there, such as setting
        a quota). Leases the holders take below meanwhile (their queued mkdirs, sent
        as they let go) are recalled in the next round; BusyError after `rounds`."""
        for _ in range(rounds):
            inside, unsure = [], 0
            for ino, owner in list(self._owner.items()):
                below = await _below(ino, root, parent_of, unknown=None)
                if below:
                    inside.append((owner, ino))
                elif below is None:
                    unsure += 1  # made by a transaction not committed yet
            if not inside and not unsure:
                return
            await asyncio.gather(*(self._recall(o, ino) for o, ino in inside))
            if unsure and not inside:
                await asyncio.sleep(UNSURE_WAIT)
        raise BusyError(f"directories below inode {root} keep being leased; try again")

    async def _recall(self, owner: object, ino: int) -> None:
        holder = self._holders[owner]
        if ino not in holder.recalled:
            self.recalls += 1
            holder.recalled.add(ino)
            holder.news.set()
        let_go = self._let_go[ino]
        try:
            async with asyncio.timeout(self.recall_timeout):
                await let_go.wait()
        except TimeoutError:
            if self._owner.get(ino) is owner:
                log.warning("lease on directory %d not released in %gs: taken away",
                            ino, self.recall_timeout)  # fmt: skip
                self.revocations += 1
                holder.revoked.add(ino)
                holder.news.set()
                self._end(ino)

    def release(self, dirs: list[int]) -> None:
        """The session serving this request lets go of `dirs` (others are ignored)."""
        session = serving.get()
        for ino in dirs:
            if self._owner.get(ino) is session and session is not None:
                self._end(ino)

    def end_session(self, session: object) -> None:
        """Every lease of `session` ends (its stream ended)."""
        holder = self._holders.pop(session, None)
        if holder is None:
            return
        for ino in list(holder.dirs):
            if self._owner.get(ino) is session:
                self._end(ino, holder)
        holder.news.set()

    def forget(self, ino: int) -> None:
        """Directory `ino` is gone: its lease ends."""
        if ino in self._owner:
            self._end(ino)

    async def news(self, wait: float) -> tuple[list[int], list[int]]:
        """For the session serving this request: the leases others recalled and those
        taken away since it last asked, waiting up to `wait` seconds for some."""
        session = serving.get()
        if session is None:
            return [], []
        holder = self._holders.setdefault(session, _Holder())  # ends with the session
        if not holder.recalled and not holder.revoked and wait > 0:
            holder.news.clear()
            try:
                async with asyncio.timeout(wait):
                    await holder.news.wait()
            except TimeoutError:
                pass
        recalled = sorted(i for i in holder.recalled if self._owner.get(i) is session)
        revoked = sorted(holder.revoked)
        holder.recalled.difference_update(recalled)
        holder.revoked.clear()
        return recalled, revoked

    def _end(self, ino: int, holder: _Holder | None = None) -> None:
        owner = self._owner.pop(ino)
        if holder is None:
            holder = self._holders.get(owner)
        if holder is not None:
            holder.dirs.discard(ino)
            holder.recalled.discard(ino)
        self._let_go.pop(ino).set()


async def _below(
    ino: int,
    root: int,
    parent_of: Callable[[int], Awaitable[int | None]],
    unknown: bool | None = False,
) -> bool | None:
    """True if directory `ino` is `root` or below it; `unknown` if it is not committed
    (or a directory above it is not)."""
    current: int | None = ino
    for _ in range(MAX_DEPTH):
        if current == root:
            return True
        if current == ROOT_INO:
            return False
        if current is None:
            return unknown
        current = await parent_of(current)
    return False
