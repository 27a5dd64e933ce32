"""Fixtures: `admin_dsn` (the run's PostgreSQL), `dsn` (a fresh migrated database per
test), `namenode` (a namenode process on it), `fs` (a connected asyncio client)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client
from plasmafs.client.local.postgres import start_postgres, stop_postgres
from tests.cluster import NamenodeProcess, create_database, create_template, drop_database, run


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
    client = Client(namenode.address)
    await client.connection()
    yield client
    await client.close()
