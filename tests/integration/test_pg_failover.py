"""PostgreSQL on three hosts under Patroni (`loadtests/pg_ha.py`): the primary's host
killed, or cut off, under a create load. Writes resume by themselves on the promoted
standby, every acknowledged (durable) create is there afterwards, and the old primary
comes back as a replica, never a second primary. Relaxed creates (acknowledged before
their WAL flush) may be lost, but the namenode never answers from a cache that holds
them: what it says exists is what the promoted primary has."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import asyncpg
import pytest

from loadtests.hosts import HostCluster, host_cluster
from plasmafs.client import Client
from tests.support.create_load import CreateLoad

pytestmark = pytest.mark.hosts


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[HostCluster]:
    """Three PostgreSQL hosts under Patroni, a namenode host, a datanode host."""
    with host_cluster(namenodes=1, datanodes=1, lease_ttl=2.0, databases=3) as made:
        for key, value in made.client_env().items():
            monkeypatch.setenv(key, value)
        yield made


@pytest.mark.parametrize("fault", ["kill -9", "cut off"])
async def test_writes_resume_when_the_primarys_host_is_lost(
    cluster: HostCluster, fault: str
) -> None:
    patroni = cluster.patroni
    assert patroni is not None
    async with Client(cluster.addresses) as fs:
        await fs.mkdir("/load")
        await fs.mkdir("/relaxed")
    load = CreateLoad(cluster.addresses)
    relaxed = CreateLoad(cluster.addresses, "/relaxed", durable=False)
    load.start()
    relaxed.start()
    try:
        await load.wait_for_progress()
        await relaxed.wait_for_progress()
        old = patroni.leader()
        assert old is not None
        killed = time.monotonic()
        if fault == "kill -9":
            cluster.network.host(old).kill()
        else:
            cluster.network.cut(old)
        async with asyncio.timeout(120):
            while not any(t > killed + 1 for t in load.acknowledged_at):
                await asyncio.sleep(0.1)
        await load.wait_for_progress()
    finally:
        await load.stop()
        await relaxed.stop()
    new = patroni.leader()
    assert new is not None and new != old
    async with Client(cluster.addresses) as fs:
        names = set(await fs.listdir("/load"))
        missing = set(load.acknowledged) - names
        assert not missing, f"{len(missing)} acknowledged creates lost"
        stored = await _names_in_postgres(patroni.dsn("plasmafs"), "relaxed")
        assert set(await fs.listdir("/relaxed")) == stored
        for name in set(relaxed.acknowledged) - stored:  # lost with the old primary
            assert not await fs.exists(f"/relaxed/{name}")

    if fault == "kill -9":
        patroni.restart(old)
    else:
        cluster.network.restore(old)
    async with asyncio.timeout(120):
        while patroni.states().get(old) != "replica/running":
            await asyncio.sleep(0.5)
    assert patroni.leader() == new


async def _names_in_postgres(dsn: str, directory: str) -> set[str]:
    """The names PostgreSQL has in /`directory`."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            """SELECT name FROM entries
               WHERE parent = (SELECT ino FROM entries WHERE parent = 1 AND name = $1)""",
            directory,
        )
    finally:
        await conn.close()
    return {r["name"] for r in rows}
