"""The fsspec benchmark keeps working: `python -m loadtests.fsspec_bench` on a small
file and directory measures every row on pfs:// and on local disk, reads its ranges
with one block list, writes its BENCHMARKS.md section and ends with one JSON line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_fsspec_bench_measures_every_row_and_reports_it(tmp_path: Path) -> None:
    run = run_benchmark(
        "fsspec_bench", tmp_path, "--size", "4M", "--ranges", "50", "--entries", "300"
    )
    assert "Traceback" not in run.done.stderr, run.done.stderr
    figures = run.figures
    for side in ("local", "pfs"):
        for row in ("parquet write", "parquet read (pandas)", "parquet scan (pyarrow dataset)"):
            assert figures[side][row] > 0, (side, row)
    assert figures["pfs"]["cat_ranges namenode requests"].get("blocks") == 1
    assert figures["pfs"]["listing seconds"] > 0
    assert "| parquet write, MB/s |" in run.section
