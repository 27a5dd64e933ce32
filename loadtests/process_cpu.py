"""CPU time of a benchmark's processes, by role, between two moments.

    meter = CpuMeter(roles)      # role -> what to count
    before = meter.read()
    ...                          # the workload
    used = meter.since(before)   # role -> CPU seconds

A role counts a list of pids, a PostgreSQL server (its postmaster and every backend),
or this process's waited-for children (the workload's programs: shells, dd, cp, and
everything they waited for), so that a file system's whole cost is in one table.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from functools import partial
from pathlib import Path

from loadtests.harness import cpu_seconds, postgres_cpu_seconds

PROGRAMS = "programs"  # the role of this process's children


def children_cpu_seconds() -> float:
    """User+system CPU of this process's children that were waited for, so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pids_of(pattern: str, *words: str) -> list[int]:
    """Pids of running processes whose command line holds `pattern` and every word of
    `words` (to find a daemon another program started, such as `pfs mount`'s)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if pattern in cmdline and all(w in cmdline for w in words):
            found.append(int(proc.name))
    return found


class CpuMeter:
    """CPU seconds by role (see the module's docstring)."""

    def __init__(
        self, pids: dict[str, list[int]], postgres: Path | None = None, programs: bool = True
    ) -> None:
        self._readers: dict[str, Callable[[], float]] = {
            role: partial(_sum_cpu, tuple(ps)) for role, ps in pids.items()
        }
        if postgres is not None:
            self._readers["PostgreSQL"] = lambda: postgres_cpu_seconds(postgres)
        if programs:
            self._readers[PROGRAMS] = children_cpu_seconds

    @property
    def roles(self) -> list[str]:
        """The roles counted, in the order given (programs last)."""
        return list(self._readers)

    def read(self) -> dict[str, float]:
        """CPU seconds used so far, by role."""
        return {role: read() for role, read in self._readers.items()}

    def since(self, before: dict[str, float]) -> dict[str, float]:
        """CPU seconds used since `before` (a `read()`), by role."""
        now = self.read()
        return {role: max(0.0, now[role] - before[role]) for role in now}


def _sum_cpu(pids: tuple[int, ...]) -> float:
    return sum(_alive_cpu(p) for p in pids)


def _alive_cpu(pid: int) -> float:
    """A process's CPU so far; 0 once it is gone (a benchmark ends its daemons last)."""
    try:
        return cpu_seconds(pid)
    except OSError:
        return 0.0
