"""The datanode's Prometheus metrics, served over HTTP when `metrics_listen` is set:
scrub progress, copy tasks and their bytes, and the bytes the gRPC service read and
wrote, next to the process' own CPU and memory.

The values are plain counters the event loop keeps on the servicer, the copier and the
scrubber. prometheus_client serves scrapes on its own threads, so a scrape asks the
loop for a snapshot of them and waits for it rather than reading them itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from plasmafs.datanode.copier import Copier
from plasmafs.datanode.heartbeat import Heartbeats
from plasmafs.datanode.scrubber import Scrubber
from plasmafs.datanode.service import DatanodeServicer

SNAPSHOT_TIMEOUT = 10.0  # seconds a scrape waits for the event loop
Values = dict[str, tuple[str, float]]  # name -> (help, value); names ending _total count


def values(
    servicer: DatanodeServicer, copier: Copier, scrubber: Scrubber, heartbeats: Heartbeats
) -> Values:
    """Every exported value, read on the event loop."""
    return {
        "pfs_datanode_read_bytes_total": ("Bytes served by ReadBlocks", servicer.bytes_read),
        "pfs_datanode_written_bytes_total": (
            "Bytes made durable by WriteBlocks",
            servicer.bytes_written,
        ),
        "pfs_datanode_copies_started_total": ("Copy tasks started", copier.started),
        "pfs_datanode_copies_succeeded_total": ("Copy tasks that ended OK", copier.succeeded),
        "pfs_datanode_copies_failed_total": ("Copy tasks that ended with an error", copier.failed),
        "pfs_datanode_copies_cancelled_total": (
            "Copy tasks the namenode cancelled",
            copier.cancelled,
        ),
        "pfs_datanode_copy_bytes_total": ("Bytes written into the volume by copies", copier.bytes),
        "pfs_datanode_copies_running": ("Copy tasks running now", copier.running),
        "pfs_datanode_copies_queued": ("Copy tasks waiting for a stream", copier.queued),
        "pfs_datanode_scrub_passes_total": ("Scrub passes completed", scrubber.passes),
        "pfs_datanode_scrub_pass_blocks": ("Used blocks in this scrub pass", scrubber.pass_blocks),
        "pfs_datanode_scrub_pass_verified_blocks": (
            "Blocks of this scrub pass verified so far",
            scrubber.pass_verified,
        ),
        "pfs_datanode_scrub_bytes_total": ("Bytes the scrub read", scrubber.bandwidth.taken),
        "pfs_datanode_corrupt_blocks_total": (
            "Blocks found failing their checksum (scrub and verifications)",
            scrubber.corrupt_blocks,
        ),
        "pfs_datanode_heartbeats_total": ("Heartbeats the namenode answered", heartbeats.sent),
        "pfs_datanode_heartbeat_failures": (
            "Heartbeats in a row that got no answer",
            heartbeats.failed,
        ),
    }


class DatanodeMetrics:
    """A registry exporting `read()` (run on the event loop) and the process' figures."""

    def __init__(self, read: Callable[[], Values]) -> None:
        self.registry = CollectorRegistry()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        ProcessCollector(registry=self.registry)
        self.registry.register(_Values(lambda: self._on_loop(read)))

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

    def _on_loop(self, read: Callable[[], Values]) -> Values:
        loop = self._loop
        if loop is None or not loop.is_running():
            return read()
        result: concurrent.futures.Future[Values] = concurrent.futures.Future()

        def run() -> None:
            try:
                result.set_result(read())
            except BaseException as exc:
                result.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return result.result(timeout=SNAPSHOT_TIMEOUT)


class _Values(Collector):
    def __init__(self, read: Callable[[], Values]) -> None:
        self._read = read

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, (text, value) in self._read().items():
            if name.endswith("_total"):
                yield CounterMetricFamily(name.removesuffix("_total"), text, value=value)
            else:
                yield GaugeMetricFamily(name, text, value=value)
