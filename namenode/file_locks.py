"""File locks, kept by the active namenode for the sessions that hold them.

Two families that never conflict with each other, as on Linux: POSIX record locks
(fcntl's F_SETLK and OFD locks alike: byte ranges, an owner's locks split and merged
as it locks and unlocks parts of them) and flock's whole-file locks. A lock belongs
to a holder: the session (one client connection) and an owner number the client
chose (a process, an open file description). Two holders' locks conflict where their
ranges overlap and either is a write lock.

A request that would conflict fails at once (LockedError) or waits in line; each
change of a file's locks grants the waiters that no longer conflict, in the order they
came. A wait ends when granted, when the session gives it up (InterruptedCallError)
or ends, and a POSIX wait that would wait for itself through a chain of other
waiters is refused (DeadlockError, as Linux's F_SETLKW). Everything a session holds
or waits for is dropped when it ends: a closed or cut connection, a killed client,
a failover (the new active namenode starts with no locks: see the README).
"""

from __future__ import annotations

import asyncio
import enum
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from plasmafs.core.errors import (
    DeadlockError,
    InterruptedCallError,
    InvalidArgumentError,
    LockedError,
)
from plasmafs.core.proto import namenode_pb2 as pb

EOF = 2**63 - 1  # a range's end that reaches past any end of file
MAX_CHAIN = 64  # waiters followed looking for a deadlock (Linux: MAX_DEADLK_ITERATIONS 10)
MAX_EARLY_CANCELS = 1024  # cancels kept for waits not seen yet, per session


class Family(enum.IntEnum):
    """POSIX record locks or flock locks; the values are the wire's LockFamily."""

    POSIX = pb.LOCK_POSIX
    FLOCK = pb.LOCK_FLOCK


class LockType(enum.IntEnum):
    """Shared, exclusive, or none (an unlock); the values are the wire's LockType."""

    UNLOCK = pb.LOCK_UNLOCK
    READ = pb.LOCK_READ
    WRITE = pb.LOCK_WRITE


Holder = tuple[object, int]  # (session, owner number)


@dataclass(frozen=True, slots=True)
class HeldLock:
    """A lock a holder has over bytes [start, end] of a file."""

    holder: Holder
    type: LockType
    start: int
    end: int
    pid: int

    def conflicts(self, holder: Holder, type: LockType, start: int, end: int) -> bool:
        """Whether this lock stands in the way of `holder` taking `type` over [start, end]."""
        return (
            self.holder != holder
            and self.start <= end
            and start <= self.end
            and (type is LockType.WRITE or self.type is LockType.WRITE)
        )


@dataclass(eq=False, slots=True)
class LockRequest:
    """What a holder asks for."""

    ino: int
    family: Family
    holder: Holder
    type: LockType
    start: int = 0
    end: int = EOF
    pid: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end <= EOF:
            raise InvalidArgumentError(f"bad lock range [{self.start}, {self.end}]")
        if self.family is Family.FLOCK:
            self.start, self.end = 0, EOF

    @property
    def key(self) -> tuple[int, Family]:
        """The file and family its locks are kept under."""
        return (self.ino, self.family)


