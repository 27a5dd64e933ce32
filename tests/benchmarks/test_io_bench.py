"""The data-path benchmark keeps working: `python -m loadtests.io_bench` on a small file
runs every measurement against a real cluster, writes its BENCHMARKS.md section and ends
with one JSON line that holds every figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_io_bench_measures_everything_and_reports_it(tmp_path: Path) -> None:
    run = run_benchmark("io_bench", tmp_path, "--size", "24M")
    figures = run.figures
    for name in ("put_rep1", "put_rep2", "get", "cat", "cat_local", "grpc_stream", "plain_cat"):
        assert figures[f"{name}_mb_s"] > 0, name
    cpu = figures["cpu_s_per_gib"]
    for name in ("put_rep1", "put_rep2", "get", "cat", "cat_local", "grpc_stream"):
        assert cpu[name] > 0, name
    assert cpu["grpc_stream_default_malloc"] > 0  # the stream without pfs's malloc settings
    assert figures["fresh_memory_cpu_s_per_gib"] > 0
    # Random reads go to datanodes only once the block list is known.
    assert figures["random_1_reader"]["namenode_requests"] == 0
    assert figures["random_4_readers"]["namenode_requests"] == 0
    # Each command's own peak (not its parent's): small, whatever the file size.
    for name in ("put_client", "get_client", "cat_client", "cat_local"):
        assert 10 < figures[f"{name}_peak_mib"] < 400, name
    section = run.section
    assert "## Data path" in section and "CPU s/GiB" in section
