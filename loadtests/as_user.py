"""Run a benchmark's workload as another local user: what a mount acting for its
host's users (`pfs mount -o callers`) is measured with (setpriv, as root)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = "/usr/bin/python3"


def setpriv(uid: int) -> list[str]:
    """The command prefix that runs a program as local user `uid` (gid the same number,
    no supplementary groups)."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def run_as(uid: int, module: str, function: str, *args: object) -> float:
    """`module.function(*args)` (a figure) run as user `uid` by the system's Python
    (the benchmark's own may sit where that user may not go: the module must need the
    standard library only); the arguments are given as their repr."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        f"from pathlib import PosixPath\n"
        f"from {module} import {function}\n"
        f"print({function}({', '.join(map(repr, args))}))\n"
    )
    done = subprocess.run(
        [*setpriv(uid), SYSTEM_PYTHON, "-c", code], capture_output=True, text=True, cwd="/"
    )
    if done.returncode != 0:
        raise RuntimeError(f"{function} as uid {uid} failed: {done.stderr.strip()[-500:]}")
    return float(done.stdout.strip().splitlines()[-1])
