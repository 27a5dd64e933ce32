"""How fast `pfs` starts: `pfs --help` and `pfs ls /` next to `python -c pass`, measured
in the same run (medians of N runs each, interleaved so that a noisy moment hits every
command alike).

    python -m loadtests.startup_bench [--runs 20] [--update BENCHMARKS.md]

Targets: `pfs --help` at most 3x `python -c pass`, `pfs ls /` at most 6x. `pfs ls /`
runs against a throw-away namenode (embedded PostgreSQL, no datanodes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from loadtests.harness import bench_cluster, update_benchmarks_md

TARGETS = {"pfs --help": 3.0, "pfs ls /": 6.0}


def _seconds(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"startup_bench: {' '.join(command)} failed: {done.stderr.decode()}")
    return elapsed


def measure(namenode: str, runs: int) -> dict[str, float]:
    """Median seconds of each command over `runs` interleaved rounds."""
    env = dict(os.environ, PFS_CLIENT_NAMENODE=namenode)
    pfs = [sys.executable, "-m", "plasmafs.cli"]
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "pfs --help": [*pfs, "--help"],
        "pfs ls /": [*pfs, "ls", "/"],
    }
    for command in commands.values():  # warm the page cache and .pyc files
        _seconds(command, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            times[name].append(_seconds(command, env))
    return {name: statistics.median(values) for name, values in times.items()}


def report(medians: dict[str, float], runs: int) -> str:
    """The BENCHMARKS.md section for these figures."""
    base = medians["python -c pass"]
    lines = [
        "## CLI start-up (`loadtests/startup_bench.py`)",
        "",
        f"Command: `python -m loadtests.startup_bench --runs {runs}` — medians of {runs} "
        "interleaved runs; `pfs` runs as `python -m plasmafs.cli`, `ls /` against a "
        "local namenode.",
        "",
        "| command | median | vs `python -c pass` | target |",
        "|---|---:|---:|---:|",
    ]
    for name, seconds in medians.items():
        target = TARGETS.get(name)
        lines.append(
            f"| `{name}` | {seconds * 1000:.0f} ms | {seconds / base:.2f}x | "
            f"{f'<= {target:g}x' if target else ''} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and optionally update BENCHMARKS.md."""
    parser = argparse.ArgumentParser(prog="python -m loadtests.startup_bench")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    with bench_cluster() as cluster:
        medians = measure(cluster.namenode_address, args.runs)
    text = report(medians, args.runs)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "startup_bench", text)
    base = medians["python -c pass"]
    missed = [name for name, target in TARGETS.items() if medians[name] / base > target]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
