"""The transport benchmark keeps working: `python -m loadtests.rpc_bench` with few
calls measures both transports and writes its BENCHMARKS.md section."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.rpc_bench import OPS, TRANSPORTS
from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_rpc_bench_measures_both_transports(tmp_path: Path) -> None:
    run = run_benchmark("rpc_bench", tmp_path, "--calls", "50", "--rounds", "1")
    for transport in TRANSPORTS:
        for op in OPS:
            per_request, client_cpu, namenode_cpu = run.figures[transport][op]
            assert per_request > 0 and client_cpu > 0 and namenode_cpu >= 0
    assert "| getattr | µs per request |" in run.section
