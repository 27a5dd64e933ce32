"""The namespace dump benchmark keeps working: `python -m loadtests.dump_bench` on a
small namespace dumps, loads into a new cluster, checks the tree and the files are
identical, writes its BENCHMARKS.md section and ends with one JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parents[2]


def test_dump_bench_round_trips_and_reports(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.dump_bench", "--entries", "5000",
         "--update", str(benchmarks)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["entries"] == 5000 + 22  # /data, its 20 files and /.Trash besides the bulk
    for name in ("dump_entries_per_s", "load_entries_per_s", "pg_dump_s", "pg_restore_s"):
        assert figures[name] > 0, name
    assert "`pfs admin load`" in benchmarks.read_text()
