"""Transactions from begin to end: the one place where a transaction takes locks,
changes state and gives back what it held.

Every transaction ends exactly once, whatever raises: an abort, a commit whose change
set could not be queued, or the group commit's answer (even after the client went
away) ends it, releasing its locks and, if it did not commit, the blocks it reserved.
Changes need a transaction that is open on a namenode that may write (its term).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from plasmafs.core.errors import ConflictError, ReadOnlyError, TransactionError
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.committer import Committer
from plasmafs.namenode.inode_records import in_snapshot
from plasmafs.namenode.leadership import Leadership
from plasmafs.namenode.locks import DIRTREE_LOCK, LockKey, LockManager, LockOwner
from plasmafs.namenode.principals import Principal
from plasmafs.namenode.transaction import Txn, TxnState


class BlockReservations(Protocol):
    """What a transaction's blocks need at its end (file data keeps them)."""

    async def prepare_commit(self, txn: Txn) -> None:
        """Record the final block lists the commit will publish."""
        ...

    def aborted(self, cs: ChangeSet) -> None:
        """The transaction ended without committing: its reservations are free again."""
        ...


class UsagePreparer(Protocol):
    """What keeps directories' usage (namenode/usage.py)."""

    async def prepare_commit(self, cs: ChangeSet) -> None:
        """Record in `cs` what it changes in directories' usage (and charge it to
        quotas: QuotaExceededError refuses it)."""
        ...

    def aborted(self, cs: ChangeSet) -> None:
        """A prepared change set will not be committed."""
        ...

    def charges_quotas(self) -> bool:
        """True if commits are charged to quotas (some directory has one)."""
        ...


class Transactions:
    """Begin, lock, commit and abort namenode transactions."""

    def __init__(
        self,
        locks: LockManager,
        committer: Committer,
        blocks: BlockReservations,
        leadership: Leadership,
    ) -> None:
        self.locks = locks
        self.committer = committer
        self._blocks = blocks
        self.leadership = leadership
        self.usage: UsagePreparer | None = None  # set once the namespace's view exists

    def begin(self, txn_id: int, label: str, lock_wait: float, who: Principal) -> Txn:
        """A new open transaction whose operations act as `who`."""
        return Txn(txn_id, LockOwner(f"{label}/{txn_id}"), lock_wait, who)

    def check_serving(self) -> None:
        """NotActiveError unless this namenode may answer requests now (it is the
        active one and has proven its lease lately: no stale reads)."""
        self.leadership.current_term()

    def writable(self, txn: Txn | None) -> Txn:
        """`txn`, once changes may be made in it: it is open, and this namenode may
        write (NotActiveError otherwise)."""
        if txn is None:
            raise TransactionError("changes need a transaction")
        txn.check_open()
        self.leadership.current_term()
        return txn

    async def lock(self, txn: Txn, key: LockKey, exclusive: bool) -> None:
        """Take `key` for `txn`, waiting at most its lock wait; a conflict aborts the
        transaction (its locks are released at once) and raises ConflictError. An
        exclusive lock on a snapshot's inode or entry is refused (ReadOnlyError): nothing
        in a snapshot changes, but its block lists by the namenode's upkeep."""
        if exclusive and not txn.upkeep and _in_snapshot(key):
            raise ReadOnlyError("a snapshot is read-only")
        try:
            await self.locks.acquire(txn.owner, key, exclusive=exclusive, wait=txn.lock_wait)
        except ConflictError as exc:
            txn.conflicted = True
            self.abort(txn, f"conflict: {exc}")
            raise

    async def sync(self) -> None:
        """Make every commit acknowledged so far durable (relaxed ones included)."""
        await self.committer.sync()

    async def commit(self, txn: Txn, durable: bool = True) -> None:
        """Make the transaction's changes durable and visible, then release its locks
        (not `durable`: acknowledged before the WAL flush, durable within the
        committer's FLUSH_DELAY or at the next sync).

        Whatever raises or cancels once committing started, the transaction ends: before
        its change set is queued it is aborted here; after, `settle` ends it when the
        group commit is answered, even if the client has gone away meanwhile.
        """
        txn.check_open()
        txn.state = TxnState.COMMITTING
        try:
            if txn.cs.is_empty():
                self._finish(txn, TxnState.COMMITTED)
                return
            if txn.cs.extents_changed:
                await self._blocks.prepare_commit(txn)
            if self.usage is not None:
                if self.usage.charges_quotas():
                    # The tree its charges walk stays as it is until it is applied.
                    await self.lock(txn, DIRTREE_LOCK, False)
                await self.usage.prepare_commit(txn.cs)
            done = self.committer.enqueue(txn.cs, durable)
        except BaseException as exc:
            txn.abort_reason = f"the commit failed: {exc.__class__.__name__}: {exc}"
            self._finish(txn, TxnState.ABORTED)
            raise

        def settle(fut: asyncio.Future[None]) -> None:
            failed = fut.cancelled() or fut.exception() is not None
            self._finish(txn, TxnState.ABORTED if failed else TxnState.COMMITTED)

        # The locks stay until the change set is written, even if the client goes away.
        done.add_done_callback(settle)
        await asyncio.shield(done)

    def abort(self, txn: Txn, reason: str = "aborted by the client") -> None:
        """Drop the transaction's changes and release its locks (no-op once committing)."""
        if txn.state is TxnState.OPEN:
            txn.abort_reason = reason
            self._finish(txn, TxnState.ABORTED)

    def _finish(self, txn: Txn, state: TxnState) -> None:
        if txn.state in (TxnState.COMMITTED, TxnState.ABORTED):
            return  # ended already: its reservations and locks are gone
        txn.state = state
        try:
            if state is TxnState.ABORTED:
                self._blocks.aborted(txn.cs)
                if self.usage is not None:
                    self.usage.aborted(txn.cs)
        finally:
            self.locks.release_all(txn.owner)


def _in_snapshot(key: LockKey) -> bool:
    """True for the lock of a snapshot's inode ("i", ino) or of an entry in one of its
    directories ("e", parent, name)."""
    return (
        isinstance(key, tuple)
        and len(key) >= 2
        and key[0] in ("i", "e")
        and isinstance(key[1], int)
        and in_snapshot(key[1])
    )
