"""Start a request's coroutine as its own Task, eagerly where the loop supports it.

Most namenode requests are answered from the cache without ever suspending; on
Python >= 3.12 the standard library's eager start runs such a request to its end
inside `create` and no scheduling round is spent on it. Either way the request runs
as its own Task from its first step, so a timeout it sets (`asyncio.timeout`,
`wait_for`, which attach to the current task) cancels the request and nothing else.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any

EAGER_TASKS = sys.version_info >= (3, 12)


def start_eagerly(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run `coro` as a Task; return it while it runs, or None if it already finished."""
    loop = asyncio.get_running_loop()
    if EAGER_TASKS:
        task: asyncio.Task[None] = asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]
    else:
        task = loop.create_task(coro)
    if task.done():
        task.result()  # a request's own errors are answered; anything else surfaces here
        return None
    return task
