"""pjdfstest on the mount: the POSIX suite file systems are judged by, run as root on a
mount of a throw-away local cluster that acts for the host's users (`-o callers`).

    python -m loadtests.pjdfstest_run --suite DIR [--only chmod,chown] [--update README.md]
        [--commit SHA]

pjdfstest is no package: build it outside the project from its repository
(github.com/pjd/pjdfstest: `autoreconf -ifs && ./configure && make pjdfstest`, with
autoconf and automake from apt-get) and give its directory with --suite. Every test
file of each directory under tests/ runs with its TAP output counted: a subtest passes
when it says "ok"; the ones a file planned and never reached (it died) count as failed.
Prints a table of every directory with passed/total, the failures by file and
subtest, and the suite's commit; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loadtests.harness import update_benchmarks_md
from loadtests.mount_bench import CALLERS, mounted_cluster

FILE_TIMEOUT = 600  # s one test file may take
SCALE = 0.1  # of the mount benchmark's cluster: its smallest volumes
_PLAN = re.compile(r"^1\.\.(\d+)")
_RESULT = re.compile(r"^(not ok|ok) (\d+)(.*# TODO)?")


def run_file(test: Path, cwd: Path) -> tuple[int, int, list[int]]:
    """(passed, planned, failed subtest numbers) of one pjdfstest file run in `cwd`. As
    prove counts them, a subtest the suite marks TODO (a known difference of Linux from
    its reading of POSIX) passes whatever it says."""
    # Its own session: a file that hangs (a blocking open of a FIFO) is ended with
    # every process it started, or they would keep the mount busy and its unmount
    # would fail.
    test_run = subprocess.Popen(
        ["/bin/sh", str(test)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        out, _ = test_run.communicate(timeout=FILE_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(test_run.pid, signal.SIGKILL)
        out, _ = test_run.communicate()
    planned, passed, seen, failed = 0, 0, set(), []
    for line in out.splitlines():
        plan = _PLAN.match(line)
        if plan:
            planned = int(plan[1])
            continue
        result = _RESULT.match(line)
        if result:
            number = int(result[2])
            seen.add(number)
            if result[1] == "ok" or result[3]:
                passed += 1
            else:
                failed.append(number)
                print(f"{test.parent.name}/{test.name}: {line}", file=sys.stderr)  # its reason
    failed += [n for n in range(1, planned + 1) if n not in seen]
    return passed, max(planned, passed + len(failed)), sorted(failed)


def run_suite(suite: Path, where: Path, only: list[str] | None) -> dict[str, Any]:
    """Every directory of the suite's tests (or `only` those), run in `where`."""
    results: dict[str, Any] = {}
    for directory in sorted(p for p in (suite / "tests").iterdir() if p.is_dir()):
        if only and directory.name not in only:
            continue
        passed = total = 0
        failures: dict[str, list[int]] = {}
        for test in sorted(directory.glob("*.t")):
            scratch = where / f"{directory.name}-{test.stem}"
            scratch.mkdir()
            ok, planned, failed = run_file(test, scratch)
            passed, total = passed + ok, total + planned
            if failed:
                failures[test.name] = failed
        results[directory.name] = {"passed": passed, "total": total, "failures": failures}
        print(f"{directory.name}: {passed}/{total}", file=sys.stderr, flush=True)
    return results


@contextmanager
def _callers_mount() -> Iterator[Path]:
    """A throw-away cluster mounted with -o callers, as root; the mount point."""
    with mounted_cluster(SCALE) as mount, mount(CALLERS) as (mountpoint, _):
        yield mountpoint


def markdown(f: dict[str, Any], command: str) -> str:
    """The README section: passed/total by directory, and every failure."""
    lines = [
        "### POSIX: pjdfstest on the mount (`loadtests/pjdfstest_run.py`)",
        "",
        f"Command: `{command}` — pjdfstest at commit {f['commit']}, run as root on a mount",
        "with `-o callers` of a throw-away local cluster; subtests the suite marks TODO count",
        "as passed, as prove counts them.",
        "",
        "| directory | passed | total | % |",
        "|---|---:|---:|---:|",
    ]
    passed = total = 0
    for name, r in f["results"].items():
        passed, total = passed + r["passed"], total + r["total"]
        share = 100 * r["passed"] / r["total"] if r["total"] else 100.0
        lines.append(f"| {name} | {r['passed']} | {r['total']} | {share:.1f} |")
    share = 100 * passed / total if total else 100.0
    lines.append(f"| all | {passed} | {total} | {share:.1f} |")
    failing = [
        f"- {name}/{test}: subtests {', '.join(map(str, numbers))}"
        for name, r in f["results"].items()
        for test, numbers in r["failures"].items()
    ]
    if failing:
        lines += ["", "Failing subtests:", "", *failing]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, required=True, help="a built pjdfstest checkout")
    parser.add_argument("--only", help="these test directories, comma-separated")
    parser.add_argument("--update", type=Path, help="rewrite this file's pjdfstest section")
    parser.add_argument("--commit", help="the suite's commit, if DIR is not a git checkout")
    args = parser.parse_args(argv)
    suite = args.suite.resolve()
    if not (suite / "pjdfstest").is_file():
        parser.error(f"{suite}/pjdfstest is missing: build the suite first (see --help)")
    if os.geteuid() != 0:
        parser.error("pjdfstest runs as root (it switches to other users itself)")
    if shutil.which("prove") is None and shutil.which("perl") is None:
        parser.error("pjdfstest's tests need perl")
    commit = (
        args.commit
        or subprocess.run(
            ["git", "-C", str(suite), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    only = args.only.split(",") if args.only else None
    started = time.monotonic()
    with _callers_mount() as mountpoint:
        work = Path(tempfile.mkdtemp(prefix="pjdfstest-", dir=mountpoint))
        work.chmod(0o777)
        results = run_suite(suite, work, only)
    figures = {"commit": commit or "?", "results": results, "seconds": time.monotonic() - started}
    command = "python -m loadtests.pjdfstest_run --suite DIR"
    print(markdown(figures, command))
    if args.update:
        update_benchmarks_md(args.update, "pjdfstest", markdown(figures, command))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
