"""The datanodes the namenode knows: registration, heartbeats, liveness, admin state.

A datanode registers with its volume's identity; the namenode remembers it in
PostgreSQL and answers with its id and the ticket secret. A datanode whose
heartbeats stop for `dead_after` seconds is dead: nothing new is placed on it (its
data stays where it is, and readers fail over to other replicas); its replicas are
suspect, and lost once it has been silent for `lost_after` seconds (counted from the
namenode's start for a datanode not heard from since). New data goes only to live
datanodes in normal service that run no work this namenode does not know of (a copy
task from before a restart still writing into blocks it may hand out again).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from plasmafs.core.errors import AuthenticationError, ConfigError, NotFoundError
from plasmafs.core.value_checks import DEFAULT_LOCATION, check_location
from plasmafs.namenode.allocator import Allocator
from plasmafs.namenode.store import DatanodeRow, Store

NORMAL, DECOMMISSIONING, DECOMMISSIONED = 0, 1, 2  # datanodes.admin_state


@dataclass
class _Known:
    row: DatanodeRow
    last_seen: float  # time.monotonic() of the last heartbeat, or of the namenode's start
    heard: bool = False  # a heartbeat (or registration) reached this namenode
    admin_state: int = NORMAL
    busy_unknown: bool = False  # it reported running work this namenode does not know
    # It registered with this namenode process: each namenode has every datanode
    # register once, so that the datanode compares its owner stamps with this
    # namenode's records and tells the newest term it has seen (the one it takes must
    # be past it), whatever happened to PostgreSQL since the last one.
    registered: bool = False


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
        lost_after: float = 600.0,
    ) -> None:
        self.store = store
        self.allocator = allocator
        self.blocksize = blocksize
        self.secret = secret
        self.dead_after = dead_after
        self.heartbeat_ms = heartbeat_ms
        self.lost_after = lost_after
        self._known: dict[int, _Known] = {}
        self.started = time.monotonic()
        # Datanodes with nothing to do beat this often (HDFS's 3 s by default): a hundred
        # of them then cost the namenode a third of the heartbeats, and one is declared
        # dead only after three missed beats.
        self.idle_heartbeat_ms = max(heartbeat_ms, min(3 * heartbeat_ms, int(dead_after * 333)))

    async def load(self) -> None:
        """Read the datanodes and the blocks in use from PostgreSQL."""
        used = await self.store.blocks_in_use()
        for row in await self.store.datanodes():
            self._known[row.datanode_id] = _Known(row, self.started, admin_state=row.admin_state)
            self.allocator.add_datanode(
                row.datanode_id, row.capacity_blocks, used.get(row.datanode_id, [])
            )
            self.allocator.set_location(row.datanode_id, row.location)
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
        principal: str | None = None,
        plaintext: bool = False,
        location: str = DEFAULT_LOCATION,
    ) -> DatanodeRow:
        """Admit a datanode (new, or known by its volume identity); AuthenticationError
        when the volume is bound to another principal than the caller's."""
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
        location = check_location(location)
        row = await self.store.register_datanode(
            identity, host, address, blocksize, capacity, local_socket, principal, plaintext,
            location,
        )  # fmt: skip
        if row is None:
            raise AuthenticationError(
                f"volume {identity} is bound to another datanode's certificate; "
                f"{principal!r} may not register it"
            )
        if not self.allocator.knows(row.datanode_id):
            self.allocator.add_datanode(row.datanode_id, capacity, [])
        self.allocator.set_location(row.datanode_id, row.location)
        known = self._known.setdefault(row.datanode_id, _Known(row, time.monotonic()))
        # A datanode process registers when it starts (or when this namenode forgot it,
        # after it ended its copies): it runs no work unknown here, and it is live now.
        known.row = row
        known.last_seen = time.monotonic()
        known.heard = True
        known.busy_unknown = False
        known.registered = True
        return row

    def check_principal(self, datanode_id: int, identity: str, principal: str | None) -> None:
        """AuthenticationError unless the caller may speak for `datanode_id`: the
        principal its volume is bound to (anyone on a plaintext cluster). NotFoundError
        when that id is another volume's here (the datanode registered with another
        database): it registers again and gets its own."""
        known = self._known.get(datanode_id)
        if known is not None and known.row.identity != identity:
            raise NotFoundError(f"datanode {datanode_id} is another volume's here; register again")
        if principal is None or known is None or known.row.principal in (None, principal):
            return
        raise AuthenticationError(
            f"datanode {datanode_id} is bound to another certificate than {principal!r}"
        )

    def heartbeat(self, datanode_id: int, identity: str) -> bool:
        """Note that a datanode lives; True if it was dead (or not heard from since this
        namenode started) until now."""
        known = self._known.get(datanode_id)
        if known is None or known.row.identity != identity or not known.registered:
            raise NotFoundError(
                f"datanode {datanode_id} has not registered with this namenode; register again"
            )
        now = time.monotonic()
        returned = not known.heard or now - known.last_seen > self.dead_after
        known.last_seen = now
        known.heard = True
        return returned

    def alive(self, datanode_id: int, now: float | None = None) -> bool:
        """Heard from within `dead_after` seconds."""
        known = self._known.get(datanode_id)
        if known is None or not known.heard:
            return False
        now = time.monotonic() if now is None else now
        return now - known.last_seen <= self.dead_after

    def silent_for(self, datanode_id: int) -> float:
        """Seconds since its last heartbeat (or since this namenode started)."""
        known = self._known.get(datanode_id)
        if known is None:
            return float("inf")
        return time.monotonic() - known.last_seen

    def lost(self, datanode_id: int) -> bool:
        """Dead longer than `lost_after`: its replicas are given up and copied anew."""
        return not self.alive(datanode_id) and self.silent_for(datanode_id) > self.lost_after

    def live(self) -> list[int]:
        """Datanodes heard from within `dead_after` seconds, by id."""
        now = time.monotonic()
        return [d for d in sorted(self._known) if self.alive(d, now)]

    def placeable(self) -> list[int]:
        """Live datanodes in normal service that may receive new data, by id."""
        return [d for d in sorted(self._known) if self.is_placeable(d)]

    def is_placeable(self, datanode_id: int) -> bool:
        """Whether one datanode may receive new data: live, in normal service, running
        no work this namenode does not know."""
        known = self._known.get(datanode_id)
        return (
            known is not None
            and known.admin_state == NORMAL
            and not known.busy_unknown
            and self.alive(datanode_id)
        )

    def admin_state(self, datanode_id: int) -> int:
        """NORMAL, DECOMMISSIONING or DECOMMISSIONED."""
        known = self._known.get(datanode_id)
        return known.admin_state if known is not None else NORMAL

    def set_admin_state(self, datanode_id: int, state: int) -> None:
        """Change the administrative state (the caller recorded it in PostgreSQL)."""
        self._known[datanode_id].admin_state = state

    def set_busy_unknown(self, datanode_id: int, busy: bool) -> None:
        """Whether it runs work this namenode does not know (then no new data goes to it)."""
        known = self._known.get(datanode_id)
        if known is not None:
            known.busy_unknown = busy

    def ids(self) -> list[int]:
        """Every known datanode, by id."""
        return sorted(self._known)

    def forget(self, datanode_id: int) -> None:
        """Drop a removed datanode."""
        self._known.pop(datanode_id, None)
        self.allocator.remove_datanode(datanode_id)

    def last_heartbeat_age(self, datanode_id: int) -> float:
        """Seconds since its last heartbeat; -1 if none reached this namenode."""
        known = self._known.get(datanode_id)
        if known is None or not known.heard:
            return -1.0
        return time.monotonic() - known.last_seen

    def location(self, datanode_id: int) -> str:
        """The rack or zone a datanode is in."""
        known = self._known.get(datanode_id)
        return known.row.location if known is not None else DEFAULT_LOCATION

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
