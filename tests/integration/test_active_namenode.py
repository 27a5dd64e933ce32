"""One active namenode, always: PostgreSQL killed and restarted under a create load, and
a second namenode started against the same database. Either the first retakes its lock
and the second is refused, or the second takes over and no commit of the first lands."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client, PlasmaError, ShutdownError, StorageError
from plasmafs.local.postgres import LocalPostgres, start_postgres, stop_postgres
from tests.support.cluster import NamenodeProcess, prepare_database, run


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
        while Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
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


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


class CreateLoad:
    """Creates files one transaction each through a namenode, reconnecting on failures,
    and remembers which creates were acknowledged."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.acknowledged: list[str] = []
        self.failures: list[PlasmaError] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is None or self._task.done():
            return
        self._stopping = True  # a cancellation may surface as the client's close error
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        k = 0
        while not self._stopping:
            try:
                async with Client(self.address, connect_timeout=2) as fs:
                    while True:
                        k += 1
                        await fs.create(f"/load/f{k}")
                        self.acknowledged.append(f"f{k}")
            except PlasmaError as exc:
                self.failures.append(exc)
                await asyncio.sleep(0.05)  # the namenode or PostgreSQL is away: pace retries

    async def wait_for_progress(self, timeout: float = 60.0) -> None:
        """Until a create is acknowledged after this call."""
        seen = len(self.acknowledged)
        async with asyncio.timeout(timeout):
            while len(self.acknowledged) <= seen:
                await asyncio.sleep(0.02)


async def _setup(address: str) -> None:
    async with Client(address) as fs:
        await fs.mkdir("/load")


async def test_the_namenode_retakes_its_lock_and_a_second_one_is_refused(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    dsn = postgres.dsn()
    env = {"PFS_NAMENODE_LEADER_CHECK_INTERVAL": "0.2"}
    (tmp_path / "a").mkdir()
    first = NamenodeProcess(dsn, tmp_path / "a", env=env).start()
    load = CreateLoad(first.address)
    try:
        await _setup(first.address)
        load.start()
        await load.wait_for_progress()
        await asyncio.to_thread(crash_and_restart, postgres)
        await load.wait_for_progress()  # the first namenode serves writes again
        (tmp_path / "b").mkdir()
        second = NamenodeProcess(dsn, tmp_path / "b", env=env)
        with pytest.raises(StorageError, match="another namenode"):
            await asyncio.to_thread(second.start)
        await load.wait_for_progress()
        await load.stop()
        async with Client(first.address) as fs:
            names = set(await fs.listdir("/load"))
        assert set(load.acknowledged) <= names  # no acknowledged create was lost
    finally:
        await load.stop()
        first.stop()


async def test_a_deposed_namenode_never_commits_again(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    dsn = postgres.dsn()
    (tmp_path / "a").mkdir()
    # The first namenode checks its lock rarely: only the term can stop its commits.
    first = NamenodeProcess(
        dsn, tmp_path / "a", env={"PFS_NAMENODE_LEADER_CHECK_INTERVAL": "3600"}
    ).start()
    (tmp_path / "b").mkdir()
    second = NamenodeProcess(dsn, tmp_path / "b")
    load = CreateLoad(first.address)
    try:
        await _setup(first.address)
        load.start()
        await load.wait_for_progress()
        await asyncio.to_thread(crash_and_restart, postgres)
        await asyncio.to_thread(second.start)  # the first lost its lock with the crash
        async with Client(second.address) as fs:
            await fs.create("/from-second")
        # The first namenode's next group commit is refused by PostgreSQL; it steps down.
        assert first.proc is not None
        status = await asyncio.to_thread(first.proc.wait, 60)
        assert status != 0
        assert "no longer the active one" in first.log_tail()
        await load.stop()
        assert any(isinstance(f, ShutdownError) for f in load.failures)
        async with Client(second.address) as fs:
            names = set(await fs.listdir("/load"))
            assert set(load.acknowledged) <= names  # nothing acknowledged was lost
            assert await fs.exists("/from-second")
    finally:
        await load.stop()
        second.stop()
        first.stop()
