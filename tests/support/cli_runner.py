"""Running the `pfs` CLI in tests: a clean environment, one subprocess per command, and
the checks every CLI test makes of its exit status and its one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_ISOLATED = ("PFS_CLIENT_NAMENODE", "PFS_HOME", "PFS_NAMENODE_DSN")
# How clients trust and are known to the test run's own cluster.
CLUSTER_TRUST = ("PFS_CLIENT_CA", "PFS_TOKEN_FILE")


@dataclass(frozen=True)
class Result:
    """What one `pfs` run did."""

    rc: int
    out: str
    err: str
    seconds: float

    @property
    def lines(self) -> list[str]:
        """stdout, line by line."""
        return self.out.splitlines()


def clean_env(home: Path, namenode: str | None = None) -> dict[str, str]:
    """The environment without any inherited plasmafs or PostgreSQL settings. With a
    `namenode`, the CLI trusts the run's CA (PFS_CLIENT_CA); without, it finds the
    cluster and its CA in `home`, as after `pfs local up`."""
    isolated = _ISOLATED if namenode is not None else (*_ISOLATED, *CLUSTER_TRUST)
    env = {k: v for k, v in os.environ.items() if k not in isolated and not k.startswith("PG")}
    env["PFS_HOME"] = str(home)
    if namenode is not None:
        env["PFS_CLIENT_NAMENODE"] = namenode
    return env


def run_pfs(env: dict[str, str], *args: str, timeout: float = 60.0) -> Result:
    """Run `pfs ARGS...` as a subprocess."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "plasmafs.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def assert_ok(result: Result, out: str | None = "") -> None:
    """Exit 0, nothing on stderr, and (unless None) exactly `out` on stdout."""
    assert result.rc == 0, result
    assert result.err == "", result
    if out is not None:
        assert result.out == out, result


def assert_error(result: Result, command: str, *fragments: str) -> str:
    """A failure reported as one `pfs: COMMAND: ...` line on stderr; returns the line."""
    assert result.rc != 0, result
    assert "Traceback" not in result.err, result.err
    lines = result.err.splitlines()
    assert len(lines) == 1 and result.err.endswith("\n"), result.err
    assert lines[0].startswith(f"pfs: {command}: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


Pfs = Callable[..., Result]
