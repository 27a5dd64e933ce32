"""Waiting for a condition the system reaches by itself (heartbeats, copies, a mount
coming up), instead of sleeping for a time that bets on the machine's speed."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable

import pytest


async def eventually(
    check: Callable[[], object], what: str = "", *, timeout: float = 60.0, interval: float = 0.05
) -> object:
    """Call `check` (a function, or one returning an awaitable) until it returns something
    true, and return that; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what or check}")
        await asyncio.sleep(interval)


def eventually_sync(
    check: Callable[[], object], what: str = "", *, timeout: float = 60.0, interval: float = 0.05
) -> object:
    """`eventually` for tests that are not coroutines."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what or check}")
        time.sleep(interval)
