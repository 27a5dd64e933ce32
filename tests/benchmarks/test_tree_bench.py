"""The subtree benchmark keeps working: `python -m loadtests.tree_bench` on a small
tree times every row, agrees with itself on what the tree holds, writes its
BENCHMARKS.md section and ends with one JSON line that holds every figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parents[2]


def test_tree_bench_times_every_row_and_reports_it(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.tree_bench", "--scale", "0.02", "--runs", "1",
         "--update", str(benchmarks)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(seconds > 0 for seconds in figures["seconds"].values())
    entries = figures["entries"]
    assert entries["summary"] == entries["walk"] == entries["by directory"] + 1  # the root
    assert entries["by directory"] == figures["dirs"] + figures["files"]  # below the root
    assert "| `pfs du -s` |" in benchmarks.read_text()
