"""Where other datanodes serve their data, as the namenode knows them.

A client's server-side copy names its source datanode by id; this datanode connects
only to the address that datanode registered with, which the namenode tells it (a
client could otherwise point it at any host and port). Answers are kept a minute, and
forgotten at once when a copy from that address fails (the peer may have moved).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from plasmafs.core.errors import UnavailableError

PeerLookup = Callable[[int], Awaitable[tuple[str, bool]]]
KEEP_SECONDS = 60.0


class Peers:
    """A cache of peer addresses in front of the namenode's answers."""

    def __init__(self, lookup: PeerLookup | None = None) -> None:
        # Set once the namenode link exists (it is made after the datanode's server).
        self.lookup = lookup
        self._known: dict[int, tuple[str, bool, float]] = {}

    async def address(self, datanode_id: int) -> tuple[str, bool]:
        """The address datanode `datanode_id` registered and whether its data port is
        plaintext; raises what the namenode answered (NotFoundError: not registered)."""
        known = self._known.get(datanode_id)
        now = time.monotonic()
        if known is not None and known[2] > now:
            return known[0], known[1]
        if self.lookup is None:
            raise UnavailableError("this datanode has not reached its namenode yet")
        address, plaintext = await self.lookup(datanode_id)
        self._known[datanode_id] = (address, plaintext, now + KEEP_SECONDS)
        return address, plaintext

    def forget(self, datanode_id: int) -> None:
        """Ask the namenode again next time (a copy from the peer failed)."""
        self._known.pop(datanode_id, None)
