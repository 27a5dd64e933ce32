"""Block-range tickets: capabilities the namenode signs and datanodes check alone.

A ticket names one datanode, a block range, read or write, an expiry, the
credential it was issued to (0: the namenode's own, for its datanodes' copies), the
issuing namenode's term and the range's owner (file, generation, file block index:
the stamp datanodes keep with each block); its signature is HMAC-SHA256 over those fields with the
secret the namenode shares with its datanodes at registration. A datanode refuses a
missing, forged, expired, foreign or out-of-range ticket, one of a credential the
namenode has since revoked (it lists those in its heartbeat replies), and a write
ticket of a term older than the newest it heard of (a deposed namenode's: whatever it
lets clients write can never be committed), without asking the namenode. Read
tickets of older terms stay good until they expire: readers go on reading committed
blocks through a failover.
"""

from __future__ import annotations

import hmac
import struct
import time
from collections.abc import Container

from plasmafs.core.errors import PermissionDeniedError
from plasmafs.core.proto import datanode_pb2 as dpb

# datanode, start, count, write, expiry, credential, term, owner ino, generation, index
_LAYOUT = struct.Struct(">IQQ?qQQQQQ")


def _digest(secret: bytes, t: dpb.Ticket) -> bytes:
    payload = _LAYOUT.pack(
        t.datanode_id, t.block_start, t.block_count, t.write, t.expires_unix_ms, t.credential,
        t.term, t.owner_ino, t.owner_generation, t.owner_index,
    )  # fmt: skip
    return hmac.digest(secret, payload, "sha256")  # one C call, no HMAC object


def sign(
    secret: bytes,
    datanode_id: int,
    block_start: int,
    block_count: int,
    *,
    write: bool,
    ttl_seconds: float,
    credential: int = 0,
    term: int = 0,
    owner: tuple[int, int, int] = (0, 0, 0),
    out: dpb.Ticket | None = None,
) -> dpb.Ticket:
    """A signed ticket for blocks [block_start, block_start + block_count) of a datanode,
    issued to `credential` by the namenode of `term`, for the blocks of `owner` (file,
    generation, file block index of block_start)."""
    t = out if out is not None else dpb.Ticket()
    t.credential = credential
    t.term = term
    t.owner_ino, t.owner_generation, t.owner_index = owner
    t.datanode_id = datanode_id
    t.block_start = block_start
    t.block_count = block_count
    t.write = write
    t.expires_unix_ms = int((time.time() + ttl_seconds) * 1000)
    t.signature = _digest(secret, t)
    return t


def check(
    secret: bytes,
    ticket: dpb.Ticket,
    datanode_id: int,
    block_start: int,
    block_count: int,
    *,
    write: bool,
    revoked: Container[int] = (),
    newest_term: int = 0,
) -> None:
    """Raise PermissionDeniedError unless `ticket` allows this access, its credential is
    not among `revoked`, and a write ticket comes from `newest_term` or a later one."""
    if not ticket.signature:
        raise PermissionDeniedError("no ticket")
    if not hmac.compare_digest(ticket.signature, _digest(secret, ticket)):
        raise PermissionDeniedError("forged ticket")
    if ticket.datanode_id != datanode_id:
        raise PermissionDeniedError(f"ticket is for datanode {ticket.datanode_id}")
    if ticket.expires_unix_ms < time.time() * 1000:
        raise PermissionDeniedError("expired ticket")
    if ticket.credential and ticket.credential in revoked:
        raise PermissionDeniedError("the ticket's credential was revoked")
    if write and not ticket.write:
        raise PermissionDeniedError("read ticket used for a write")
    if write and ticket.term < newest_term:
        raise PermissionDeniedError(
            f"write ticket of namenode term {ticket.term}; term {newest_term} is the active one's"
        )
    end = block_start + block_count
    if block_start < ticket.block_start or end > ticket.block_start + ticket.block_count:
        raise PermissionDeniedError(
            f"blocks {block_start}..{end - 1} are outside the ticket's "
            f"{ticket.block_start}..{ticket.block_start + ticket.block_count - 1}"
        )


def owner_at(ticket: dpb.Ticket, block: int) -> tuple[int, int, int] | None:
    """The owner (file, generation, file block index) `ticket` names for `block` of its
    range, None when it names none (generation 0: extents allocated before stamps)."""
    if not ticket.owner_ino or not ticket.owner_generation:
        return None
    index = ticket.owner_index + block - ticket.block_start
    return (ticket.owner_ino, ticket.owner_generation, index)
