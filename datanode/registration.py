"""What the namenode told this datanode when it registered, and the one check every
request of either data path (gRPC, local reads) passes: a valid ticket for exactly its
blocks, inside the volume."""

from __future__ import annotations

import os
from pathlib import Path

from plasmafs.core import tickets
from plasmafs.core.errors import StorageError
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.datanode.volume import Volume


class Registration:
    """This datanode's id and the ticket secret, once registered, the credentials whose
    tickets the namenode last said to refuse, and the newest namenode term heard of —
    kept in `term_file` too, so that a restart neither lets a deposed namenode write nor
    hides from a namenode that its PostgreSQL lost history."""

    def __init__(self, term_file: Path | None = None) -> None:
        self.datanode_id = 0
        self.secret = b""
        self.revoked: frozenset[int] = frozenset()
        self._term_file = term_file
        # Older write tickets are refused; `holder` is the namenode that took `term`.
        self.term, self.holder = _read_term(term_file)

    def heard_term(self, term: int, holder: str) -> None:
        """A namenode (`holder`) said it serves in `term` (terms only grow; the first
        holder heard of for a term is kept)."""
        if term < self.term or (term == self.term and self.holder):
            return
        self.term, self.holder = term, holder
        if self._term_file is not None:
            tmp = self._term_file.with_suffix(".tmp")
            with open(tmp, "w") as f:
                f.write(f"{term} {holder}\n")
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(self._term_file)


def _read_term(path: Path | None) -> tuple[int, str]:
    if path is None or not path.exists():
        return 0, ""
    term, _, holder = path.read_text().strip().partition(" ")
    try:
        return int(term or 0), holder
    except ValueError:  # torn by a crash mid-write: heard again at the next registration
        return 0, ""


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


def authorize_peer_read(
    registration: Registration, ticket: dpb.Ticket, datanode_id: int, start: int, count: int
) -> None:
    """Raise unless `ticket` is one the namenode signed for reading blocks [start,
    start+count) of datanode `datanode_id` (a copy's source: the peer checks it again)."""
    if not registration.secret:
        raise StorageError("the datanode has not registered with a namenode yet")
    tickets.check(
        registration.secret,
        ticket,
        datanode_id,
        start,
        count,
        write=False,
        revoked=registration.revoked,
    )
