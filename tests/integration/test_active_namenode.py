"""One active namenode, always: PostgreSQL killed and restarted under a create load
(the active namenode keeps its lease, a second one stands by), and a namenode whose
term another took (it commits nothing more and stands by)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from plasmafs.client import Client, ConnectionLostError
from plasmafs.local.cluster import process_exited
from plasmafs.local.postgres import LocalPostgres, start_postgres, stop_postgres
from tests.support.cluster import NamenodeProcess, prepare_database, run
from tests.support.create_load import CreateLoad


@pytest.fixture
def postgres() -> Iterator[LocalPostgres]:
    """A PostgreSQL of this test's own, to kill (outside pytest's tmp_path, whose parent
    another pytest run may make private while this one runs)."""
    base = Path(tempfile.mkdtemp(prefix="pfs-test-crash-pg-"))
    pg = start_postgres(base / "data")
    try:
        run(prepare_database(pg.dsn()))
        yield pg
    finally:
        stop_postgres(pg.datadir)
        shutil.rmtree(base, ignore_errors=True)


def crash_and_restart(pg: LocalPostgres) -> None:
    """SIGKILL the postmaster and its processes (a crash), then start it again."""
    postmaster = int((pg.datadir / "postmaster.pid").read_text().split()[0])
    children = [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _parent(int(p.name)) == postmaster
    ]
    for pid in [postmaster, *children]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in [postmaster, *children]:
        while not process_exited(pid):
            os.sched_yield()
    # The dead postmaster may linger as a zombie whose pid PostgreSQL would take as alive.
    for stale in [pg.datadir / "postmaster.pid", *pg.datadir.glob(".s.PGSQL.*")]:
        stale.unlink()
    start_postgres(pg.datadir, pg.port)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


async def _setup(address: str) -> None:
    async with Client(address) as fs:
        await fs.mkdir("/load")


async def _refused_as_standby(address: str) -> None:
    """A client of `address` alone is refused: the namenode there stands by."""
    with pytest.raises(ConnectionLostError, match="standby"):
        async with Client(address, connect_timeout=5) as fs:
            await fs.ping()


async def test_the_namenode_keeps_its_lease_across_a_postgresql_crash(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    dsn = postgres.dsn()
    (tmp_path / "a").mkdir()
    first = NamenodeProcess(dsn, tmp_path / "a").start()
    load = CreateLoad(first.address)
    try:
        await _setup(first.address)
        load.start()
        await load.wait_for_progress()
        await asyncio.to_thread(crash_and_restart, postgres)
        await load.wait_for_progress()  # the first namenode serves writes again
        (tmp_path / "b").mkdir()
        second = NamenodeProcess(dsn, tmp_path / "b")
        await asyncio.to_thread(second.start)  # up, as a standby
        await _refused_as_standby(second.address)
        await load.wait_for_progress()
        await load.stop()
        async with Client(first.address) as fs:
            names = set(await fs.listdir("/load"))
        assert set(load.acknowledged) <= names  # no acknowledged create was lost
    finally:
        await load.stop()
        first.stop()
        if "second" in locals():
            second.stop()


async def test_a_namenode_whose_term_was_taken_never_commits_again(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    dsn = postgres.dsn()
    (tmp_path / "a").mkdir()
    first = NamenodeProcess(dsn, tmp_path / "a").start()
    load = CreateLoad(first.address)
    try:
        await _setup(first.address)
        load.start()
        await load.wait_for_progress()
        conn = await asyncpg.connect(dsn)
        try:  # as a standby that took over while this namenode was paused
            failures = len(load.failures)  # (a create may fail as soon as the term moves)
            await conn.execute(
                """UPDATE namenode_terms SET term = term + 1, holder = 'another',
                   lease_expires = now() + interval '1 hour'"""
            )
            landed = set(await _names(conn))
            async with asyncio.timeout(30):  # its next renewal finds the newer term
                while "no longer the active one" not in first.log_tail(200):
                    await asyncio.sleep(0.05)
            async with asyncio.timeout(30):
                while "standing by" not in first.log_tail(200):
                    await asyncio.sleep(0.05)
            await _refused_as_standby(first.address)
            assert len(load.failures) > failures
            assert set(await _names(conn)) == landed  # nothing committed after the takeover
            await load.stop()
            assert set(load.acknowledged) <= landed  # nothing acknowledged was lost
        finally:
            await conn.close()
    finally:
        await load.stop()
        first.stop()


async def _names(conn: asyncpg.Connection) -> list[str]:
    rows = await conn.fetch(
        """SELECT e.name FROM entries e JOIN entries d ON d.ino = e.parent
           WHERE d.parent = 1 AND d.name = 'load'"""
    )
    return [r["name"] for r in rows]
