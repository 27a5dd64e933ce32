"""The fair-use benchmark keeps working: `python -m loadtests.fair_bench` briefly
measures every row (a victim user alone and beside each flood of another user, in
processes of their own), writes its BENCHMARKS.md section and ends with one JSON line
that holds every figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_fair_bench_measures_every_row_and_reports_it(tmp_path: Path) -> None:
    run = run_benchmark("fair_bench", tmp_path, "--seconds", "0.5", "--rounds", "1")
    figures = run.figures
    for mode in ("fair", "turns"):
        for depth in (1, 8):
            assert figures[f"{mode}_victim_alone_{depth}"] > 0
            for shape in ("lookups", "creates"):
                assert figures[f"{mode}_victim_{shape}_{depth}"] > 0  # served during the flood
                assert figures[f"{mode}_flood_{shape}_{depth}"] > 0  # held back, not refused
    assert "| 1 | lookups |" in run.section
