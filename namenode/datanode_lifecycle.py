"""A datanode's life as the cluster's administrator and its heartbeats see it: heard
from, back after it was dead, drained (decommissioning until no replica is left on
it, then decommissioned), put back in service, removed.

Each change is kept in PostgreSQL and in the registry, then told to re-replication
(`ReplicationWork`), which copies replicas off draining datanodes, drops surplus ones
and forgets the work of a removed datanode. A drained datanode is declared
decommissioned by this module's own check, every `check_interval` seconds while one
is draining.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from plasmafs.core.errors import BusyError, NotFoundError, PlasmaError
from plasmafs.namenode.allocator import Allocator
from plasmafs.namenode.datanodes import (
    DECOMMISSIONED,
    DECOMMISSIONING,
    NORMAL,
    DatanodeRegistry,
)
from plasmafs.namenode.replica_health import ReplicaHealth
from plasmafs.namenode.replica_store import ReplicaStore

log = logging.getLogger(__name__)


class ReplicationWork(Protocol):
    """What the lifecycle tells re-replication (the replication monitor)."""

    def wake(self) -> None:
        """Look at the datanodes again now rather than at the next check."""
        ...

    def forget_datanode(self, datanode: int) -> None:
        """A datanode was removed: drop the copies and checks planned for it."""
        ...


class DatanodeLifecycle:
    """Admin states and returns of datanodes."""

    def __init__(
        self,
        registry: DatanodeRegistry,
        replicas: ReplicaStore,
        health: ReplicaHealth,
        allocator: Allocator,
        work: ReplicationWork,
        *,
        ticket_ttl: float,
        check_interval: float,
    ) -> None:
        self.registry = registry
        self._replicas = replicas
        self._health = health
        self._allocator = allocator
        self._work = work
        self._ticket_ttl = ticket_ttl
        self._check_interval = check_interval
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start watching draining datanodes."""
        self._runner = asyncio.create_task(self._run(), name="pfs-datanode-lifecycle")

    async def stop(self) -> None:
        """Stop the watch and the returns being recorded."""
        tasks = [t for t in (self._runner, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def heard(self, datanode: int, identity: str) -> None:
        """A heartbeat came: the datanode lives; if it was dead, it is back."""
        if self.registry.heartbeat(datanode, identity):
            task = asyncio.ensure_future(self.returned(datanode))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def returned(self, datanode: int) -> None:
        """A datanode is back: blocks held for it are free once read tickets issued for
        them may have expired, and its files are checked again."""
        until = time.time() + self._ticket_ttl
        if await self._replicas.unhold(datanode, until):
            self._allocator.unhold(datanode, until)
        self._work.wake()

    async def decommission(self, datanode: int) -> None:
        """Start draining a datanode; refused when its replicas could go nowhere."""
        self._require(datanode)
        registry = self.registry
        others = [d for d in registry.placeable() if d != datanode]
        draining = [d for d in registry.ids() if registry.admin_state(d) == DECOMMISSIONING]
        held = 0
        for d in {datanode, *draining}:
            held += await self._replicas.replica_count(d)
        if not others and held:
            raise BusyError(
                f"datanode {datanode} and the datanodes being drained hold {held} replicas "
                "and no other live datanode in service could take them: start or "
                "recommission another datanode first"
            )
        await self._set_state(datanode, DECOMMISSIONING)
        self._work.wake()

    async def recommission(self, datanode: int) -> None:
        """Put a datanode back in normal service (surplus replicas are dropped later)."""
        self._require(datanode)
        await self._set_state(datanode, NORMAL)
        self._work.wake()

    async def remove(self, datanode: int) -> None:
        """Forget a dead or decommissioned datanode that no replica row names."""
        self._require(datanode)
        registry = self.registry
        if registry.alive(datanode) and registry.admin_state(datanode) != DECOMMISSIONED:
            raise BusyError(
                f"datanode {datanode} is live: decommission it first, or stop it and wait "
                "until it is dead"
            )
        if not await self._replicas.remove_datanode(datanode):
            held = await self._replicas.replica_count(datanode)
            raise BusyError(
                f"datanode {datanode} still holds {held} replicas the namenode has not "
                "replaced yet (see pfs fsck): wait for re-replication"
            )
        self._work.forget_datanode(datanode)
        self._health.forget_datanode(datanode)
        registry.forget(datanode)
        log.info("datanode %d removed", datanode)

    async def finish_decommissions(self) -> None:
        """Declare decommissioned every draining datanode no replica is left on."""
        for d in self.registry.ids():
            if self.registry.admin_state(d) != DECOMMISSIONING:
                continue
            if not await self._replicas.replica_count(d):
                await self._set_state(d, DECOMMISSIONED)
                log.info("datanode %d is decommissioned", d)

    def _require(self, datanode: int) -> None:
        if self.registry.row(datanode) is None:
            raise NotFoundError(f"no datanode {datanode}")

    async def _set_state(self, datanode: int, state: int) -> None:
        await self._replicas.set_admin_state(datanode, state)
        self.registry.set_admin_state(datanode, state)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._check_interval)
            try:
                await self.finish_decommissions()
            except PlasmaError as exc:
                log.warning("decommission check failed: %s", exc)
            except Exception:
                log.exception("decommission check failed")
