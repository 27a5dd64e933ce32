"""The FUSE ceiling benchmark keeps working: `python -m loadtests.fuse_ceiling` on a
small scale mounts both in-memory file systems (pyfuse3 and mfusepy), runs every row on
them and on a local directory, unmounts them, and writes its BENCHMARKS.md section."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parents[2]
ROWS = ("dd write 1 KiB", "dd write 64 KiB", "empty files/s, 1 process", "tree build, s",
        "ls -lR, s", "du -sh, s", "rm -rf, s")  # fmt: skip


def _mounted_ceilings() -> list[str]:
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    return [line for line in mounts if line.startswith("ceiling ") or "MemoryPaths" in line]


def test_fuse_ceiling_measures_both_bindings_and_unmounts_them(tmp_path: Path) -> None:
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    before = _mounted_ceilings()
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.fuse_ceiling", "--files", "60", "--dirs", "6",
         "--tree-files", "60", "--dd-mb", "2", "--update", str(benchmarks)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    section = benchmarks.read_text()
    for row in ROWS:
        line = next(x for x in section.splitlines() if x.startswith(f"| {row}"))
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        numbers = [float(cell.replace(",", "")) for cell in cells[1:]]  # 3 figures, a ratio
        assert len(numbers) == 4 and all(n > 0 for n in numbers), line
    assert re.search(r"Requests pyfuse3 answered: .*\bcreate \d+", section)
    assert _mounted_ceilings() == before
