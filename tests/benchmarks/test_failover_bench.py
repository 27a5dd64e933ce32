"""The failover benchmark keeps working: `python -m loadtests.failover_bench` with one
trial of each fault on hosts of its own breaks the active namenode's host twice and
PostgreSQL's primary's twice, loses no acknowledged create, and writes its
BENCHMARKS.md section."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.benchmark_smoke, pytest.mark.hosts]

ROOT = Path(__file__).resolve().parents[2]


def test_failover_bench_measures_both_faults_and_reports_them(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.failover_bench", "--trials", "1", "--clients", "2",
         "--readers", "2", "--files", "1000", "--after", "6", "--postgres-trials", "1",
         "--update", str(benchmarks)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr  # non-zero when an acknowledged create is lost
    text = benchmarks.read_text()
    for fault in ("kill -9", "cut off", "postgres kill -9", "postgres cut off"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {fault} |"))
        assert row.split("|")[6].strip() == "0", row  # lost
