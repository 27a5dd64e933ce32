"""kill -9 of the namenode while commits are in flight: after a restart every
acknowledged commit is there and nothing is half-applied."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from plasmafs.client import Client, PlasmaError
from tests.support.cluster import NamenodeProcess

WORKERS = 16


async def _writer(address: str, k: int, acked: list[int], stop: asyncio.Event) -> None:
    client = Client(address)
    try:
        await client.mkdir(f"/w{k}")
        i = 0
        while not stop.is_set():
            try:
                async with client.transaction() as t:
                    await t.mkdir(f"/w{k}/d{i}")
                    await t.create(f"/w{k}/d{i}/f")
                    await t.symlink(f"/w{k}/d{i}/s", "f")
                acked.append(i)
            except PlasmaError:
                return  # the namenode died under us
            i += 1
    finally:
        await client.close()


async def test_kill_9_during_commits_loses_nothing_acknowledged(
    namenode: NamenodeProcess, dsn: str
) -> None:
    acked: list[list[int]] = [[] for _ in range(WORKERS)]
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(_writer(namenode.address, k, acked[k], stop)) for k in range(WORKERS)
    ]
    deadline = time.monotonic() + 10
    while sum(map(len, acked)) < 300 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    namenode.kill9()  # mid-flight: the writers never stopped
    stop.set()
    await asyncio.gather(*tasks)
    assert sum(map(len, acked)) >= 300

    namenode.start()
    fs = Client(namenode.address)
    try:
        total = 0
        for k in range(WORKERS):
            present = set()
            for name in await fs.listdir(f"/w{k}"):
                i = int(name[1:])
                present.add(i)
                # all three changes of the transaction, or none
                assert await fs.listdir(f"/w{k}/{name}") == ["f", "s"]
                assert await fs.readlink(f"/w{k}/{name}/s") == "f"
            assert set(acked[k]) <= present
            assert (await fs.stat(f"/w{k}")).nlink == 2 + len(present)
            total += len(present)
        st = await fs.fsstat()
        assert (st.files, st.symlinks, st.directories) == (total, total, 1 + WORKERS + total)
        # the namenode keeps working on the recovered state
        await fs.mkdir("/after")
    finally:
        await fs.close()

    conn = await asyncpg.connect(dsn)
    try:
        orphans = await conn.fetchval(
            "SELECT count(*) FROM inodes i WHERE i.ino <> 1 "
            "AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.ino = i.ino)"
        )
        bad_nlink = await conn.fetchval(
            """SELECT count(*) FROM inodes d WHERE d.kind = 2 AND d.nlink <> 2 + (
                   SELECT count(*) FROM entries e JOIN inodes c ON c.ino = e.ino
                   WHERE e.parent = d.ino AND c.kind = 2)"""
        )
    finally:
        await conn.close()
    assert orphans == 0
    assert bad_nlink == 0
