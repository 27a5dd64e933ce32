"""Run the asyncio client under locust's gevent: an event-loop thread, and greenlets that
wait for it cooperatively.

grpc.aio needs a real thread and a real event loop, and gevent's monkey patching breaks
them, so locust runs with LOCUST_SKIP_MONKEY_PATCH=1. A greenlet hands a call to the loop
thread and waits on a gevent AsyncResult; the loop thread never touches gevent objects
(they are not thread-safe): it queues finished calls and wakes the hub through one async
watcher, whose send() is the one thread-safe entry into gevent's loop. Every user in a
locust process shares the loop, so many calls are in flight at once on one connection.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import threading
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
import uvloop
from gevent import monkey


class MonkeyPatchedError(RuntimeError):
    """gevent patched the threading module, so grpc.aio cannot run in this process."""


def require_unpatched() -> None:
    """Refuse to run where gevent has patched threads (locust without
    LOCUST_SKIP_MONKEY_PATCH=1): grpc.aio would hang rather than fail."""
    if monkey.is_module_patched("threading"):
        raise MonkeyPatchedError(
            "gevent monkey patching is on: run locust with LOCUST_SKIP_MONKEY_PATCH=1 "
            "(python -m loadtests.locust_run sets it)"
        )


class GeventBridge:
    """An asyncio loop in a daemon thread; `call` runs a function there from a greenlet."""

    def __init__(self) -> None:
        require_unpatched()
        self._finished: collections.deque[tuple[gevent.event.AsyncResult, Any, bool]] = (
            collections.deque()
        )
        self._wakeup = gevent.get_hub().loop.async_()
        self._wakeup.start(self._deliver)
        self.loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="pfs-loop", daemon=True)
        self._thread.start()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call `fn(*args, **kwargs)` on the loop thread (awaiting it there if it returns an
        awaitable) and return its result; only this greenlet waits meanwhile."""
        result = gevent.event.AsyncResult()
        self.loop.call_soon_threadsafe(self._start, result, fn, args, kwargs)
        return result.get()

    def stop(self) -> None:
        """Stop the loop thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self._wakeup.stop()

    # --- on the loop thread --------------------------------------------------------------------

    def _start(
        self,
        result: gevent.event.AsyncResult,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the waiting greenlet, raised there
            self._finish(result, exc, failed=True)
            return
        if not inspect.isawaitable(value):
            self._finish(result, value, failed=False)
            return
        task = asyncio.ensure_future(value)
        task.add_done_callback(lambda done: self._finish_task(result, done))

    def _finish_task(self, result: gevent.event.AsyncResult, task: asyncio.Future[Any]) -> None:
        if task.cancelled():
            self._finish(result, asyncio.CancelledError(), failed=True)
        elif (exc := task.exception()) is not None:
            self._finish(result, exc, failed=True)
        else:
            self._finish(result, task.result(), failed=False)

    def _finish(self, result: gevent.event.AsyncResult, value: Any, *, failed: bool) -> None:
        self._finished.append((result, value, failed))
        self._wakeup.send()

    # --- on the gevent hub ---------------------------------------------------------------------

    def _deliver(self) -> None:
        while self._finished:
            result, value, failed = self._finished.popleft()
            if failed:
                result.set_exception(value)
            else:
                result.set(value)
