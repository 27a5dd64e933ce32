"""Mounting in tests: `pfs mount` of a test cluster at a temporary directory, and an
unmount that always runs, so that no test leaves a mount (or its process) behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from plasmafs.local.cluster import process_exited
from plasmafs.mount.mountpoints import is_mounted
from tests.support.cli_runner import clean_env, run_pfs

MOUNTED = re.compile(r"^mounted at (?P<path>.+) \(pid (?P<pid>\d+); log (?P<log>.+)\)$")


@dataclass
class Mount:
    """A live mount: where, the pid of its process, its log, the CLI's environment."""

    path: Path
    pid: int
    log: Path
    env: dict[str, str]

    def alive(self) -> bool:
        """True while the mount's process runs (pfs mount started it; init reaps it)."""
        return not process_exited(self.pid)


@contextlib.contextmanager
def mounted(
    namenode: str, where: Path, *options: str, token_file: Path | None = None
) -> Iterator[Mount]:
    """`pfs mount` the namenode's file system at `where` (made if missing); unmounted
    and its process gone afterwards, whatever happened."""
    where.mkdir(parents=True, exist_ok=True)
    home = where.parent / f"{where.name}-home"
    home.mkdir(exist_ok=True)
    env = clean_env(home, namenode)
    if token_file is not None:
        env["PFS_TOKEN_FILE"] = str(token_file)
    args = ["mount", str(where)]
    if options:
        args += ["-o", ",".join(options)]
    result = run_pfs(env, *args)
    match = MOUNTED.match(result.out.strip())
    mount = Mount(where, int(match["pid"]), Path(match["log"]), env) if match else None
    try:
        assert result.rc == 0 and mount is not None, result
        yield mount
    finally:
        unmount(where, mount.pid if mount else None)


def unmount(where: Path, pid: int | None) -> None:
    """Unmount `where` (lazily if busy) and wait for the mount's process to end (killing
    it after 30 s)."""
    if is_mounted(where):
        done = subprocess.run(["fusermount3", "-u", str(where)], capture_output=True, check=False)
        if done.returncode != 0:
            subprocess.run(["fusermount3", "-uz", str(where)], capture_output=True, check=False)
    if pid is None:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process_exited(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
