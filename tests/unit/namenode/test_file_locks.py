"""The namenode's table of file locks: ranges split and merged as Linux's, families
apart, waits granted in order, given up, refused on a deadlock, and a session's
locks and waits gone with it."""

from __future__ import annotations

import asyncio

import pytest

from plasmafs.core.errors import DeadlockError, InterruptedCallError, LockedError
from plasmafs.namenode.file_locks import EOF, Family, FileLocks, LockRequest, LockType

A, B, C = object(), object(), object()  # sessions
READ, WRITE, UNLOCK = LockType.READ, LockType.WRITE, LockType.UNLOCK


def posix(
    session: object, type: LockType, start: int = 0, end: int = EOF, owner: int = 1
) -> LockRequest:
    return LockRequest(7, Family.POSIX, (session, owner), type, start, end, pid=owner)


def ranges(locks: FileLocks) -> list[tuple[int, str, int, int]]:
    return sorted(
        (lock.holder[1], lock.type.name, lock.start, lock.end)
        for lock in locks.held(7, Family.POSIX)
    )


async def test_ranges_split_and_merge_per_owner() -> None:
    locks = FileLocks()
    await locks.set(posix(A, WRITE, 0, 99), wait=False)
    await locks.set(posix(A, READ, 40, 59), wait=False)  # a read lock inside: three parts
    assert ranges(locks) == [(1, "READ", 40, 59), (1, "WRITE", 0, 39), (1, "WRITE", 60, 99)]
    await locks.set(posix(A, WRITE, 40, 59), wait=False)  # back as one
    assert ranges(locks) == [(1, "WRITE", 0, 99)]
    await locks.set(posix(A, UNLOCK, 10, 19), wait=False)
    assert ranges(locks) == [(1, "WRITE", 0, 9), (1, "WRITE", 20, 99)]
    await locks.set(posix(A, WRITE, 100, 200), wait=False)  # adjacent: merged
    assert ranges(locks) == [(1, "WRITE", 0, 9), (1, "WRITE", 20, 200)]
    # others: shared where reads meet, refused where a write is
    await locks.set(posix(B, READ, 10, 19), wait=False)
    with pytest.raises(LockedError):
        await locks.set(posix(B, READ, 9, 10), wait=False)
    blocker = locks.test(posix(B, WRITE, 150, 150))
    assert blocker is not None and blocker.holder == (A, 1) and blocker.pid == 1
    assert locks.test(posix(A, WRITE, 10, 19, owner=2)) is not None  # owners differ
    # flock locks are a family of their own
    await locks.set(LockRequest(7, Family.FLOCK, (B, 5), WRITE), wait=False)
    with pytest.raises(LockedError):
        await locks.set(LockRequest(7, Family.FLOCK, (A, 1), READ), wait=False)
    locks.release(7, Family.POSIX, (A, 1))
    assert ranges(locks) == [(1, "READ", 10, 19)]


async def test_waits_are_granted_in_order_and_may_be_given_up() -> None:
    locks = FileLocks()
    await locks.set(posix(A, WRITE), wait=False)
    first = asyncio.create_task(locks.set(posix(B, WRITE), wait=True, request_id=11))
    second = asyncio.create_task(locks.set(posix(C, READ), wait=True, request_id=12))
    given_up = asyncio.create_task(locks.set(posix(C, READ, owner=9), wait=True, request_id=13))
    await asyncio.sleep(0)
    locks.cancel_wait(C, 13)
    with pytest.raises(InterruptedCallError):
        await given_up
    await locks.set(posix(A, UNLOCK), wait=False)
    await first
    assert not second.done() and ranges(locks) == [(1, "WRITE", 0, EOF)]
    locks.release(7, Family.POSIX, (B, 1))
    await second
    # a cancel that arrives before its wait gives the wait up when it would begin
    locks.cancel_wait(A, 20)
    with pytest.raises(InterruptedCallError):
        await locks.set(posix(A, WRITE), wait=True, request_id=20)


async def test_a_wait_for_itself_is_a_deadlock() -> None:
    locks = FileLocks()
    await locks.set(posix(A, WRITE, 0, 9), wait=False)
    await locks.set(posix(B, WRITE, 10, 19), wait=False)
    waiting = asyncio.create_task(locks.set(posix(A, WRITE, 10, 19), wait=True, request_id=1))
    await asyncio.sleep(0)
    with pytest.raises(DeadlockError):
        await locks.set(posix(B, WRITE, 0, 9), wait=True, request_id=2)
    locks.release(7, Family.POSIX, (B, 1))
    await waiting


async def test_a_session_takes_its_locks_and_waits_along() -> None:
    locks = FileLocks()
    await locks.set(posix(A, WRITE), wait=False)
    await locks.set(LockRequest(8, Family.FLOCK, (A, 2), READ), wait=False)
    waiting = asyncio.create_task(locks.set(posix(B, READ), wait=True, request_id=1))
    mine = asyncio.create_task(locks.set(posix(A, WRITE, owner=3), wait=True, request_id=2))
    await asyncio.sleep(0)
    locks.end_session(A)
    await waiting
    with pytest.raises(InterruptedCallError):
        await mine
    assert ranges(locks) == [(1, "READ", 0, EOF)]
    assert locks.held(8, Family.FLOCK) == []
    locks.end_session(B)
    assert ranges(locks) == []


async def test_what_other_sessions_hold() -> None:
    locks = FileLocks()
    assert not locks.locked_by_others(7, A)
    await locks.set(posix(A, READ, 0, 9), wait=False)
    assert not locks.locked_by_others(7, A) and locks.locked_by_others(7, B)
    # a second owner of A's: in the way of a write, but not another session's
    assert locks.test(posix(A, WRITE, 0, 9, owner=2)) is not None
    assert locks.test(posix(A, WRITE, 0, 9, owner=2), others_only=True) is None
    await locks.set(LockRequest(7, Family.FLOCK, (B, 5), READ), wait=False)
    assert locks.locked_by_others(7, A)  # flock locks count too
    locks.end_session(B)
    assert not locks.locked_by_others(7, A)
