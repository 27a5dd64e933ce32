"""The snapshot benchmark keeps working: `python -m loadtests.snapshot_bench` on a small
bulk-inserted tree takes and deletes snapshots, measures other users meanwhile, writes
its BENCHMARKS.md section and ends with one JSON line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_snapshot_bench_takes_deletes_and_reports(tmp_path: Path) -> None:
    run = run_benchmark("snapshot_bench", tmp_path, "--entries", "5000")
    figures = run.figures
    assert figures["entries"] >= 4000 and figures["extents"] > 0
    for name in ("row_copy_s", "create_s", "delete_s", "lookups_during", "creates_during"):
        assert figures[name] > 0, name
    assert "| snapshot create, s |" in run.section
