"""The mount benchmark keeps working: `python -m loadtests.mount_bench` on a small scale
runs every workload on a real mount and on local disk, writes its BENCHMARKS.md section
and ends with one JSON line that holds every figure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from loadtests.mount_bench import CPU_KEY, CPU_ROWS, ROWS, WRITEBACK

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parents[2]


def test_mount_bench_measures_every_workload_and_reports_it(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    # Its cluster (and so its mount point) goes in a directory of this test's own, so
    # that the check below finds this run's mount only, whatever else runs here; a
    # short one, since a datanode's Unix socket path may not pass 107 bytes.
    own = Path(tempfile.mkdtemp(prefix="pfs-mb-"))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "loadtests.mount_bench", "--scale", "0.01", "--seconds", "1",
             "--update", str(benchmarks)],
            cwd=ROOT,
            env={**os.environ, "TMPDIR": str(own)},
            capture_output=True,
            text=True,
            timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    finally:
        left_mounted = [
            line.split()[1]
            for line in Path("/proc/self/mounts").read_text().splitlines()
            if str(own) in line
        ]
        for mountpoint in left_mounted:
            subprocess.run(["fusermount3", "-u", mountpoint], check=False)
        shutil.rmtree(own, ignore_errors=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for side in ("local", "mount"):
        for row in ROWS:
            if row.unit:
                assert figures[side][row.name] > 0, (side, row.name)
        assert figures[side]["rm -rf: entries left"] == 0
        assert figures[side]["3 writers + 10 readers: errors"] == 0
    cached = figures[WRITEBACK]  # the data rows, on a mount whose kernel caches writes
    assert {"dd write 1 KiB", "dd read 64 KiB, cold", "1 MiB files, 8 readers"} <= set(cached)
    assert all(value > 0 for key, value in cached.items() if key != CPU_KEY)
    # The CPU of every process of the cluster, per 1 MiB file, for every data workload.
    for side in ("mount", WRITEBACK):
        for row in CPU_ROWS:
            used = figures[side][CPU_KEY][row]
            assert {"mount", "namenode", "datanodes", "PostgreSQL", "programs"} <= set(used)
            assert used["mount"] > 0 and used["programs"] > 0, (side, row)
    assert "| tree build | s |" in benchmarks.read_text()
    assert f"mount -o {WRITEBACK}" in benchmarks.read_text()
    assert not left_mounted
