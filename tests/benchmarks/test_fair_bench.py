"""The fair-use benchmark keeps working: `python -m loadtests.fair_bench` briefly
measures every row (a victim user alone and beside each flood of another user, in
processes of their own), writes its BENCHMARKS.md section and ends with one JSON line
that holds every figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parents[2]


def test_fair_bench_measures_every_row_and_reports_it(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.fair_bench", "--seconds", "0.5", "--rounds", "1",
         "--update", str(benchmarks)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for mode in ("fair", "turns"):
        for depth in (1, 8):
            assert figures[f"{mode}_victim_alone_{depth}"] > 0
            for shape in ("lookups", "creates"):
                assert figures[f"{mode}_victim_{shape}_{depth}"] > 0  # served during the flood
                assert figures[f"{mode}_flood_{shape}_{depth}"] > 0  # held back, not refused
    assert "| 1 | lookups |" in benchmarks.read_text()
