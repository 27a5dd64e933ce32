"""The namespace growth benchmark keeps working: `python -m loadtests.scale_bench` on a
small scale grows the namespace by bulk loading, measures every row at each size,
writes its BENCHMARKS.md section and ends with one JSON line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale


def test_scale_bench_grows_measures_and_reports(tmp_path: Path) -> None:
    run = run_benchmark(
        "scale_bench", tmp_path, "--sizes", "0,30000", "--big", "20000", "--seconds", "0.5",
        "--warm", "1",
    )  # fmt: skip
    steps = run.figures
    assert steps[0]["entries"] == 0 and steps[1]["entries"] >= 29_000
    for name in ("lookup_64_per_s", "hot_lookup_64_per_s", "create_64_per_s", "fsck_s",
                 "cold_start_s", "rss_mib", "postgres_mib", "cache_mib"):  # fmt: skip
        assert all(s[name] > 0 for s in steps), name
    assert steps[1]["ls_whole_s"] > 0 and "ls_whole_s" not in steps[0]
    assert "ls of the 20,000-entry directory" in run.section
