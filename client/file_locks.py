"""File locks in the library: POSIX record locks and flock locks, kept by the active
namenode for this client's connection, so they hold between clients on any hosts.

A lock belongs to the connection and an owner number the caller chooses (a mount
uses the kernel's lock owner); it ends when released, or with the connection (a
close, a lost network, a failover: `LockLostError` tells a `FileLock` that it was
lost, since others may have taken it meanwhile). A waiting request given up by
cancelling its task is withdrawn from the namenode's line (and a grant that crossed
the withdrawal is released), so a timeout around a wait never leaves a lock behind.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType

from plasmafs.client.connection import Connection
from plasmafs.core.attributes import Attr
from plasmafs.core.errors import (
    FAILOVER_ERRORS,
    InvalidArgumentError,
    LockLostError,
    error_from_wire,
)
from plasmafs.core.proto import namenode_pb2 as pb

POSIX, FLOCK = pb.LOCK_POSIX, pb.LOCK_FLOCK
UNLOCK, READ, WRITE = pb.LOCK_UNLOCK, pb.LOCK_READ, pb.LOCK_WRITE
EOF = 2**63 - 1  # a range's end that reaches past any end of file
_FIRST_LIBRARY_OWNER = 1 << 62  # owners FileLock numbers itself, apart from a mount's


@dataclass(frozen=True, slots=True)
class LockConflict:
    """A lock that stands in the way (what F_GETLK reports)."""

    type: int  # READ or WRITE
    start: int
    end: int  # inclusive; EOF: to any end of file
    pid: int  # the holder's process id on its host (0 if it gave none)
    same_session: bool  # held through this client's own connection


def _check(family: int, type: int, start: int, end: int) -> None:
    if family not in (POSIX, FLOCK) or type not in (UNLOCK, READ, WRITE):
        raise InvalidArgumentError(f"no lock family {family} or type {type}")
    if not 0 <= start <= end <= EOF:
        raise InvalidArgumentError(f"bad lock range [{start}, {end}]")


async def set_lock_on(
    conn: Connection,
    ino: int,
    type: int,
    *,
    family: int = POSIX,
    owner: int = 0,
    start: int = 0,
    end: int = EOF,
    wait: bool = False,
    pid: int = 0,
) -> None:
    """Take, change or drop (UNLOCK) a lock on inode `ino` over [start, end] for
    `owner` of `conn`; LockedError at once if another holds a conflicting one, unless
    `wait` (then DeadlockError, or InterruptedCallError if the wait is withdrawn)."""
    _check(family, type, start, end)
    request, future = conn.new_request()
    q = request.set_lock
    q.ino, q.family, q.type, q.owner = ino, family, type, owner  # type: ignore[assignment]
    q.start, q.end, q.wait, q.pid = start, end, wait, pid
    try:
        _result(await (asyncio.shield(future) if wait else future))
    except asyncio.CancelledError:
        if wait and not conn.closed:
            await _withdraw(conn, request.id, future, q)
        raise


async def _withdraw(
    conn: Connection, request_id: int, waiting: asyncio.Future[pb.Response], q: pb.SetLock
) -> None:
    """Give up the wait of `request_id`; release the lock if it was granted first."""
    cancel, cancelled = conn.new_request()
    cancel.cancel_lock_wait.request = request_id
    try:
        await cancelled
        response = await waiting
    except Exception:  # the connection went: so did the wait and the lock
        return
    if not response.HasField("error"):
        unlock, unlocked = conn.new_request()
        u = unlock.set_lock
        u.ino, u.family, u.owner, u.start, u.end = q.ino, q.family, q.owner, q.start, q.end
        u.type = UNLOCK
        try:
            await unlocked
        except Exception:
            return


async def conflicting_lock(
    conn: Connection,
    ino: int,
    type: int,
    *,
    family: int = POSIX,
    owner: int = 0,
    start: int = 0,
    end: int = EOF,
    others_only: bool = False,
) -> LockConflict | None:
    """The first lock that would stand in the way of taking this one, if any
    (`others_only`: held through another connection)."""
    _check(family, type, start, end)
    request, future = conn.new_request()
    q = request.test_lock
    q.ino, q.family, q.type, q.owner, q.start, q.end = ino, family, type, owner, start, end  # type: ignore[assignment]
    q.others_only = others_only
    found = _result(await future).lock_conflict
    if not found.found:
        return None
    return LockConflict(found.type, found.start, found.end, found.pid, found.same_session)


async def release_locks_on(
    conn: Connection, ino: int, *, family: int = POSIX, owner: int = 0
) -> None:
    """Drop every lock of `owner` on `ino` in `family` (what a close does)."""
    _check(family, UNLOCK, 0, 0)
    request, future = conn.new_request()
    q = request.release_locks
    q.ino, q.family, q.owner = ino, family, owner  # type: ignore[assignment]
    _result(await future)


def _result(response: pb.Response) -> pb.Response:
    if response.HasField("error"):
        raise error_from_wire(response.error.code, response.error.message)
    return response


class FileLock:
    """`async with client.flock(path):` a whole-file lock (flock's family), exclusive
    or shared, taken on entry (waiting unless `wait=False`: LockedError) and released
    on exit; LockLostError on exit if the connection it was held through ended."""

    _owners = itertools.count(_FIRST_LIBRARY_OWNER)

    def __init__(
        self,
        connect: Callable[[], Awaitable[Connection]],
        find: Callable[[], Awaitable[int]],
        *,
        shared: bool,
        wait: bool,
    ) -> None:
        self._connect = connect
        self._find = find
        self._type = READ if shared else WRITE
        self._wait = wait
        self.owner = next(self._owners)
        self._held: tuple[Connection, int] | None = None

    async def __aenter__(self) -> FileLock:
        conn = await self._connect()
        ino = await self._find()
        await set_lock_on(conn, ino, self._type, family=FLOCK, owner=self.owner, wait=self._wait)
        self._held = (conn, ino)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()

    @property
    def lost(self) -> bool:
        """True if the connection the lock was held through has ended."""
        return self._held is not None and self._held[0].closed

    async def release(self) -> None:
        """Let the lock go (LockLostError if it was lost before)."""
        held, self._held = self._held, None
        if held is None:
            return
        conn, ino = held
        lost = LockLostError(f"the lock on inode {ino} ended with its connection")
        if conn.closed:
            raise lost
        try:
            await release_locks_on(conn, ino, family=FLOCK, owner=self.owner)
        except FAILOVER_ERRORS:
            raise lost from None


class ClientLocks:
    """The client's forms, on its current connection; a target is a path (symbolic
    links followed) or an inode number."""

    async def connection(self) -> Connection:
        raise NotImplementedError

    async def stat(self, path: str) -> Attr:
        raise NotImplementedError

    async def _lock_target(self, target: str | int) -> int:
        return target if isinstance(target, int) else (await self.stat(target)).ino

    async def set_lock(
        self,
        target: str | int,
        type: int,
        *,
        family: int = POSIX,
        owner: int = 0,
        start: int = 0,
        end: int = EOF,
        wait: bool = False,
        pid: int = 0,
    ) -> None:
        """Take, change or drop (UNLOCK) a lock of `owner` over [start, end] (end
        inclusive; EOF reaches past any end of file): LockedError if another holds a
        conflicting one, unless `wait`."""
        ino = await self._lock_target(target)
        await set_lock_on(
            await self.connection(), ino, type,
            family=family, owner=owner, start=start, end=end, wait=wait, pid=pid,
        )  # fmt: skip

    async def test_lock(
        self,
        target: str | int,
        type: int,
        *,
        family: int = POSIX,
        owner: int = 0,
        start: int = 0,
        end: int = EOF,
        others_only: bool = False,
    ) -> LockConflict | None:
        """The lock that would stand in the way of this one, if any (F_GETLK);
        `others_only`: one held through another connection (another mount)."""
        ino = await self._lock_target(target)
        return await conflicting_lock(
            await self.connection(),
            ino,
            type,
            family=family,
            owner=owner,
            start=start,
            end=end,
            others_only=others_only,
        )

    async def release_locks(
        self, target: str | int, *, family: int = POSIX, owner: int = 0
    ) -> None:
        """Drop every lock of `owner` on the file in `family`."""
        ino = await self._lock_target(target)
        await release_locks_on(await self.connection(), ino, family=family, owner=owner)

    def flock(self, target: str | int, *, shared: bool = False, wait: bool = True) -> FileLock:
        """`async with client.flock(path):` the file locked as flock(2) does, between
        every client of the cluster, for the block."""
        return FileLock(
            self.connection, lambda: self._lock_target(target), shared=shared, wait=wait
        )
