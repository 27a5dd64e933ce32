"""The usage and quota benchmark keeps working: `python -m loadtests.usage_bench` on a
small tree and namespace measures every row, writes its BENCHMARKS.md section and ends
with one JSON line that holds every figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_usage_bench_measures_every_row_and_reports_it(tmp_path: Path) -> None:
    run = run_benchmark(
        "usage_bench", tmp_path, "--seconds", "0.3", "--rounds", "1", "--entries", "20000",
        "--tree-scale", "0.02",
    )  # fmt: skip
    figures = run.figures
    assert figures["create_plain_per_s"] > 0 and figures["create_quota_per_s"] > 0
    assert figures["root_entries"] > 20000  # /big and the tree
    assert 0 < figures["usage_count_s"] <= figures["usage_ready_after_start_s"]
    assert "| summary of / (" in run.section
