"""The usage and quota benchmark keeps working: `python -m loadtests.usage_bench` on a
small tree and namespace measures every row, writes its BENCHMARKS.md section and ends
with one JSON line that holds every figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parents[2]


def test_usage_bench_measures_every_row_and_reports_it(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.usage_bench", "--seconds", "0.3", "--rounds", "1",
         "--entries", "20000", "--tree-scale", "0.02", "--update", str(benchmarks)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["create_plain_per_s"] > 0 and figures["create_quota_per_s"] > 0
    assert figures["root_entries"] > 20000  # /big and the tree
    assert 0 < figures["usage_count_s"] <= figures["usage_ready_after_start_s"]
    assert "| summary of / (" in benchmarks.read_text()
