"""The lock manager in process: sharing, exclusion, fairness, timeouts, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from plasmafs.core.errors import ConflictError
from plasmafs.namenode.locks import LockManager, LockOwner


async def test_shared_locks_coexist_and_exclusive_ones_conflict() -> None:
    locks = LockManager()
    a, b = LockOwner("a"), LockOwner("b")
    await locks.acquire(a, "k", exclusive=False, wait=0)
    await locks.acquire(b, "k", exclusive=False, wait=0)
    with pytest.raises(ConflictError):
        await locks.acquire(a, "k", exclusive=True, wait=0)
    locks.release_all(b)
    await locks.acquire(a, "k", exclusive=True, wait=0)  # upgrade once alone
    with pytest.raises(ConflictError):
        await locks.acquire(b, "k", exclusive=False, wait=0)
    assert locks.conflicts == 2
    locks.release_all(a)
    assert len(locks) == 0


async def test_a_waiter_is_granted_when_the_holder_releases() -> None:
    locks = LockManager()
    a, b = LockOwner("a"), LockOwner("b")
    await locks.acquire(a, "k", exclusive=True, wait=0)
    waiting = asyncio.ensure_future(locks.acquire(b, "k", exclusive=True, wait=30))
    while locks.waits == 0:
        await asyncio.sleep(0)
    assert not waiting.done()
    locks.release_all(a)
    await waiting
    assert b.held == {"k": True}


async def test_a_waiting_exclusive_request_is_not_starved_by_shared_ones() -> None:
    locks = LockManager()
    reader, writer, late = LockOwner("r"), LockOwner("w"), LockOwner("late")
    await locks.acquire(reader, "k", exclusive=False, wait=0)
    exclusive = asyncio.ensure_future(locks.acquire(writer, "k", exclusive=True, wait=30))
    while locks.waits == 0:
        await asyncio.sleep(0)
    with pytest.raises(ConflictError):  # queued behind the exclusive waiter
        await locks.acquire(late, "k", exclusive=False, wait=0)
    locks.release_all(reader)
    await exclusive


async def test_an_expired_wait_raises_and_leaves_no_waiter() -> None:
    locks = LockManager()
    a, b, c = LockOwner("a"), LockOwner("b"), LockOwner("c")
    await locks.acquire(a, "k", exclusive=True, wait=0)
    with pytest.raises(ConflictError, match="stayed locked"):
        await locks.acquire(b, "k", exclusive=True, wait=0.01)
    locks.release_all(a)
    await locks.acquire(c, "k", exclusive=True, wait=0)  # nobody queued in between
    assert b.held == {}


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    locks = LockManager()
    a, b, c = LockOwner("a"), LockOwner("b"), LockOwner("c")
    await locks.acquire(a, "k", exclusive=True, wait=0)
    waiting = asyncio.ensure_future(locks.acquire(b, "k", exclusive=True, wait=30))
    while locks.waits == 0:
        await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    locks.release_all(a)
    await locks.acquire(c, "k", exclusive=True, wait=0)
    locks.release_all(c)
    assert len(locks) == 0


async def test_a_waiter_cancelled_as_it_is_granted_is_still_cancelled() -> None:
    # asyncio.wait_for on Python 3.11 returns the result when the awaited future
    # completes in the same step as the cancel, losing the cancellation.
    locks = LockManager()
    a, b = LockOwner("a"), LockOwner("b")
    await locks.acquire(a, "k", exclusive=True, wait=0)
    waiting = asyncio.ensure_future(locks.acquire(b, "k", exclusive=True, wait=30))
    while locks.waits == 0:
        await asyncio.sleep(0)
    locks.release_all(a)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert b.held == {"k": True}  # granted: it stays with its owner until that ends
    locks.release_all(b)
    assert len(locks) == 0
