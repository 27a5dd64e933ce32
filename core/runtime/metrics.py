"""What the daemons' Prometheus metrics share: a registry with the process' own CPU and
memory, values read on the daemon's event loop, and the /metrics HTTP server.

prometheus_client serves scrapes on its own threads, so a scrape never reads daemon
state itself: it asks the event loop for a snapshot and waits for it. Needs the
`server` extra (prometheus-client); applications never need it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

SNAPSHOT_TIMEOUT = 10.0  # seconds a scrape waits for the event loop
Values = dict[str, tuple[str, float]]  # name -> (help, value); names ending _total count
T = TypeVar("T")


class LoopMetrics:
    """A registry whose values are read on the event loop `serve` was called on."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        # process_cpu_seconds_total and memory: load tests divide CPU by work done.
        ProcessCollector(registry=self.registry)

    def add_values(self, read: Callable[[], Values]) -> None:
        """Export the values `read()` returns on each scrape (read on the event loop)."""
        self.registry.register(_Values(lambda: self.on_loop(read)))

    def on_loop(self, read: Callable[[], T]) -> T:
        """`read()` run on the daemon's event loop (from a scrape thread: wait for it)."""
        loop = self._loop
        if loop is None or not loop.is_running() or _running_loop() is loop:
            return read()
        result: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                result.set_result(read())
            except BaseException as exc:
                result.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return result.result(timeout=SNAPSHOT_TIMEOUT)

    def serve(self, listen: str) -> int:
        """Serve /metrics on host:port (port 0 picks one); returns the port. Called on the
        event loop whose state the metrics read."""
        self._loop = asyncio.get_running_loop()
        host, _, port = listen.rpartition(":")
        self._server, _ = start_http_server(int(port), host, registry=self.registry)
        return int(self._server.server_port)

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Values(Collector):
    def __init__(self, read: Callable[[], Values]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, (text, value) in self._read().items():
            if name.endswith("_total"):
                yield CounterMetricFamily(name.removesuffix("_total"), text, value=value)
            else:
                yield GaugeMetricFamily(name, text, value=value)
