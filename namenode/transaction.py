"""A namenode-side transaction: its change set, its locks and its state."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from plasmafs.core.errors import ConflictError, TransactionError
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.locks import LockOwner
from plasmafs.namenode.principals import Principal


class TxnState(enum.Enum):
    """Where a transaction is in its life."""

    OPEN = "open"
    COMMITTING = "committing"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(eq=False, slots=True)
class Txn:
    """One client transaction; every operation in it acts as `who`."""

    txn_id: int
    owner: LockOwner
    lock_wait: float
    who: Principal
    cs: ChangeSet = field(default_factory=ChangeSet)
    state: TxnState = TxnState.OPEN
    abort_reason: str = ""
    conflicted: bool = False
    failed_ops: int = 0  # operations that failed (they changed nothing)
    writing: int = 0  # files it allocated blocks for (fair use counts them per user)
    # The namenode's own upkeep of block lists (re-replication): it may change those of
    # read-only files (snapshots) too.
    upkeep: bool = False

    def check_open(self) -> None:
        """Raise unless operations may still run in this transaction."""
        if self.state is TxnState.OPEN:
            return
        if self.conflicted:
            raise ConflictError(f"transaction {self.txn_id} was aborted: {self.abort_reason}")
        raise TransactionError(f"transaction {self.txn_id} is {self.state.value}")
