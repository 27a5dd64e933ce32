"""Shared/exclusive locks on inodes and directory entries, held by transactions until
they end.

Only changes that really conflict are serialized: creating in a directory takes a
shared lock on the directory and an exclusive lock on the new entry, so many
transactions create in one directory at once, while rmdir (exclusive on the
directory) waits for them or fails. A request that cannot be granted waits up to the
transaction's lock wait, then fails with ConflictError. Waiters are served in order,
so a waiting exclusive request is not starved by a stream of shared ones.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from plasmafs.core.errors import ConflictError

LockKey = Hashable

# Taken exclusively by a move of a directory to another parent, shared by a commit
# charged to directory quotas: the tree a charge walks cannot change under it.
DIRTREE_LOCK: LockKey = ("dirtree",)
# Shared by the namenode's upkeep of a snapshot file's block lists (re-replication),
# exclusive while a snapshot is deleted: its rows go without the files' own locks.
SNAPSHOT_UPKEEP_LOCK: LockKey = ("snapshot-upkeep",)


@dataclass(eq=False, slots=True)
class LockOwner:
    """A transaction as the lock manager knows it."""

    label: str
    held: dict[LockKey, bool] = field(default_factory=dict)  # key -> exclusive


@dataclass(slots=True)
class _Waiter:
    owner: LockOwner
    exclusive: bool
    future: asyncio.Future[None]


@dataclass(slots=True)
class _Lock:
    holders: dict[LockOwner, bool] = field(default_factory=dict)
    waiters: deque[_Waiter] = field(default_factory=deque)

    def grantable(self, owner: LockOwner, exclusive: bool) -> bool:
        others = [o for o in self.holders if o is not owner]
        if not others:
            return True
        if exclusive:
            return False
        return not any(self.holders[o] for o in others)


class LockManager:
    """The namenode's lock table."""

    def __init__(self) -> None:
        self._locks: dict[LockKey, _Lock] = {}
        self.waits = 0
        self.conflicts = 0

    def __len__(self) -> int:
        return len(self._locks)

    async def acquire(
        self, owner: LockOwner, key: LockKey, *, exclusive: bool, wait: float
    ) -> None:
        """Take `key` for `owner` (re-entrant; shared upgrades to exclusive)."""
        held = owner.held.get(key)
        if held is not None and (held or not exclusive):
            return
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = _Lock()
        if not lock.waiters and lock.grantable(owner, exclusive):
            self._grant(lock, owner, key, exclusive)
            return
        if wait <= 0:
            self.conflicts += 1
            raise ConflictError(f"{_describe(key)} is locked by another transaction")
        self.waits += 1
        waiter = _Waiter(owner, exclusive, asyncio.get_running_loop().create_future())
        lock.waiters.append(waiter)
        try:
            async with asyncio.timeout(wait):
                await asyncio.shield(waiter.future)
        except TimeoutError:
            if waiter.future.done():
                return  # granted just as the wait ran out
            lock.waiters.remove(waiter)
            self._wake(key, lock)
            self.conflicts += 1
            raise ConflictError(
                f"{_describe(key)} stayed locked by another transaction for {wait:.3g}s"
            ) from None
        except asyncio.CancelledError:
            # A lock granted as the wait was cancelled stays with its owner until it ends.
            if not waiter.future.done() and waiter in lock.waiters:
                lock.waiters.remove(waiter)
                self._wake(key, lock)
            raise

    def release_all(self, owner: LockOwner) -> None:
        """Release every lock `owner` holds and grant what waited on them."""
        for key in list(owner.held):
            self._release_one(owner, key)

    def _grant(self, lock: _Lock, owner: LockOwner, key: LockKey, exclusive: bool) -> None:
        lock.holders[owner] = exclusive or lock.holders.get(owner, False)
        owner.held[key] = lock.holders[owner]

    def _release_one(self, owner: LockOwner, key: LockKey) -> None:
        owner.held.pop(key, None)
        lock = self._locks.get(key)
        if lock is None:
            return
        lock.holders.pop(owner, None)
        self._wake(key, lock)

    def _wake(self, key: LockKey, lock: _Lock) -> None:
        while lock.waiters:
            head = lock.waiters[0]
            if head.future.done():  # cancelled waiter
                lock.waiters.popleft()
                continue
            if not lock.grantable(head.owner, head.exclusive):
                break
            lock.waiters.popleft()
            self._grant(lock, head.owner, key, head.exclusive)
            head.future.set_result(None)
        if not lock.holders and not lock.waiters:
            del self._locks[key]


def _describe(key: LockKey) -> str:
    if isinstance(key, tuple) and key and key[0] == "e":
        return f"entry {key[2]!r} in directory {key[1]}"
    if isinstance(key, tuple) and key and key[0] == "i":
        return f"inode {key[1]}"
    return f"the {key!r} lock"
