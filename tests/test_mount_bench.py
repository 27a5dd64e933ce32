"""The mount benchmark keeps working: `python -m loadtests.mount_bench` on a small scale
runs every workload on a real mount and on local disk, writes its BENCHMARKS.md section
and ends with one JSON line that holds every figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadtests.mount_bench import ROWS

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parent.parent


def test_mount_bench_measures_every_workload_and_reports_it(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.mount_bench", "--scale", "0.01", "--seconds", "1",
         "--update", str(benchmarks)],
        cwd=ROOT,
        # Its cluster (and so its mount point) goes under tmp_path: the check below
        # looks for this run's mount only, whatever else runs on the machine.
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for side in ("local", "mount"):
        for row in ROWS:
            if row.unit:
                assert figures[side][row.name] > 0, (side, row.name)
        assert figures[side]["rm -rf: entries left"] == 0
        assert figures[side]["3 writers + 10 readers: errors"] == 0
    assert "| tree build | s |" in benchmarks.read_text()
    assert not [
        line for line in Path("/proc/self/mounts").read_text().splitlines() if str(tmp_path) in line
    ]
