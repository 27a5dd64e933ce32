"""Benchmarks' smoke runs: `python -m loadtests.NAME ARGS --update FILE` in the
project's root, its section written into a scratch BENCHMARKS.md, and the figures its
last line prints as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class BenchmarkRun:
    """What one benchmark run printed and wrote."""

    done: subprocess.CompletedProcess[str]
    benchmarks: Path  # the scratch BENCHMARKS.md it updated

    @property
    def figures(self) -> Any:
        """The JSON of its last line of output."""
        return json.loads(self.done.stdout.strip().splitlines()[-1])

    @property
    def section(self) -> str:
        """The BENCHMARKS.md it wrote its section into."""
        return self.benchmarks.read_text()


def run_benchmark(
    module: str,
    tmp_path: Path,
    *args: str,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> BenchmarkRun:
    """Run benchmark `module` (of loadtests/) with `args`; it must succeed."""
    benchmarks = tmp_path / "BENCHMARKS.md"
    benchmarks.write_text("# Benchmarks\n")
    done = subprocess.run(
        [sys.executable, "-m", f"loadtests.{module}", *args, "--update", str(benchmarks)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return BenchmarkRun(done, benchmarks)
