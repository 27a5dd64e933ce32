"""What the namenode told this datanode when it registered, and the one check every
request of either data path (gRPC, local reads) passes: a valid ticket for exactly its
blocks, inside the volume."""

from __future__ import annotations

from plasmafs.core import tickets
from plasmafs.core.errors import StorageError
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.datanode.volume import Volume


class Registration:
    """This datanode's id and the ticket secret, once registered, and the credentials
    whose tickets the namenode last said to refuse."""

    def __init__(self) -> None:
        self.datanode_id = 0
        self.secret = b""
        self.revoked: frozenset[int] = frozenset()
        self.term = 0  # the newest namenode term heard of: older write tickets are refused

    def heard_term(self, term: int) -> None:
        """A namenode said it serves in `term` (terms only grow)."""
        self.term = max(self.term, term)


def authorize(
    registration: Registration,
    volume: Volume,
    ticket: dpb.Ticket,
    start: int,
    count: int,
    *,
    write: bool,
) -> None:
    """Raise unless `ticket` allows reading (or writing) blocks [start, start+count) of
    this datanode's volume."""
    if not registration.secret:
        raise StorageError("the datanode has not registered with a namenode yet")
    tickets.check(
        registration.secret,
        ticket,
        registration.datanode_id,
        start,
        count,
        write=write,
        revoked=registration.revoked,
        newest_term=registration.term,
    )
    volume.check_range(start, count)
