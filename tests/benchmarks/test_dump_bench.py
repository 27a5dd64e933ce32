"""The namespace dump benchmark keeps working: `python -m loadtests.dump_bench` on a
small namespace dumps, loads into a new cluster, checks the tree and the files are
identical, writes its BENCHMARKS.md section and ends with one JSON line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_dump_bench_round_trips_and_reports(tmp_path: Path) -> None:
    run = run_benchmark("dump_bench", tmp_path, "--entries", "5000")
    figures = run.figures
    assert figures["entries"] == 5000 + 22  # /data, its 20 files and /.Trash besides the bulk
    for name in ("dump_entries_per_s", "load_entries_per_s", "pg_dump_s", "pg_restore_s"):
        assert figures[name] > 0, name
    assert "`pfs admin load`" in run.section
