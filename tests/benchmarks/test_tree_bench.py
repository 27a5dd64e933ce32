"""The subtree benchmark keeps working: `python -m loadtests.tree_bench` on a small
tree times every row, agrees with itself on what the tree holds, writes its
BENCHMARKS.md section and ends with one JSON line that holds every figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_tree_bench_times_every_row_and_reports_it(tmp_path: Path) -> None:
    run = run_benchmark("tree_bench", tmp_path, "--scale", "0.02", "--runs", "1")
    figures = run.figures
    assert all(seconds > 0 for seconds in figures["seconds"].values())
    entries = figures["entries"]
    assert entries["summary"] == entries["walk"] == entries["by directory"] + 1  # the root
    assert entries["by directory"] == figures["dirs"] + figures["files"]  # below the root
    assert "| `pfs du -s` |" in run.section
