"""A namenode's namespace opened in the test's own process, over PostgreSQL (a `Store`)
or over `MemoryStore`: the parts the server builds at start, without gRPC, so tests
drive the rules and transactions directly."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

from plasmafs.core.attributes import Attr
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.committer import Committer
from plasmafs.namenode.leadership import Leadership
from plasmafs.namenode.lease_store import LeaseStore
from plasmafs.namenode.locks import LockManager
from plasmafs.namenode.principals import SUPERUSER, Principal
from plasmafs.namenode.settings import NamenodeSettings
from plasmafs.namenode.startup import NamespaceParts, open_namespace
from plasmafs.namenode.store import Store
from plasmafs.namenode.transaction import Txn

BLOCKSIZE = 64 * 1024
CAPACITY = 64  # blocks of the one datanode registered
LEASE_TTL = 30.0  # seconds: no standby competes, renewals only keep it valid


@dataclass
class Opened:
    """A namespace's parts and the leadership they write under."""

    parts: NamespaceParts
    leadership: Leadership
    _next_txn: int = 0

    def begin(self, txn_id: int | None = None, who: Principal = SUPERUSER) -> Txn:
        """A new open transaction acting as `who`."""
        self._next_txn += 1
        number = self._next_txn if txn_id is None else txn_id
        return self.parts.transactions.begin(number, "test", 0.0, who)

    async def create(self, txn: Txn, path: bytes) -> Attr:
        """An empty file at `path` (mode 0644, one replica)."""
        return await self.parts.namespace.create(txn, Place.of(path), 0o644, 1, 0)

    async def commit(self, txn: Txn) -> None:
        """Commit `txn` and wait for its group."""
        await self.parts.transactions.commit(txn)

    @property
    def locks(self) -> LockManager:
        """The namenode's lock table."""
        return self.parts.transactions.locks

    @property
    def committer(self) -> Committer:
        """The group committer."""
        return self.parts.transactions.committer


@contextlib.asynccontextmanager
async def opened_namespace(
    store: Any, leases: Any, dsn: str | None = None, **settings: Any
) -> AsyncIterator[Opened]:
    """The namespace over `store` (a `Store`, or a stand-in with its methods) with one
    registered datanode of CAPACITY blocks, active under `leases` (a `LeaseStore`, or
    a stand-in), with namenode `settings` other than the defaults."""
    real = cast(Store, store)
    leadership = Leadership(cast(LeaseStore, leases), LEASE_TTL, on_deposed=lambda reason: None)
    await leadership.take()
    leadership.start()
    await real.open()
    parts = await open_namespace(
        NamenodeSettings(dsn=dsn, default_blocksize=BLOCKSIZE, **settings), real, leadership
    )
    await parts.data.registry.register(
        str(uuid.uuid4()), "127.0.0.1", "127.0.0.1:1", BLOCKSIZE, CAPACITY
    )
    try:
        yield Opened(parts, leadership)
    finally:
        await parts.stop()
        await leadership.stop()
        await leadership.close()
        await real.close()
