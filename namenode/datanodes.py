"""The datanodes the namenode knows: registration, heartbeats, liveness.

A datanode registers with its volume's identity; the namenode remembers it in
PostgreSQL and answers with its id and the ticket secret. A datanode whose
heartbeats stop for `dead_after` seconds is dead: nothing new is placed on it (its
data stays where it is, and readers fail over to other replicas).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from plasmafs.client.errors import ConfigError, NotFoundError
from plasmafs.namenode.allocator import Allocator
from plasmafs.namenode.store import DatanodeRow, Store


@dataclass
class _Known:
    row: DatanodeRow
    last_seen: float = 0.0


class DatanodeRegistry:
    """Registered datanodes and their liveness."""

    def __init__(
        self,
        store: Store,
        allocator: Allocator,
        blocksize: int,
        secret: bytes,
        dead_after: float,
        heartbeat_ms: int,
    ) -> None:
        self.store = store
        self.allocator = allocator
        self.blocksize = blocksize
        self.secret = secret
        self.dead_after = dead_after
        self.heartbeat_ms = heartbeat_ms
        self._known: dict[int, _Known] = {}

    async def load(self) -> None:
        """Read the datanodes and the blocks in use from PostgreSQL."""
        used = await self.store.blocks_in_use()
        for row in await self.store.datanodes():
            self._known[row.datanode_id] = _Known(row)
            self.allocator.add_datanode(
                row.datanode_id, row.capacity_blocks, used.get(row.datanode_id, [])
            )
        for datanode, start, count, until in await self.store.released_until():
            self.allocator.quarantine(datanode, start, count, until)

    async def register(
        self,
        identity: str,
        host: str,
        address: str,
        blocksize: int,
        capacity: int,
        local_socket: str = "",
    ) -> DatanodeRow:
        """Admit a datanode (new, or known by its volume identity)."""
        if blocksize != self.blocksize:
            raise ConfigError(
                f"the volume's blocksize {blocksize} differs from the cluster's {self.blocksize}"
            )
        for known in self._known.values():
            if known.row.identity == identity and known.row.capacity_blocks != capacity:
                raise ConfigError(
                    f"volume {identity} was registered with {known.row.capacity_blocks} "
                    f"blocks, now it has {capacity}"
                )
        try:
            uuid.UUID(identity)
        except ValueError:
            raise ConfigError(f"not a volume identity: {identity!r}") from None
        row = await self.store.register_datanode(
            identity, host, address, blocksize, capacity, local_socket
        )
        if not self.allocator.knows(row.datanode_id):
            self.allocator.add_datanode(row.datanode_id, capacity, [])
        self._known[row.datanode_id] = _Known(row, time.monotonic())
        return row

    def heartbeat(self, datanode_id: int, identity: str) -> None:
        """Note that a datanode lives."""
        known = self._known.get(datanode_id)
        if known is None or known.row.identity != identity:
            raise NotFoundError(f"datanode {datanode_id} is not registered; register again")
        known.last_seen = time.monotonic()

    def live(self) -> list[int]:
        """Datanodes heard from within `dead_after` seconds, by id."""
        now = time.monotonic()
        return [d for d, k in sorted(self._known.items()) if now - k.last_seen <= self.dead_after]

    def address(self, datanode_id: int) -> str:
        """Where clients reach a datanode."""
        known = self._known.get(datanode_id)
        return known.row.address if known is not None else ""

    def row(self, datanode_id: int) -> DatanodeRow | None:
        """What the datanode registered with."""
        known = self._known.get(datanode_id)
        return known.row if known is not None else None

    def rows(self) -> list[tuple[DatanodeRow, bool]]:
        """Every datanode and whether it is live."""
        live = set(self.live())
        return [(k.row, d in live) for d, k in sorted(self._known.items())]
