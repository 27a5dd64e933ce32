"""Relaxed commits (answered before PostgreSQL's WAL flush) and Sync: visible at once,
durable at sync; after a crash of PostgreSQL itself nothing synced is lost and no
transaction is half there, and a namenode that cannot know what was lost stops."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from plasmafs.client import Client, PlasmaError
from plasmafs.local.postgres import run_program, start_postgres, stop_postgres
from tests.support.cluster import NamenodeProcess, prepare_database


async def test_relaxed_commits_are_visible_at_once(namenode: NamenodeProcess) -> None:
    async with (
        Client(namenode.address, durable_commits=False) as relaxed,
        Client(namenode.address) as other,
    ):
        await relaxed.mkdir("/d")
        async with relaxed.transaction() as t:
            await t.create("/d/f")
            await t.symlink("/d/s", "f")
        assert await other.listdir("/d") == ["f", "s"]
        await relaxed.sync()
        await other.sync()  # anyone may ask, with nothing of their own to flush
        t = await other.begin()
        await t.mkdir("/durable-anyway")
        await t.commit(durable=True)
        assert await relaxed.exists("/durable-anyway")


def _crash(datadir: Path) -> None:
    """Stop PostgreSQL the way a crash does: no shutdown checkpoint, WAL buffers lost."""
    run_program("pg_ctl", ["-w", "-m", "immediate", "stop"], datadir, timeout=60)


async def _write(address: str, prefix: str, count: int) -> list[int]:
    """Transactions of three changes each, relaxed; the numbers acknowledged."""
    done = []
    async with Client(address, durable_commits=False) as fs:
        await fs.mkdir(f"/{prefix}")
        for i in range(count):
            async with fs.transaction() as t:
                await t.mkdir(f"/{prefix}/d{i}")
                await t.create(f"/{prefix}/d{i}/f")
                await t.symlink(f"/{prefix}/d{i}/s", "f")
            done.append(i)
        if prefix == "synced":
            await fs.sync()
    return done


@pytest.mark.timeout(240)
async def test_a_postgres_crash_loses_nothing_synced_and_no_half_transaction(
    tmp_path: Path,
) -> None:
    pg = start_postgres(tmp_path / "pg")
    namenode = NamenodeProcess(pg.dsn(), tmp_path / "nn")
    (tmp_path / "nn").mkdir()
    try:
        await prepare_database(pg.dsn())
        namenode.start()
        synced = await _write(namenode.address, "synced", 50)
        unsynced = await _write(namenode.address, "unsynced", 50)  # crashed at once
        _crash(pg.datadir)
        start_postgres(pg.datadir, pg.port)
        # The namenode cannot know which acknowledged commits survived: it must stop
        # rather than serve from its cache (or, if its flush ran first, carry on).
        deadline = time.monotonic() + 60
        while namenode.proc is not None and namenode.proc.poll() is None:
            try:
                async with Client(namenode.address, connect_timeout=2) as probe:
                    await probe.mkdir(f"/probe-{time.monotonic_ns()}")
                break  # it carried on: everything it had acknowledged was flushed
            except PlasmaError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        namenode.stop()
        namenode.start()
        async with Client(namenode.address) as fs:
            assert sorted(int(n[1:]) for n in await fs.listdir("/synced")) == synced
            present = (
                [int(n[1:]) for n in await fs.listdir("/unsynced")]
                if await fs.exists("/unsynced")
                else []
            )
            assert set(present) <= set(unsynced)
            for prefix, numbers in (("synced", synced), ("unsynced", present)):
                for i in numbers:  # all three changes of a transaction, or none
                    assert await fs.listdir(f"/{prefix}/d{i}") == ["f", "s"]
            await fs.mkdir("/after")  # and it works on
    finally:
        namenode.stop()
        stop_postgres(pg.datadir)
        shutil.rmtree(tmp_path / "pg", ignore_errors=True)
