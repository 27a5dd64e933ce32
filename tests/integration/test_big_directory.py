"""A directory of 1,000,000 entries is listed a page at a time: neither the namenode nor
the client holds it all in memory."""

from __future__ import annotations

import resource
from pathlib import Path

import asyncpg
import pytest

from plasmafs.client import Client
from tests.support.cluster import NamenodeProcess

ENTRIES = 1_000_000


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def _fill(dsn: str) -> None:
    # Written straight into PostgreSQL before the namenode starts: creating a million
    # files through the namenode would take minutes and is not what this test is about.
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            """INSERT INTO inodes (ino, kind, mode, uid, gid, mtime_ns, ctime_ns, nlink,
                                   replication, blocksize)
               VALUES (2, 2, 493, 0, 0, 0, 0, 2, 1, 1048576);
               INSERT INTO entries VALUES (1, 'big', 2);
               UPDATE inodes SET nlink = 3 WHERE ino = 1;
               INSERT INTO inodes (ino, kind, mode, uid, gid, mtime_ns, ctime_ns, nlink,
                                   replication, blocksize)
               SELECT 10 + g, 1, 420, 0, 0, 0, 0, 1, 1, 1048576
               FROM generate_series(1, $1) AS g;
               INSERT INTO entries SELECT 2, 'f' || lpad(g::text, 7, '0'), 10 + g
               FROM generate_series(1, $1) AS g;
               SELECT setval('inode_numbers', $1 + 100)""".replace("$1", str(ENTRIES))
        )
    finally:
        await conn.close()


@pytest.mark.slow
async def test_a_million_entries_stream_in_pages(dsn: str, tmp_path: Path) -> None:
    await _fill(dsn)
    namenode = NamenodeProcess(dsn, tmp_path).start()
    fs = Client(namenode.address)
    try:
        assert namenode.proc is not None
        before = _rss_kib(namenode.proc.pid)
        client_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        count = 0
        last = ""
        async for entry in fs.scandir("/big", page=4096):
            assert entry.name > last
            last = entry.name
            count += 1
        assert count == ENTRIES
        assert last == f"f{ENTRIES:07d}"
        grown_mib = (_rss_kib(namenode.proc.pid) - before) / 1024
        client_grown_mib = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - client_before
        ) / 1024
        assert grown_mib < 64, f"namenode grew by {grown_mib:.0f} MiB while listing"
        assert client_grown_mib < 64, f"client grew by {client_grown_mib:.0f} MiB while listing"
        assert (await fs.stat("/big/f0500000")).ino == 10 + 500_000
    finally:
        await fs.close()
        namenode.stop()
