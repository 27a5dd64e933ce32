"""FairUse: users' queued requests take turns in arrival order per user, a flooding
user past its share waits while another is active (and only then), and the
per-user limits on transactions and files being written are typed refusals."""

from __future__ import annotations

import asyncio
import contextvars
import time

import pytest
from prometheus_client import generate_latest

from plasmafs.core.errors import BusyError
from plasmafs.namenode.fair_use import (
    ACTIVE_SECONDS,
    BURST_SECONDS,
    FEW_IN_FLIGHT,
    WATCH_SECONDS,
    FairUse,
    UserLoad,
)
from plasmafs.namenode.metrics import NamenodeMetrics


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _costly(seconds: float) -> None:
    _busy(seconds)


async def test_alone_a_user_runs_at_once_and_past_its_share() -> None:
    fair = FairUse(1000, 10, 10, share=0.25)
    load = fair.join("flooder")
    load.inflight = 100
    ran: list[int] = []
    for k in range(50):
        fair.start(load, ran.append, k)
        await fair.metered(load, _costly(BURST_SECONDS / 4))
    assert ran == list(range(50))  # nobody else: never queued, never held
    assert fair.held_seconds == 0


async def test_a_flooder_past_its_share_waits_and_another_user_goes_first() -> None:
    fair = FairUse(1000, 10, 10, share=0.25)
    flooder, other = fair.join("flooder"), fair.join("other")
    flooder.inflight = FEW_IN_FLIGHT + 1
    order: list[str] = []
    fair.start(other, order.append, "other-0")  # the other user is active
    fair.start(flooder, order.append, "flood-0")  # its share applies from now on
    await fair.metered(flooder, _costly(2 * BURST_SECONDS))  # and is spent
    for k in range(1, 21):
        fair.start(flooder, order.append, f"flood-{k}")
    fair.start(other, order.append, "other-1")
    for _ in range(3):
        await asyncio.sleep(0)
    assert order == ["other-0", "flood-0", "other-1"]  # the flooder waits, the other not
    deadline = time.monotonic() + 5
    while len(order) < 23 and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    assert order[3:] == [f"flood-{k}" for k in range(1, 21)]  # in order, once credited
    assert fair.held_seconds > 0 and set(fair.held_by_user) == {"flooder"}


async def test_a_user_with_few_requests_in_flight_is_never_held() -> None:
    fair = FairUse(1000, 10, 10, share=0.25)
    light, other = fair.join("light"), fair.join("other")
    light.inflight = FEW_IN_FLIGHT
    fair.start(other, print, "")
    await fair.metered(light, _costly(2 * BURST_SECONDS))
    ran: list[int] = []
    fair.start(light, ran.append, 1)
    assert ran == [1]


async def test_queued_users_take_turns() -> None:
    fair = FairUse(1000, 10, 10, share=1.0)
    a, b = fair.join("a"), fair.join("b")
    order: list[str] = []
    fair._queued = 1  # as if someone's request were already waiting
    fair._turns.append(a)
    a.queued.append((order.append, "a-first", contextvars.copy_context()))
    for k in range(20):
        fair.start(a, order.append, f"a{k}")
    fair.start(b, order.append, "b0")
    deadline = time.monotonic() + 5
    while len(order) < 22 and time.monotonic() < deadline:
        await asyncio.sleep(0)
    assert order.index("b0") < order.index("a19")  # b did not wait for a's backlog
    assert [x for x in order if x.startswith("a")] == ["a-first"] + [f"a{k}" for k in range(20)]


async def test_requests_in_flight_wait_for_room() -> None:
    fair = FairUse(2, 10, 10, share=1.0)
    load = fair.join("u")
    assert fair.admitted(load) and fair.admitted(load)
    assert not fair.admitted(load)
    third = asyncio.create_task(fair.room(load))
    await asyncio.sleep(0.01)
    assert not third.done()
    fair.answered(load, 1)
    await asyncio.wait_for(third, 1)
    assert load.inflight == 2


