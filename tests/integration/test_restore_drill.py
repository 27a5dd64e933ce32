"""The restore drill of deploy/BACKUP.md: the metadata restored from Barman's backup
and WAL to a point in time, into a new PostgreSQL, under a namenode that meets the
datanodes that lived on past that point.

After the point, the cluster went on: a namenode restart (a newer term the datanodes
remember), a file removed and its blocks reused by a new file. Restored, the namespace
is the one of the point: every file of then reads back identical, the file whose
blocks were reused is reported corrupt and its bytes (or the new file's) are never
returned, the blocks only later files used are free again, the namenode takes a term
past what the datanodes have seen, and new files are written and read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from plasmafs.client import Client, PlasmaError
from plasmafs.client.admin import FsckFile, FsckSummary
from plasmafs.local.postgres import (
    LocalPostgres,
    create_database,
    start_postgres,
    stop_postgres,
)
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY, DataCluster, data_cluster_processes
from tests.support.barman import Barman
from tests.support.cluster import prepare_database
from tests.support.waiting import eventually

BS = TEST_BLOCKSIZE


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[LocalPostgres]:
    """A PostgreSQL server of the test's own (a physical backup is of a whole server)."""
    pg = start_postgres(tmp_path / "pg")
    try:
        yield pg
    finally:
        stop_postgres(pg.datadir)


async def _now(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        return str(await conn.fetchval("SELECT now()"))
    finally:
        await conn.close()


async def _in_recovery(dsn: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return bool(await conn.fetchval("SELECT pg_is_in_recovery()"))
    finally:
        await conn.close()


async def _replica_blocks(dfs: Client, path: str) -> set[tuple[int, int]]:
    """(datanode, block) of every replica block of `path`, as fsck sees them (a block
    list would hand out read tickets, which hold blocks back after a remove)."""
    return {
        (r.datanode_id, r.block_start + k)
        async for f in dfs.fsck(path, all_files=True)
        if isinstance(f, FsckFile)
        for g in f.blocks
        for r in g.replicas
        for k in range(g.block_count)
    }


@pytest.mark.slow
async def test_metadata_restored_to_a_point_in_time_meets_the_datanodes_of_later(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    await create_database(postgres.dsn(), "plasmafs")
    dsn = postgres.dsn("plasmafs")
    await prepare_database(dsn)
    barman = Barman(tmp_path / "barman", postgres)
    (tmp_path / "cluster").mkdir()
    cluster_run = data_cluster_processes(dsn, tmp_path / "cluster", inline_limit=0)
    cluster: DataCluster = next(cluster_run)
    try:
        barman.start()
        await _drill(cluster, barman, postgres, tmp_path)
    finally:
        barman.stop()
        cluster_run.close()
        stop_postgres(tmp_path / "restored")


async def _drill(cluster: DataCluster, barman: Barman, pg: LocalPostgres, tmp: Path) -> None:
    kept = {
        "/keep/a": os.urandom(3 * BS + 100),
        "/keep/c": os.urandom(1000),
    }
    reused = os.urandom(2 * BS)
    async with Client(cluster.namenode.address) as dfs:
        await dfs.mkdir("/keep")
        await dfs.write_file("/keep/a", kept["/keep/a"], replication=2)
        await dfs.write_file("/keep/c", kept["/keep/c"], replication=3)
        await dfs.write_file("/reused", reused, replication=1)  # never read: no tickets
        backup = barman.backup()
        # Past the backup, before the point restored to: replayed from the WAL.
        kept["/keep/f"] = os.urandom(BS + 1)
        await dfs.write_file("/keep/f", kept["/keep/f"], replication=2)
        reused_blocks = await _replica_blocks(dfs, "/reused")
    point = await _now(cluster.namenode.dsn)

    # Past the point: lost in the restore, but the datanodes keep what it did.
    async with Client(cluster.namenode.address) as dfs:
        await dfs.unlink("/reused")
    cluster.namenode.stop()
    cluster.namenode.start()  # a newer term, which the datanodes remember
    async with Client(cluster.namenode.address) as dfs:
        await eventually(lambda: _all_live(dfs, 3), timeout=30)
        await dfs.mkdir("/later")
        st = await dfs.fsstat()
        free = st.capacity_bytes - st.used_bytes
        later = os.urandom(free // BS * BS)  # every free block: /reused's among them
        await dfs.write_file("/later/fill", later, replication=1)
        assert reused_blocks <= await _replica_blocks(dfs, "/later/fill")
        [old_term] = [r.term for r in await dfs.namenodes()]
    barman.archive_now()
    cluster.namenode.stop()

    # The restore: a new PostgreSQL from the backup and the WAL up to the point.
    barman.recover(backup, tmp / "restored", point)
    restored = start_postgres(tmp / "restored")
    restored_dsn = restored.dsn("plasmafs")
    await eventually(lambda: _promoted(restored_dsn), timeout=60)
    cluster.namenode.dsn = restored_dsn
    cluster.namenode.start()

    # The namenode may stand down once to take a term past the datanodes' (a blip any
    # client waiting through failovers rides out).
    async with Client(cluster.namenode.address, failover_timeout=30) as dfs:
        await eventually(lambda: _all_live(dfs, 3), timeout=60)
        for path, data in kept.items():
            assert await dfs.read_file(path) == data
        assert not await dfs.exists("/later")

        async def reported() -> FsckSummary | None:
            items = [item async for item in dfs.fsck("/", list_corrupt=True)]
            summary = items[-1]
            assert isinstance(summary, FsckSummary)
            corrupt = [f.path for f in items if isinstance(f, FsckFile)]
            return summary if corrupt == ["/reused"] else None

        summary = await eventually(reported, timeout=60)  # found with no read of it
        with pytest.raises(PlasmaError) as refused:
            await dfs.read_file("/reused")
        assert later[:64] not in str(refused.value).encode()
        assert reused[:64] not in str(refused.value).encode()
        assert isinstance(summary, FsckSummary)
        assert summary.record_errors == ()
        assert summary.corrupt_files == 1
        # The namenode took a term past the one the datanodes had seen.
        [role] = await dfs.namenodes()
        assert role.term > old_term
        # The blocks only /later/fill used are free again: new files land and read.
        fresh = os.urandom(4 * BS)
        await dfs.write_file("/fresh", fresh, replication=3)
        assert await dfs.read_file("/fresh") == fresh
        assert (await dfs.fsstat()).used_bytes < 3 * TEST_CAPACITY // 2


async def _all_live(dfs: Client, count: int) -> bool:
    return (await dfs.fsstat()).live_datanodes == count


async def _promoted(dsn: str) -> bool:
    try:
        return not await _in_recovery(dsn)
    except (OSError, asyncpg.PostgresError):
        return False
