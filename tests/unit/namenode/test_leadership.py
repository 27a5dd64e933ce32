"""The lease rules of `Leadership`, on `MemoryLeases` (the lease as `LeaseStore` keeps it,
on this process's clock): a standby waits out another's lease, a restart where the
active ran takes over at once, an active that cannot renew stops answering until it
can, and a newer term or a PostgreSQL restart with unflushed commits deposes it."""

from __future__ import annotations

import asyncio

import pytest

from plasmafs.core.errors import NotActiveError, StorageError
from plasmafs.namenode.leadership import Leadership
from plasmafs.namenode.lease_store import Renewal
from tests.support.memory_store import MemoryLeases
from tests.support.waiting import eventually

TTL = 0.3  # seconds: renewals every 0.1 s


class Unreachable(MemoryLeases):
    """Leases whose renewals fail while `down` (PostgreSQL cannot be reached)."""

    down = False
    restarted = 0.0  # the server start time renewals answer

    async def renew(self, term: int, ttl: float) -> Renewal:
        if self.down:
            raise StorageError("namenode lease: connection refused")
        renewal = await super().renew(term, ttl)
        return Renewal(renewal.held, self.restarted)


def leader(leases: MemoryLeases, place: str = "", unflushed: int = 0) -> Leadership:
    deposed: list[str] = []
    made = Leadership(leases, TTL, deposed.append, place=place, unflushed=lambda: unflushed)
    made.deposed_reasons = deposed  # type: ignore[attr-defined]
    return made


async def test_a_standby_waits_out_the_lease_of_the_active_one() -> None:
    leases = MemoryLeases()
    active, standby = leader(leases, "host-a"), leader(leases, "host-b")
    assert await active.try_take() and active.current_term() == 1
    assert not await standby.try_take()
    active.start()
    await asyncio.sleep(3 * TTL)  # renewed all along: the standby cannot take it
    assert not await standby.try_take()
    await active.stop(release=False)  # as a kill: the lease runs out by itself
    await asyncio.wait_for(standby.take(), 5 * TTL)
    assert standby.current_term() == 2


async def test_a_namenode_restarted_where_the_active_ran_takes_over_at_once() -> None:
    leases = MemoryLeases()
    first = leader(leases, "host-a")
    assert await first.try_take()
    again = leader(leases, "host-a")  # the same place: the first cannot be alive
    assert await again.try_take() and again.term == 2


async def test_an_active_that_cannot_renew_stops_answering_until_it_can() -> None:
    leases = Unreachable()
    active = leader(leases)
    assert await active.try_take()
    active.start()
    try:
        leases.down = True
        await eventually(lambda: _refuses(active), timeout=5)
        leases.down = False
        await eventually(lambda: not _refuses(active), timeout=5)
        assert active.term == 1 and not active.deposed
    finally:
        await active.stop()


async def test_a_newer_term_deposes_the_active_one() -> None:
    leases = MemoryLeases()
    active = leader(leases)
    assert await active.try_take()
    active.start()
    leases.term += 1  # another namenode took over while this one was paused
    await eventually(lambda: bool(active.deposed), timeout=5)
    assert "no longer the active one" in active.deposed
    assert active.deposed_reasons == [active.deposed]  # type: ignore[attr-defined]
    with pytest.raises(NotActiveError):
        active.current_term()
    await active.stop()


@pytest.mark.parametrize("unflushed", [0, 3])
async def test_a_postgresql_restart_deposes_only_with_unflushed_commits(unflushed: int) -> None:
    leases = Unreachable()
    active = leader(leases, unflushed=unflushed)
    assert await active.try_take()
    active.start()
    try:
        leases.restarted = 12345.0  # renewals now reach a server started anew
        await asyncio.sleep(5 * TTL)
        assert bool(active.deposed) == bool(unflushed)
    finally:
        await active.stop()


def _refuses(active: Leadership) -> bool:
    try:
        active.current_term()
    except NotActiveError:
        return True
    return False
