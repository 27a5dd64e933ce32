"""The namenode's Prometheus metrics reflect what it served."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from loadtests.harness import scrape as scrape_metrics
from plasmafs.client import Client, ExistsError
from plasmafs.local.postgres import free_port
from tests.support.cluster import NamenodeProcess


def _scrape(port: int) -> dict[str, float]:
    """The metrics served on this host's `port`, as the benchmarks read them."""
    return scrape_metrics(f"127.0.0.1:{port}")


async def test_metrics_count_requests_commits_and_cache(dsn: str, tmp_path: Path) -> None:
    port = free_port()
    namenode = NamenodeProcess(
        dsn, tmp_path, env={"PFS_NAMENODE_METRICS_LISTEN": f"127.0.0.1:{port}"}
    ).start()
    fs = Client(namenode.address)
    try:
        await fs.mkdir("/d")
        await asyncio.gather(*(fs.create(f"/d/f{i}") for i in range(10)))
        with pytest.raises(ExistsError):
            await fs.create("/d/f0")
        for _ in range(5):
            await fs.stat("/d/f1")
        m = _scrape(port)
        assert m['pfs_namenode_requests_total{op="create"}'] == 11
        assert m['pfs_namenode_requests_total{op="lookup"}'] == 5
        assert m['pfs_namenode_request_seconds_count{op="lookup"}'] == 5
        assert m['pfs_namenode_request_errors_total{code="2",op="create"}'] == 1
        assert m["pfs_namenode_commits_total"] == 11  # mkdir + 10 creates (the failed one
        # committed nothing)
        assert m["pfs_namenode_commit_groups_total"] <= 11
        assert m["pfs_namenode_commit_group_size_count"] == m["pfs_namenode_commit_groups_total"]
        assert m["pfs_namenode_cache_entry_hits_total"] >= 5
        assert m["pfs_namenode_sessions"] == 1
        assert m["pfs_namenode_files"] == 10
        assert m["process_cpu_seconds_total"] > 0  # the namenode's own CPU, for load tests
        assert m["process_resident_memory_bytes"] > 0
    finally:
        await fs.close()
        namenode.stop()


async def test_a_scrape_reads_namenode_state_on_the_event_loop() -> None:
    from plasmafs.namenode.metrics import NamenodeMetrics

    metrics = NamenodeMetrics()
    read_on: list[int] = []

    def read() -> dict[str, tuple[str, float]]:
        read_on.append(threading.get_ident())
        return {"pfs_test_value": ("A value", 42.0)}

    metrics.add_gauges(read)
    metrics.observe("lookup", 0.001)
    port = metrics.serve("127.0.0.1:0")
    values = await asyncio.get_running_loop().run_in_executor(None, _scrape, port)
    assert values["pfs_test_value"] == 42.0
    assert values['pfs_namenode_requests_total{op="lookup"}'] == 1.0
    assert read_on == [threading.get_ident()]  # the loop's thread, not the HTTP server's
