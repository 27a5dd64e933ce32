"""The registry of block ranges being written, and waiting out a thread's write."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from plasmafs.datanode.inflight import InflightWrites, run_to_end


def test_a_running_write_touches_only_its_own_blocks() -> None:
    writes = InflightWrites()
    mark = writes.mark()
    with writes.writing(10, 5):
        assert writes.touched(12, 1, since=mark)
        assert writes.touched(0, 11, since=mark)
        assert not writes.touched(15, 3, since=writes.mark())
        assert not writes.touched(0, 10, since=writes.mark())
        assert writes.active == 1
    assert writes.active == 0


def test_a_write_that_began_and_ended_since_the_mark_touched_its_blocks() -> None:
    writes = InflightWrites()
    mark = writes.mark()
    with writes.writing(4, 2):
        pass
    assert writes.touched(5, 1, since=mark)
    assert not writes.touched(6, 10, since=mark)
    assert not writes.touched(5, 1, since=writes.mark())


def test_a_write_running_at_the_mark_and_ended_since_touched_its_blocks() -> None:
    writes = InflightWrites()
    token = writes.begin(0, 8)
    mark = writes.mark()
    writes.end(token)
    assert writes.touched(3, 1, since=mark)


def test_a_mark_older_than_the_history_counts_as_touched() -> None:
    writes = InflightWrites(history=4)
    mark = writes.mark()
    for k in range(10):
        with writes.writing(100 + k, 1):
            pass
    assert writes.touched(0, 1, since=mark)  # cannot tell any more: assume the worst
    assert not writes.touched(0, 1, since=writes.mark())


def test_idle_runs_leave_out_the_ranges_being_written() -> None:
    writes = InflightWrites()
    assert writes.idle_runs(0, 10) == [(0, 10)]
    a = writes.begin(2, 3)
    b = writes.begin(4, 2)
    c = writes.begin(8, 10)
    assert writes.idle_runs(0, 10) == [(0, 2), (6, 2)]
    assert writes.idle_runs(8, 2) == []
    for token in (a, b, c):
        writes.end(token)
    assert writes.idle_runs(0, 10) == [(0, 10)]


async def test_a_cancelled_caller_returns_only_once_the_thread_is_done() -> None:
    release = threading.Event()
    done = threading.Event()

    def write() -> None:
        release.wait(10)
        done.set()

    with ThreadPoolExecutor(1) as pool:
        caller = asyncio.create_task(run_to_end(pool, write))
        await asyncio.sleep(0)  # let it submit
        caller.cancel()
        await asyncio.sleep(0)
        assert not caller.done()  # still waiting for the thread
        release.set()
        try:
            await caller
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the cancellation was lost")
        assert done.is_set()