@dataclass(eq=False, slots=True)
class _Waiter:
    asked: LockRequest
    request_id: int
    granted: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class FileLocks:
    """Every file lock and waiter of this namenode's sessions."""

    def __init__(self) -> None:
        self._held: dict[tuple[int, Family], list[HeldLock]] = {}
        self._waiting: dict[tuple[int, Family], list[_Waiter]] = {}
        self._keys_of: dict[object, set[tuple[int, Family]]] = {}  # session -> its files
        self._waits: dict[tuple[object, int], _Waiter] = {}  # (session, request id)
        self._blocked: dict[Holder, _Waiter] = {}  # a POSIX holder's wait
        self._early_cancels: dict[object, OrderedDict[int, None]] = {}

    def held(self, ino: int, family: Family) -> list[HeldLock]:
        """The locks held on `ino` in `family`."""
        return list(self._held.get((ino, family), ()))

    def locked_by_others(self, ino: int, session: object) -> bool:
        """Whether a session other than `session` holds a lock on `ino`."""
        return any(
            lock.holder[0] is not session
            for family in Family
            for lock in self._held.get((ino, family), ())
        )

    def test(self, asked: LockRequest, *, others_only: bool = False) -> HeldLock | None:
        """The first lock that stands in the way of `asked`, None if it could be taken
        (`others_only`: of another session than the one asking)."""
        for lock in self._held.get(asked.key, ()):
            if others_only and lock.holder[0] is asked.holder[0]:
                continue
            if lock.conflicts(asked.holder, asked.type, asked.start, asked.end):
                return lock
        return None

    async def set(self, asked: LockRequest, *, wait: bool, request_id: int = 0) -> None:
        """Take, change or drop (UNLOCK) the lock `asked`; with `wait`, wait in line
        for conflicting locks to go (until the session cancels request `request_id`)."""
        session = asked.holder[0]
        if asked.type is LockType.UNLOCK:
            self._apply(asked)
            self._wake(asked.key)
            self._untrack(session, asked.key)
            return
        blocker = self.test(asked)
        if blocker is None:
            self._apply(asked)
            self._wake(asked.key)  # a downgrade may let others in
            return
        if not wait:
            raise LockedError(f"inode {asked.ino} is locked by another holder")
        if self._cancelled_early(session, request_id):
            raise InterruptedCallError("the wait for the lock was cancelled")
        if asked.family is Family.POSIX and self._waits_for_itself(asked.holder, blocker):
            raise DeadlockError(f"waiting for the lock on inode {asked.ino} would deadlock")
        waiter = _Waiter(asked, request_id)
        self._waiting.setdefault(asked.key, []).append(waiter)
        self._keys_of.setdefault(session, set()).add(asked.key)
        self._waits[(session, request_id)] = waiter
        if asked.family is Family.POSIX:
            self._blocked[asked.holder] = waiter
        try:
            await waiter.granted
        finally:
            self._forget_waiter(waiter)

    def cancel_wait(self, session: object, request_id: int) -> None:
        """Give up the wait of request `request_id` (its SetLock answers EINTR); one not
        waiting yet is given up as soon as it would wait."""
        waiter = self._waits.get((session, request_id))
        if waiter is None:
            early = self._early_cancels.setdefault(session, OrderedDict())
            early[request_id] = None
            while len(early) > MAX_EARLY_CANCELS:
                early.popitem(last=False)
            return
        if not waiter.granted.done():
            waiter.granted.set_exception(
                InterruptedCallError("the wait for the lock was cancelled")
            )

    def release(self, ino: int, family: Family, holder: Holder) -> None:
        """Drop every lock of `holder` on `ino` in `family` (a close)."""
        key = (ino, family)
        locks = self._held.get(key)
        if locks is None:
            return
        kept = [lock for lock in locks if lock.holder != holder]
        self._store(key, kept)
        self._wake(key)
        self._untrack(holder[0], key)

    def end_session(self, session: object) -> None:
        """Drop everything `session` holds and give up its waits."""
        self._early_cancels.pop(session, None)
        for key in self._keys_of.pop(session, set()):
            for waiter in list(self._waiting.get(key, ())):
                if waiter.asked.holder[0] is session:
                    self._forget_waiter(waiter)
                    if not waiter.granted.done():
                        waiter.granted.set_exception(
                            InterruptedCallError("the session of the wait ended")
                        )
            locks = self._held.get(key)
            if locks is not None:
                self._store(key, [lock for lock in locks if lock.holder[0] is not session])
                self._wake(key)

    def _apply(self, asked: LockRequest) -> None:
        """The holder's locks over [start, end] replaced by `asked` (none for UNLOCK);
        its locks of the same type that touch the new one merged into it."""
        holder, start, end = asked.holder, asked.start, asked.end
        kept: list[HeldLock] = []
        for lock in self._held.get(asked.key, ()):
            if lock.holder != holder or lock.end < start or lock.start > end:
                kept.append(lock)
                continue
            if lock.start < start:
                kept.append(replace(lock, end=start - 1))
            if lock.end > end:
                kept.append(replace(lock, start=end + 1))
        if asked.type is not LockType.UNLOCK:
            new = HeldLock(holder, asked.type, start, end, asked.pid)
            others: list[HeldLock] = []
            for lock in kept:
                touching = lock.start <= new.end + 1 and new.start <= lock.end + 1
                if lock.holder == holder and lock.type is new.type and touching:
                    new = replace(new, start=min(new.start, lock.start), end=max(new.end, lock.end))
                else:
                    others.append(lock)
            kept = [*others, new]
            self._keys_of.setdefault(holder[0], set()).add(asked.key)
        self._store(asked.key, kept)

    def _store(self, key: tuple[int, Family], locks: list[HeldLock]) -> None:
        if locks:
            self._held[key] = locks
        else:
            self._held.pop(key, None)

    def _wake(self, key: tuple[int, Family]) -> None:
        """Grant, in order, the waiters of `key` that no longer conflict."""
        for waiter in list(self._waiting.get(key, ())):
            if waiter.granted.done() or self.test(waiter.asked) is not None:
                continue
            self._apply(waiter.asked)
            self._forget_waiter(waiter)
            waiter.granted.set_result(None)

    def _untrack(self, session: object, key: tuple[int, Family]) -> None:
        """Stop listing `key` under `session` once it holds and awaits nothing there."""
        keys = self._keys_of.get(session)
        if keys is None or key not in keys:
            return
        if any(lock.holder[0] is session for lock in self._held.get(key, ())):
            return
        if any(w.asked.holder[0] is session for w in self._waiting.get(key, ())):
            return
        keys.discard(key)
        if not keys:
            del self._keys_of[session]

    def _forget_waiter(self, waiter: _Waiter) -> None:
        asked = waiter.asked
        line = self._waiting.get(asked.key)
        if line is not None and waiter in line:
            line.remove(waiter)
            if not line:
                del self._waiting[asked.key]
        session = asked.holder[0]
        if self._waits.get((session, waiter.request_id)) is waiter:
            del self._waits[(session, waiter.request_id)]
        if self._blocked.get(asked.holder) is waiter:
            del self._blocked[asked.holder]

    def _cancelled_early(self, session: object, request_id: int) -> bool:
        early = self._early_cancels.get(session)
        if early is None or request_id not in early:
            return False
        del early[request_id]
        return True

    def _waits_for_itself(self, holder: Holder, blocker: HeldLock) -> bool:
        """Whether `holder` waiting for `blocker` closes a cycle of POSIX waits."""
        current = blocker.holder
        for _ in range(MAX_CHAIN):
            if current == holder:
                return True
            waiter = self._blocked.get(current)
            if waiter is None:
                return False
            next_blocker = self.test(waiter.asked)
            if next_blocker is None:
                return False
            current = next_blocker.holder
        return False
