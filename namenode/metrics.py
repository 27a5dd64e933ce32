"""The namenode's Prometheus metrics, served over HTTP when `metrics_listen` is set.

Requests by operation with their latency, commits and group-commit sizes, cache hits
and misses, open sessions and transactions, datanodes and space: what a load test
report needs next to its client-side figures, and what operators alert on.

Request counts and latencies are kept in plain per-operation lists on the event loop
(no locks: everything that updates them runs on the loop thread) and turned into
Prometheus families only when scraped; prometheus_client's own Histogram takes a lock
per observation, which cost lookups per second at 64 in flight. prometheus_client
serves scrapes on its own threads, so a scrape never reads namenode state itself: it
asks the loop for a snapshot and waits for it (core/runtime/metrics.py).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from plasmafs.core.runtime.metrics import LoopMetrics, Values

LATENCY_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5,
)  # fmt: skip
GROUP_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class NamenodeMetrics(LoopMetrics):
    """Counters updated on the request and commit paths, and gauges read on scrape."""

    def __init__(self) -> None:
        super().__init__()
        # op -> [count per latency bucket (+Inf last)..., sum of seconds]
        self._ops: dict[str, list[float]] = {}
        self.registry.register(_Requests(lambda: self.on_loop(self._copy_ops)))
        self._errors = Counter(
            "pfs_namenode_request_errors",
            "Requests answered with an error, by operation and code",
            ["op", "code"],
            registry=self.registry,
        )
        self.group_size = Histogram(
            "pfs_namenode_commit_group_size",
            "Transactions written per PostgreSQL call",
            buckets=GROUP_BUCKETS,
            registry=self.registry,
        )

    def observe(self, op: str, seconds: float) -> None:
        """Count one request of `op` that took `seconds`."""
        stats = self._ops.get(op)
        if stats is None:
            stats = self._ops[op] = [0.0] * (len(LATENCY_BUCKETS) + 2)
        stats[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        stats[-1] += seconds

    def _copy_ops(self) -> dict[str, list[float]]:
        return {op: list(stats) for op, stats in self._ops.items()}

    def error(self, op: str, code: int) -> None:
        """Count one request of `op` answered with error `code`."""
        self._errors.labels(op, str(code)).inc()

    def add_gauges(self, read: Callable[[], Values]) -> None:
        """Export the values `read()` returns on each scrape: name -> (help, value)."""
        self.add_values(read)

    def add_labeled_counter(
        self, name: str, help: str, label: str, read: Callable[[], dict[str, float]]
    ) -> None:
        """Export counter `name`, one value per `label` value, as `read()` (run on the
        event loop) returns them on each scrape."""
        self.registry.register(_Labeled(name, help, label, lambda: self.on_loop(read)))


class _Requests(Collector):
    def __init__(self, snapshot: Callable[[], dict[str, list[float]]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "pfs_namenode_requests", "Requests served, by operation", labels=["op"]
        )
        latency = HistogramMetricFamily(
            "pfs_namenode_request_seconds",
            "Request latency inside the namenode",
            labels=["op"],
        )
        for op, stats in self._snapshot().items():
            counts = stats[:-1]
            total = sum(counts)
            requests.add_metric([op], total)
            cumulative = 0.0
            buckets = []
            for bound, n in zip([*LATENCY_BUCKETS, float("inf")], counts, strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            latency.add_metric([op], buckets, stats[-1])
        yield requests
        yield latency


class _Labeled(Collector):
    def __init__(
        self, name: str, help: str, label: str, snapshot: Callable[[], dict[str, float]]
    ) -> None:
        self._name, self._help, self._label, self._snapshot = name, help, label, snapshot

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._help, labels=[self._label])
        for value, total in sorted(self._snapshot().items()):
            family.add_metric([value], total)
        yield family