def test_transactions_and_writing_files_are_refused_past_the_limits() -> None:
    fair = FairUse(10, 2, 1, share=1.0)
    load = fair.join("u")
    fair.begin(load)
    fair.begin(load)
    with pytest.raises(BusyError, match="max_transactions_per_user"):
        fair.begin(load)
    load.writing = 1
    with pytest.raises(BusyError, match="max_writing_per_user"):
        fair.check_writing(load)
    fair.ended(load, writing=1)
    fair.check_writing(load)
    fair.begin(load)
    assert fair.refusals == 2
    other = fair.join("v")
    fair.begin(other)  # another user has limits of its own
    fair.leave(other, None)
    assert "v" not in fair.users


async def test_a_light_user_who_pauses_no_longer_holds_a_flood_back() -> None:
    """Only a light user making requests now (within ACTIVE_SECONDS) holds floods back:
    a script checking on something once a second costs a busy user nothing between."""
    fair = FairUse(1000, 10, 10, share=0.1)
    flooder, pinger = fair.join("flooder"), fair.join("pinger")
    flooder.inflight = FEW_IN_FLIGHT + 1
    fair.start(pinger, print, "")
    await asyncio.sleep(ACTIVE_SECONDS + WATCH_SECONDS)
    ran: list[int] = []
    for k in range(20):
        fair.start(flooder, ran.append, k)
        await fair.metered(flooder, _costly(BURST_SECONDS))
    assert ran == list(range(20)) and not flooder.watched


async def test_queued_requests_start_in_their_own_context_and_a_failure_stops_nothing() -> None:
    """The pump starts requests of many connections: each runs in the context of the
    connection that read it, and one that raises does not stop the others."""
    whose: contextvars.ContextVar[str] = contextvars.ContextVar("whose", default="pump")
    fair = FairUse(1000, 10, 10, share=1.0)
    a, b = fair.join("a"), fair.join("b")
    seen: list[tuple[str, str]] = []

    def record(name: str) -> None:
        if name == "a1":
            raise RuntimeError("a bug in one request")
        seen.append((name, whose.get()))

    fair._queued = 1  # as if someone's request were already waiting: everything queues
    fair._turns.append(a)
    a.queued.append((record, "a0", contextvars.copy_context()))

    def read(load: UserLoad, who: str, names: list[str]) -> None:
        whose.set(who)
        for name in names:
            fair.start(load, record, name)

    contextvars.copy_context().run(read, a, "conn-a", ["a1", "a2"])
    contextvars.copy_context().run(read, b, "conn-b", ["b0"])
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0)
    assert sorted(seen) == [("a0", "pump"), ("a2", "conn-a"), ("b0", "conn-b")]
    assert fair._queued == 0


async def test_a_closed_connection_s_waiting_requests_are_dropped() -> None:
    fair = FairUse(1000, 10, 10, share=1.0)
    load = fair.join("u")
    load.sessions += 1  # two connections
    load.inflight = FEW_IN_FLIGHT + 1  # not a light user: its requests wait for turns

    class Connection:
        def __init__(self) -> None:
            self.started: list[int] = []

        def start(self, k: int) -> None:
            self.started.append(k)

    gone, staying = Connection(), Connection()
    fair._queued = 1
    fair._turns.append(fair.join("other"))
    fair.users["other"].queued.append((print, "", contextvars.copy_context()))
    for k in range(3):
        fair.start(load, gone.start, k)
        fair.start(load, staying.start, k)
    fair.leave(load, gone)
    deadline = time.monotonic() + 5
    while len(staying.started) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0)
    assert (gone.started, staying.started) == ([], [0, 1, 2])
    assert fair._queued == 0


def test_who_was_held_back_is_a_labeled_counter() -> None:
    metrics = NamenodeMetrics()
    held = {"flooder": 1.5, "other": 0.25}
    metrics.add_labeled_counter("pfs_namenode_user_held_seconds", "held", "user", held.copy)
    text = generate_latest(metrics.registry).decode()
    assert 'pfs_namenode_user_held_seconds_total{user="flooder"} 1.5' in text
    assert 'pfs_namenode_user_held_seconds_total{user="other"} 0.25' in text
