"""The block ranges of this volume being written right now, for the scrub.

A block is written as two pwrites (its data, then its checksum), so a block read while
a client's WriteBlocks stream or a copy task writes it can fail its checksum without
being damaged. Writers register their range for as long as any thread may still write
into it; the scrub skips registered ranges and, before reporting a mismatch, checks
that no write touched the block while it was read (`touched`).

Writers run on the event loop; the registry takes a lock anyway so that a check from
another thread sees a consistent state.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
HISTORY = 4096  # begin/end events remembered for `touched`; older marks count as touched


class InflightWrites:
    """Block ranges being written, and a short history of writes begun and ended."""

    def __init__(self, history: int = HISTORY) -> None:
        self._lock = threading.Lock()
        self._active: dict[int, tuple[int, int]] = {}  # token -> [start, end)
        self._seq = 0
        self._events: deque[tuple[int, int, int]] = deque(maxlen=history)  # seq, start, end

    def begin(self, block_start: int, block_count: int) -> int:
        """Register blocks [block_start, +block_count) as being written; returns a token."""
        with self._lock:
            self._seq += 1
            end = block_start + block_count
            self._active[self._seq] = (block_start, end)
            self._events.append((self._seq, block_start, end))
            return self._seq

    def end(self, token: int) -> None:
        """The write registered as `token` is over: no thread writes its blocks any more."""
        with self._lock:
            start, end = self._active.pop(token)
            self._seq += 1
            self._events.append((self._seq, start, end))

    @contextmanager
    def writing(self, block_start: int, block_count: int) -> Iterator[None]:
        """Keep the range registered for the duration of the block."""
        token = self.begin(block_start, block_count)
        try:
            yield
        finally:
            self.end(token)

    def mark(self) -> int:
        """A point in the write history, for a later `touched(..., since=mark)`."""
        with self._lock:
            return self._seq

    def touched(self, block_start: int, block_count: int, since: int) -> bool:
        """Whether a write of any of the blocks is running now, or began or ended after
        `since` (a `mark()`): a checksum mismatch read meanwhile may be transient."""
        end = block_start + block_count
        with self._lock:
            if any(s < end and block_start < e for s, e in self._active.values()):
                return True
            if self._seq == since:
                return False
            if not self._events or self._events[0][0] > since + 1:
                return True  # the history no longer reaches back to `since`
            return any(seq > since and s < end and block_start < e for seq, s, e in self._events)

    def idle_runs(self, block_start: int, block_count: int) -> list[tuple[int, int]]:
        """The parts of [block_start, +block_count) no write is registered for, as
        (start, count) runs in block order."""
        with self._lock:
            busy = sorted(self._active.values())
        runs = []
        at, end = block_start, block_start + block_count
        for s, e in busy:
            if e <= at or s >= end:
                continue
            if s > at:
                runs.append((at, s - at))
            at = max(at, e)
        if at < end:
            runs.append((at, end - at))
        return runs

    @property
    def active(self) -> int:
        """Writes registered now."""
        with self._lock:
            return len(self._active)


async def run_to_end(
    executor: concurrent.futures.Executor, fn: Callable[..., T], *args: object
) -> T:
    """Run `fn(*args)` on `executor` and return its result; if the caller is cancelled
    meanwhile, wait for the thread to finish before re-raising the cancellation.

    A thread cannot be stopped: without this, a cancelled writer would release its
    range (and a cancelled copy would stop being reported as running) while a thread
    still writes blocks of it.
    """
    waiter = in_thread(executor, fn, *args)
    try:
        return await asyncio.shield(waiter)
    except asyncio.CancelledError:
        await settle(waiter)
        raise


def in_thread(
    executor: concurrent.futures.Executor, fn: Callable[..., T], *args: object
) -> asyncio.Future[T]:
    """`fn(*args)` submitted to `executor`, as a future to await through `asyncio.shield`
    and to `settle` when the awaiting code ends early."""
    return asyncio.wrap_future(executor.submit(fn, *args))


async def settle(waiter: asyncio.Future[Any] | None) -> None:
    """Wait until `waiter` is done, whatever its outcome, ignoring cancellation meanwhile
    (the caller re-raises it)."""
    if waiter is None:
        return
    while not waiter.done():
        try:
            await asyncio.shield(waiter)
        except asyncio.CancelledError:
            continue
        except Exception:  # its outcome belongs to whoever awaits it
            return
    if not waiter.cancelled():
        waiter.exception()  # retrieved: no "exception never retrieved" warning
