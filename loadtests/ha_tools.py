"""The tools the PostgreSQL high-availability and backup tests run, installed on first
use by the project itself: etcd (Debian's etcd-server package, unpacked with `dpkg -x`,
so no service is installed or enabled), Patroni (from PyPI, pinned, in a virtual
environment of Debian's own Python: the unprivileged user PostgreSQL runs as must be
able to execute it, and Patroni starts PostgreSQL by re-executing its interpreter) and
Barman (from PyPI, pinned, in a virtual environment of its own: continuous archiving
and point-in-time restores; pgBackRest 2.45, Debian 12's, refuses PostgreSQL 18).

Everything goes under PFS_HA_TOOLS (default /var/cache/plasmafs-ha), readable by all.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

TOOLS = Path(os.environ.get("PFS_HA_TOOLS", "/var/cache/plasmafs-ha"))
PATRONI_PACKAGES = ("patroni[etcd3]==4.1.5", "psycopg2-binary==2.9.13")
BARMAN_PACKAGES = ("barman==3.19.1", "psycopg2-binary==2.9.13")
SYSTEM_PYTHON = "/usr/bin/python3"


def etcd() -> Path:
    """The etcd binary (installed if missing)."""
    ensure()
    return TOOLS / "etcd" / "usr" / "bin" / "etcd"


def patroni() -> Path:
    """The patroni program (installed if missing)."""
    ensure()
    return TOOLS / "patroni" / "bin" / "patroni"


def barman() -> Path:
    """The barman program (installed if missing)."""
    ensure()
    return TOOLS / "barman" / "bin" / "barman"


def ensure() -> None:
    """Install what is missing (one process at a time)."""
    TOOLS.mkdir(parents=True, exist_ok=True)
    TOOLS.chmod(0o755)
    with open(TOOLS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (TOOLS / "etcd" / "usr" / "bin" / "etcd").exists():
            _install_etcd()
        if not (TOOLS / "patroni" / "bin" / "patroni").exists():
            _install_venv(TOOLS / "patroni", PATRONI_PACKAGES)
        if not (TOOLS / "barman" / "bin" / "barman").exists():
            _install_venv(TOOLS / "barman", BARMAN_PACKAGES)


def _install_etcd() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        download = ["apt-get", "download", "-q", "etcd-server"]
        if subprocess.run(download, cwd=scratch, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
            subprocess.run(download, cwd=scratch, check=True, capture_output=True)
        target = TOOLS / "etcd.new"
        shutil.rmtree(target, ignore_errors=True)
        [deb] = Path(scratch).glob("etcd-server_*.deb")
        subprocess.run(["dpkg", "-x", str(deb), str(target)], check=True, capture_output=True)
        target.rename(TOOLS / "etcd")


def _install_venv(venv: Path, packages: tuple[str, ...]) -> None:
    # Built where it stays (a venv's scripts name its path); its program, the sign of
    # a finished install, appears only once pip succeeded.
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], check=True, capture_output=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", *packages],
        check=True,
        capture_output=True,
    )
