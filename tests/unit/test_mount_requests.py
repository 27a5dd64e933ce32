"""The mount's wait for the next FUSE request (`mount/requests.py`), on a pipe: a
queued request is seen at once, an idle device is waited for through the loop, and a
stream of queued requests still lets the loop's other tasks run."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from plasmafs.mount.requests import DeviceWait


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
