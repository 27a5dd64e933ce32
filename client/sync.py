"""The synchronous facade: the asyncio client driven from a private event-loop thread.

Nothing is written twice: every coroutine method of `Client` and `Transaction` is
called on the loop thread and its result handed back; async iterators become plain
iterators. Use it from threads, scripts and the REPL.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from plasmafs.client.client import Client
from plasmafs.client.config import namenode_address
from plasmafs.client.transaction import Transaction

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="pfs-sync", daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[T]) -> T:
        async def wrapper() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call `fn` on the loop thread; await its result there if it is awaitable."""

        async def wrapper() -> Any:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            return value

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result()

    def iterate(self, make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
        iterator = self.call(make)
        while True:
            try:
                yield self.run(iterator.__anext__())
            except StopAsyncIteration:
                return

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class _Facade:
    """Forwards attribute access to an async object living on the loop thread."""

    def __init__(self, runner: _LoopThread, target: Any) -> None:
        self._runner = runner
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr
        if inspect.isasyncgenfunction(attr):
            return lambda *a, **k: self._runner.iterate(lambda: attr(*a, **k))
        return lambda *a, **k: self._runner.call(attr, *a, **k)


class _ScopedFacade(_Facade):
    """A facade over an async context manager: `with` runs its `__aenter__` and
    `__aexit__` on the loop (a closed file refuses a new `with`, as io's do)."""

    def __enter__(self) -> Self:
        self._runner.call(self._target.__aenter__)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._runner.call(self._target.__aexit__, exc_type, exc, tb)


class SyncTransaction(_ScopedFacade):
    """A Transaction used synchronously: `with client.transaction() as t:`."""


class SyncFile(_ScopedFacade):
    """A FileReader or FileWriter used synchronously: `with fs.open(path, "wb") as f:`."""


class SyncClient(_Facade):
    """A Client used synchronously; methods are the Client's, without `await`."""

    def __init__(
        self,
        address: str | None = None,
        *,
        connect_timeout: float = 10.0,
        token: str | None = None,
        token_file: Path | None = None,
    ) -> None:
        runner = _LoopThread()
        client = Client(
            namenode_address(address),
            connect_timeout=connect_timeout,
            token=token,
            token_file=token_file,
        )
        super().__init__(runner, client)
        try:
            runner.call(client.connection)
        except BaseException:
            runner.stop()
            raise

    def transaction(self, *, lock_wait: float = 0.0) -> SyncTransaction:
        """A transaction that commits when the `with` block ends without error."""
        txn: Transaction = self._runner.call(self._target.begin, lock_wait=lock_wait)
        return SyncTransaction(self._runner, txn)

    def open(self, path: str, mode: str = "rb", **options: Any) -> SyncFile:
        """A file object (see Client.open) whose methods need no `await`."""
        return SyncFile(self._runner, self._runner.call(self._target.open, path, mode, **options))

    def begin(self, *, lock_wait: float = 0.0) -> SyncTransaction:
        """A transaction to end with commit() or abort()."""
        return self.transaction(lock_wait=lock_wait)

    def close(self) -> None:
        """Close the connection and stop the loop thread."""
        try:
            self._runner.call(self._target.close)
        finally:
            self._runner.stop()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def connect_sync(address: str | None = None, *, connect_timeout: float = 10.0) -> SyncClient:
    """A connected SyncClient."""
    return SyncClient(address, connect_timeout=connect_timeout)
