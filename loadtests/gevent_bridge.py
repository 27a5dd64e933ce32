"""Run the asyncio client under locust's gevent: an event-loop thread, and greenlets that
wait for it cooperatively.

grpc.aio needs a real thread and a real event loop, and gevent's monkey patching breaks
them, so locust runs with LOCUST_SKIP_MONKEY_PATCH=1. A greenlet hands a call to the loop
thread and waits on a gevent AsyncResult; the loop thread never touches gevent objects
(they are not thread-safe): it queues finished calls and wakes the hub through one async
watcher, whose send() is the one thread-safe entry into gevent's loop. Every user of a
locust process shares the loop, so many calls are in flight at once over its connections.
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


class BridgeStoppedError(RuntimeError):
    """The bridge stopped while a call was waiting for it."""


def require_unpatched() -> None:
    """Refuse to run where gevent has patched threads (locust without
    LOCUST_SKIP_MONKEY_PATCH=1): grpc.aio would hang rather than fail."""
    if monkey.is_module_patched("threading"):
        raise MonkeyPatchedError(
            "gevent monkey patching is on: run locust with LOCUST_SKIP_MONKEY_PATCH=1 "
            "(python -m loadtests.locust_run sets it)"
        )


class _Call:
    """One call handed to the loop: its result for the greenlet, its task on the loop."""

    __slots__ = ("result", "task")

    def __init__(self) -> None:
        self.result = gevent.event.AsyncResult()
        self.task: asyncio.Future[Any] | None = None


class GeventBridge:
    """An asyncio loop in a daemon thread; `call` runs a function there from a greenlet."""

    def __init__(self) -> None:
        require_unpatched()
        self._finished: collections.deque[tuple[_Call, Any, bool]] = collections.deque()
        self._wakeup = gevent.get_hub().loop.async_()
        self._wakeup.start(self._deliver)
        self._running: set[_Call] = set()  # on the loop thread; also keeps tasks alive
        self._waiting: set[_Call] = set()  # on the hub: calls greenlets wait for
        self._stopped = False
        self.loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="pfs-loop", daemon=True)
        self._thread.start()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call `fn(*args, **kwargs)` on the loop thread (awaiting it there if it returns an
        awaitable) and return its result; only this greenlet waits meanwhile. If the
        greenlet is killed (locust stopping a user), the call is cancelled on the loop."""
        if self._stopped:
            raise BridgeStoppedError("the bridge has stopped")
        call = _Call()
        self._waiting.add(call)
        try:
            self.loop.call_soon_threadsafe(self._start, call, fn, args, kwargs)
            return call.result.get()
        except BaseException:
            if not call.result.ready() and not self._stopped:
                self.loop.call_soon_threadsafe(self._cancel, call)
            raise
        finally:
            self._waiting.discard(call)

    def stop(self) -> None:
        """Fail every waiting call, stop and close the loop, and release the watcher."""
        if self._stopped:
            return
        self._stopped = True
        done = threading.Event()

        def shut_down() -> None:
            for call in list(self._running):
                self._cancel(call)
            self.loop.stop()
            done.set()

        self.loop.call_soon_threadsafe(shut_down)
        done.wait(timeout=5)
        self._thread.join(timeout=5)
        self._deliver()
        for call in list(self._waiting):
            if not call.result.ready():
                call.result.set_exception(BridgeStoppedError("the bridge stopped"))
        if not self.loop.is_running():
            self.loop.close()
        self._wakeup.stop()
        self._wakeup.close()

    # --- on the loop thread --------------------------------------------------------------------

    def _start(
        self, call: _Call, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the waiting greenlet, raised there
            self._finish(call, exc, failed=True)
            return
        if not inspect.isawaitable(value):
            self._finish(call, value, failed=False)
            return
        call.task = asyncio.ensure_future(value)
        self._running.add(call)
        call.task.add_done_callback(lambda task: self._finish_task(call, task))

    def _cancel(self, call: _Call) -> None:
        if call.task is not None:
            call.task.cancel()

    def _finish_task(self, call: _Call, task: asyncio.Future[Any]) -> None:
        if task.cancelled():
            self._finish(call, asyncio.CancelledError(), failed=True)
        elif (exc := task.exception()) is not None:
            self._finish(call, exc, failed=True)
        else:
            self._finish(call, task.result(), failed=False)

    def _finish(self, call: _Call, value: Any, *, failed: bool) -> None:
        self._running.discard(call)
        self._finished.append((call, value, failed))
        self._wakeup.send()

    # --- on the gevent hub ---------------------------------------------------------------------

    def _deliver(self) -> None:
        while self._finished:
            call, value, failed = self._finished.popleft()
            if call.result.ready():
                continue
            if failed:
                call.result.set_exception(value)
            else:
                call.result.set(value)
