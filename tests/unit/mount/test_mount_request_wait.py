"""The mount's wait for the next FUSE request (`mount/request_wait.py`), on a pipe: a
queued request is seen at once, an idle device is waited for through the loop, a
stream of queued requests still lets the loop's other tasks run, a request that comes
while the wait spins is taken then, and spinning stops while it does not pay."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from plasmafs.mount import request_wait
from plasmafs.mount.request_wait import DeviceWait, QuickRequests


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


async def test_a_queued_request_is_seen_without_the_loop(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b"request")
    await asyncio.wait_for(DeviceWait().wait_readable(read_end), 1.0)
    assert os.read(read_end, 100) == b"request"


async def test_an_idle_device_is_waited_for(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    wait = DeviceWait()
    waiting = asyncio.create_task(wait.wait_readable(read_end))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    os.write(write_end, b"x")
    await asyncio.wait_for(waiting, 1.0)
    # The loop's reader is gone again: a second idle wait can be started and ended.
    os.read(read_end, 1)
    again = asyncio.create_task(wait.wait_readable(read_end))
    await asyncio.sleep(0.05)
    assert not again.done()
    os.write(write_end, b"y")
    await asyncio.wait_for(again, 1.0)


async def test_queued_requests_leave_other_tasks_their_turn(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, b"always readable")
    wait = DeviceWait()
    turns = 0

    async def other_task() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(other_task())
    await asyncio.sleep(0)
    for _ in range(100):
        await wait.wait_readable(read_end)
    other.cancel()
    assert turns >= 100


async def test_a_request_that_comes_while_spinning_is_taken_then(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long spin, so that only a spin that gives the loop no turn can miss the request.
    monkeypatch.setattr(request_wait, "SPIN", 5.0)
    read_end, write_end = pipe
    wait = DeviceWait()

    async def program() -> None:
        await asyncio.sleep(0)  # runs while the wait spins
        os.write(write_end, b"next request")

    sender = asyncio.create_task(program())
    await asyncio.wait_for(wait.wait_readable(read_end), 10.0)
    await sender
    assert wait.quick.share == 1.0  # the spin saw it: no sleep through the loop


def test_spinning_stops_while_it_does_not_pay_and_resumes_when_it_does() -> None:
    quick = QuickRequests()
    assert all(quick.spin_now() for _ in range(5))
    for _ in range(20):
        quick.record(False)
    spins = [quick.spin_now() for _ in range(3 * QuickRequests.PROBE_EVERY)]
    assert spins.count(True) == 3  # every 16th idle wait only, to notice a change
    while not quick.spin_now():
        pass
    for _ in range(20):
        quick.record(True)
    assert all(quick.spin_now() for _ in range(5))
