"""The fsspec benchmark keeps working: `python -m loadtests.fsspec_bench` on a small
file and directory measures every row on pfs:// and on local disk, reads its ranges
with one block list, writes its BENCHMARKS.md section and ends with one JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parents[2]


def test_fsspec_bench_measures_every_row_and_reports_it(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.fsspec_bench", "--size", "4M", "--ranges", "50",
         "--entries", "300", "--update", str(benchmarks)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for side in ("local", "pfs"):
        for row in ("parquet write", "parquet read (pandas)", "parquet scan (pyarrow dataset)"):
            assert figures[side][row] > 0, (side, row)
    assert figures["pfs"]["cat_ranges namenode requests"].get("blocks") == 1
    assert figures["pfs"]["listing seconds"] > 0
    assert "| parquet write, MB/s |" in benchmarks.read_text()
