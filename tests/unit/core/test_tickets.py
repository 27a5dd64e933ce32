"""Block tickets: the signature covers every field, the credential, the term and the
owner included; the owner of each block of the range follows from it; a ticket of a
revoked credential is refused while the namenode's own are not; a write ticket of an
earlier namenode term is refused, a read ticket is not."""

from __future__ import annotations

import pytest

from plasmafs.core import tickets
from plasmafs.core.errors import PermissionDeniedError
from plasmafs.core.proto import datanode_pb2 as dpb

SECRET = b"s" * 32


def _ticket(credential: int = 7, write: bool = False) -> dpb.Ticket:
    return tickets.sign(
        SECRET, 3, 100, 10, write=write, ttl_seconds=60, credential=credential,
        owner=(11, 2 << 32 | 5, 40),
    )  # fmt: skip


def test_a_good_ticket_passes() -> None:
    tickets.check(SECRET, _ticket(), 3, 100, 10, write=False)
    tickets.check(SECRET, _ticket(write=True), 3, 105, 5, write=True, revoked={8, 9})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("datanode_id", 4),
        ("block_start", 99),
        ("block_count", 11),
        ("write", True),
        ("expires_unix_ms", 2**62),
        ("credential", 8),
        ("term", 9),
        ("owner_ino", 12),
        ("owner_generation", 1),
        ("owner_index", 1),
    ],
)
def test_changing_any_field_breaks_the_signature(field: str, value: object) -> None:
    ticket = _ticket()
    setattr(ticket, field, value)
    with pytest.raises(PermissionDeniedError, match="forged"):
        tickets.check(SECRET, ticket, ticket.datanode_id, 100, 1, write=False)


def test_a_revoked_credentials_ticket_is_refused() -> None:
    with pytest.raises(PermissionDeniedError, match="revoked"):
        tickets.check(SECRET, _ticket(credential=7), 3, 100, 1, write=False, revoked={7})


def test_the_namenodes_own_tickets_cannot_be_revoked() -> None:
    tickets.check(SECRET, _ticket(credential=0), 3, 100, 1, write=False, revoked={0})


def test_refusals_are_ticket_errors() -> None:
    with pytest.raises(PermissionDeniedError, match="no ticket"):
        tickets.check(SECRET, dpb.Ticket(), 3, 100, 1, write=False)
    with pytest.raises(PermissionDeniedError, match="read ticket"):
        tickets.check(SECRET, _ticket(), 3, 100, 1, write=True)
    with pytest.raises(PermissionDeniedError, match="outside"):
        tickets.check(SECRET, _ticket(), 3, 109, 2, write=False)
    with pytest.raises(PermissionDeniedError, match="expired"):
        expired = tickets.sign(SECRET, 3, 100, 10, write=False, ttl_seconds=-1)
        tickets.check(SECRET, expired, 3, 100, 1, write=False)


def test_a_write_ticket_of_an_earlier_term_is_refused_a_read_ticket_is_not() -> None:
    old_write = tickets.sign(SECRET, 3, 100, 10, write=True, ttl_seconds=60, term=4)
    old_read = tickets.sign(SECRET, 3, 100, 10, write=False, ttl_seconds=60, term=4)
    tickets.check(SECRET, old_write, 3, 100, 10, write=True, newest_term=4)
    with pytest.raises(PermissionDeniedError, match="write ticket of namenode term 4; term 5"):
        tickets.check(SECRET, old_write, 3, 100, 10, write=True, newest_term=5)
    tickets.check(SECRET, old_read, 3, 100, 10, write=False, newest_term=5)
    tickets.check(SECRET, old_write, 3, 100, 10, write=False, newest_term=5)  # read with it


def test_the_owner_of_each_block_follows_from_the_tickets_first() -> None:
    ticket = _ticket()
    assert tickets.owner_at(ticket, 100) == (11, 2 << 32 | 5, 40)
    assert tickets.owner_at(ticket, 107) == (11, 2 << 32 | 5, 47)
    # Extents allocated before stamps (generation 0), and the namenode's own: no owner.
    legacy = tickets.sign(SECRET, 3, 100, 10, write=False, ttl_seconds=60, owner=(11, 0, 40))
    assert tickets.owner_at(legacy, 100) is None
    own = tickets.sign(SECRET, 3, 100, 10, write=False, ttl_seconds=60)
    assert tickets.owner_at(own, 100) is None
