"""Fixtures: `admin_dsn` (the run's PostgreSQL), `dsn` (a fresh migrated database per
test), `namenode` (a namenode process on it), `fs` (a connected asyncio client), `lib`
(the synchronous client), `pfs` (the CLI), `data_cluster` and `dfs` (with datanodes,
every content in blocks), `inline_cluster` and `ifs` (small files kept inline)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plasmafs.client import Client, SyncClient
from plasmafs.local.postgres import start_postgres, stop_postgres
from tests.support.accounts import TOKENS, write_test_token
from tests.support.cli_runner import Pfs, clean_env, run_pfs
from tests.support.cluster import (
    DatanodeProcess,
    NamenodeProcess,
    create_database,
    create_template,
    drop_database,
    run,
    use_pki,
)

pytest_plugins = ["tests.support.gateway"]

TEST_BLOCKSIZE = 64 * 1024
TEST_CAPACITY = 256 * TEST_BLOCKSIZE


@contextlib.asynccontextmanager
async def connected_client(address: str) -> AsyncIterator[Client]:
    """A client connected to the namenode at `address` (connecting fails here, not in
    the test), closed at the end."""
    client = Client(address)
    await client.connection()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="session", autouse=True)
def cluster_pki() -> Iterator[Path]:
    """The run's CA and credentials: daemons serve TLS with the CA's certificates,
    clients trust it (PFS_CLIENT_CA) and act as root (PFS_TOKEN_FILE), as the user
    who started a local cluster does; TOKEN_DIR/NAME.token are the test users' tokens."""
    home = Path(tempfile.mkdtemp(prefix="pfs-test-pki-"))
    ca = use_pki(home)
    tokens = home / "tokens"
    tokens.mkdir()
    for name in TOKENS:
        write_test_token(tokens, name)
    settings = {"PFS_CLIENT_CA": str(ca), "PFS_TOKEN_FILE": str(tokens / "root.token")}
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        yield tokens
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def admin_dsn() -> Iterator[str]:
    """An admin DSN of the PostgreSQL the run uses (PFS_TEST_DSN, or an embedded one)."""
    external = os.environ.get("PFS_TEST_DSN")
    if external:
        run(create_template(external))
        yield external
        return
    base = Path(tempfile.mkdtemp(prefix="pfs-test-pg-"))
    pg = start_postgres(base / "data")
    try:
        run(create_template(pg.dsn()))
        yield pg.dsn()
    finally:
        stop_postgres(pg.datadir)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def dsn(admin_dsn: str) -> Iterator[str]:
    """A fresh database with the migrations applied (a copy of the template)."""
    database = run(create_database(admin_dsn))
    assert isinstance(database, str)
    yield database
    run(drop_database(admin_dsn, database))


@pytest.fixture
def namenode(dsn: str, tmp_path: Path) -> Iterator[NamenodeProcess]:
    """A namenode daemon serving the test's database."""
    process = NamenodeProcess(dsn, tmp_path).start()
    yield process
    process.stop()


@pytest.fixture
async def fs(namenode: NamenodeProcess) -> AsyncIterator[Client]:
    """An asyncio client connected to the test's namenode."""
    async with connected_client(namenode.address) as client:
        yield client


@pytest.fixture
async def alice(namenode: NamenodeProcess) -> AsyncIterator[Client]:
    """A client of the test's namenode acting as alice (tests/support/accounts.py), who
    is no superuser."""
    client = Client(namenode.address, token=TOKENS["alice"])
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def pfs(namenode: NamenodeProcess, tmp_path: Path) -> Pfs:
    """`pfs(*args)` runs the CLI against the test's namenode, with a private PFS_HOME."""
    home = tmp_path / "pfs-home"
    home.mkdir()
    env = clean_env(home, namenode.address)
    return lambda *args: run_pfs(env, *args)


@pytest.fixture
def lib(namenode: NamenodeProcess) -> Iterator[SyncClient]:
    """The synchronous client library on the test's namenode."""
    with SyncClient(namenode.address) as client:
        yield client


@dataclass
class DataCluster:
    """A namenode with datanodes, for tests of the data path."""

    namenode: NamenodeProcess
    datanodes: list[DatanodeProcess]
    blocksize: int


@pytest.fixture
def data_cluster(dsn: str, tmp_path: Path) -> Iterator[DataCluster]:
    """A namenode (blocksize 64 KiB) and three datanodes of 256 blocks each; every
    content is in blocks, however small (these are tests of the data path)."""
    yield from data_cluster_processes(dsn, tmp_path, inline_limit=0)


@pytest.fixture
def inline_cluster(dsn: str, tmp_path: Path) -> Iterator[DataCluster]:
    """The data cluster with the namenode's default inline limit: files up to 4 KiB
    keep their content in the namespace."""
    yield from data_cluster_processes(dsn, tmp_path, inline_limit=None)


def data_cluster_processes(
    dsn: str, tmp_path: Path, inline_limit: int | None, env: dict[str, str] | None = None
) -> Iterator[DataCluster]:
    """A namenode and three datanodes (see `data_cluster`); `inline_limit` None keeps
    the namenode's default; `env` adds namenode settings."""
    env = {
        "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(TEST_BLOCKSIZE),
        "PFS_NAMENODE_DATANODE_DEAD_AFTER": "3",
        "PFS_NAMENODE_HEARTBEAT_MS": "200",
        **(env or {}),
    }
    if inline_limit is not None:
        env["PFS_NAMENODE_INLINE_LIMIT"] = str(inline_limit)
    namenode = NamenodeProcess(dsn, tmp_path, env=env).start()
    datanodes: list[DatanodeProcess] = []
    try:
        for k in range(3):
            datanodes.append(
                DatanodeProcess(
                    tmp_path / f"dn{k + 1}",
                    namenode.registry_address,
                    TEST_CAPACITY,
                    TEST_BLOCKSIZE,
                ).start()
            )
        yield DataCluster(namenode, datanodes, TEST_BLOCKSIZE)
    finally:
        for d in datanodes:
            d.stop()
        namenode.stop()


@pytest.fixture
async def ifs(inline_cluster: DataCluster) -> AsyncIterator[Client]:
    """A client of the cluster that keeps small files inline."""
    async with connected_client(inline_cluster.namenode.address) as client:
        yield client


@pytest.fixture
async def dfs(data_cluster: DataCluster) -> AsyncIterator[Client]:
    """A client of the data cluster."""
    async with connected_client(data_cluster.namenode.address) as client:
        yield client
