"""The failover benchmark keeps working: `python -m loadtests.failover_bench` with one
trial of each fault on hosts of its own breaks the active namenode's host twice and
PostgreSQL's primary's twice, loses no acknowledged create, and writes its
BENCHMARKS.md section."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = [pytest.mark.benchmark_smoke, pytest.mark.hosts]


def test_failover_bench_measures_both_faults_and_reports_them(tmp_path: Path) -> None:
    # Fails (non-zero) when an acknowledged create is lost.
    run = run_benchmark(
        "failover_bench", tmp_path, "--trials", "1", "--clients", "2", "--readers", "2",
        "--files", "1000", "--after", "6", "--postgres-trials", "1",
    )  # fmt: skip
    text = run.section
    for fault in ("kill -9", "cut off", "postgres kill -9", "postgres cut off"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {fault} |"))
        assert row.split("|")[6].strip() == "0", row  # lost
