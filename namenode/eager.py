"""Run a coroutine eagerly: its first step runs now, a Task is made only if it suspends.

Most namenode requests are answered from the cache without ever suspending; making
an asyncio Task for each costs more than the lookup itself (Python 3.12's eager task
factory does the same thing; this is for 3.11).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any


def start_eagerly(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run `coro` until it first suspends; return the Task that finishes it, or None."""
    try:
        suspended_on = coro.send(None)
    except StopIteration:
        return None
    if suspended_on is not None:
        # A future yielded by `await` is flagged until a Task accepts it, and while
        # flagged, another coroutine awaiting the same future fails. We accept it here.
        suspended_on._asyncio_future_blocking = False
    return asyncio.ensure_future(_resume(coro, suspended_on))


async def _resume(coro: Coroutine[Any, Any, None], suspended_on: Any) -> None:
    await _drive(coro, suspended_on)


@types.coroutine
def _drive(coro: Coroutine[Any, Any, None], suspended_on: Any) -> Generator[Any, Any, None]:
    # Hand what the coroutine waits on to the Task, and the Task's answers back to it.
    while True:
        if suspended_on is not None:
            suspended_on._asyncio_future_blocking = True  # as `await` left it
        try:
            value = yield suspended_on
        except BaseException as exc:
            try:
                suspended_on = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                suspended_on = coro.send(value)
            except StopIteration:
                return
