"""Fair use on a real namenode: per-user limits on open transactions, files being
written and requests in flight hold over all of a user's connections and leave other
users alone; a flood of one user is held back while another user looks up."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client
from plasmafs.core.errors import BusyError
from tests.conftest import DataCluster, data_cluster_processes
from tests.support.accounts import TOKENS, UIDS
from tests.support.cluster import NamenodeProcess

MAX_TRANSACTIONS = 3
MAX_WRITING = 2
MAX_INFLIGHT = 4


@pytest.fixture
def limited(dsn: str, tmp_path: Path) -> Iterator[DataCluster]:
    """The data cluster, its namenode with small per-user limits."""
    yield from data_cluster_processes(
        dsn,
        tmp_path,
        inline_limit=0,
        env={
            "PFS_NAMENODE_MAX_TRANSACTIONS_PER_USER": str(MAX_TRANSACTIONS),
            "PFS_NAMENODE_MAX_WRITING_PER_USER": str(MAX_WRITING),
            "PFS_NAMENODE_MAX_INFLIGHT_PER_USER": str(MAX_INFLIGHT),
        },
    )


async def _homes(address: str) -> None:
    async with Client(address) as root:
        for name in ("alice", "bob"):
            await root.mkdir(f"/{name}")
            await root.chown(f"/{name}", UIDS[name], UIDS[name])


async def test_open_transactions_are_limited_per_user_over_its_connections(
    limited: DataCluster,
) -> None:
    address = limited.namenode.address
    await _homes(address)
    async with (
        Client(address, token=TOKENS["alice"]) as one,
        Client(address, token=TOKENS["alice"]) as two,
        Client(address, token=TOKENS["bob"]) as bob,
    ):
        first = await one.begin()
        second = await two.begin()
        third = await one.begin()
        for txn in (first, second, third):
            await txn.create(f"/alice/f{id(txn)}")
        with pytest.raises(BusyError, match="max_transactions_per_user"):
            fourth = await two.begin()
            await fourth.create("/alice/one-too-many")
        # Another user is not affected.
        bobs = [await bob.begin() for _ in range(MAX_TRANSACTIONS)]
        for k, txn in enumerate(bobs):
            await txn.create(f"/bob/f{k}")
            await txn.commit()
        await first.commit()  # one ends: room for one more
        again = await two.begin()
        await again.create("/alice/again")
        await again.commit()
        await second.abort()
        await third.commit()
    async with Client(address, token=TOKENS["alice"]) as fresh:
        # Transactions of closed connections no longer count.
        txns = [await fresh.begin() for _ in range(MAX_TRANSACTIONS)]
        for k, txn in enumerate(txns):
            await txn.create(f"/alice/later{k}")
            await txn.commit()
        # first, third, again and the later ones (second was aborted)
        assert len(await fresh.listdir("/alice")) == 2 + 1 + MAX_TRANSACTIONS


async def test_files_being_written_are_limited_per_user(limited: DataCluster) -> None:
    address = limited.namenode.address
    bs = limited.blocksize
    await _homes(address)
    data = os.urandom(2 * bs)
    async with (
        Client(address, token=TOKENS["alice"]) as alice,
        Client(address, token=TOKENS["bob"]) as bob,
    ):
        writers = [await alice.open(f"/alice/w{k}", "wb", replication=1) for k in range(3)]
        for writer in writers[:MAX_WRITING]:
            await writer.write(data)  # whole blocks: allocated and sent at once
        with pytest.raises(BusyError, match="max_writing_per_user"):
            await writers[2].write(data)
        await writers[2].abort()
        # Bob writes as much as he likes meanwhile.
        for k in range(MAX_WRITING + 1):
            await bob.write_file(f"/bob/b{k}", data, replication=1)
        for writer in writers[:MAX_WRITING]:
            await writer.write(data)  # the files already being written go on
            await writer.close()
        await alice.write_file("/alice/after", data, replication=1)
        for k in range(MAX_WRITING):
            assert await alice.read_file(f"/alice/w{k}") == data + data
        assert not await alice.exists("/alice/w2")


async def test_requests_past_the_in_flight_limit_wait_and_are_all_answered(
    limited: DataCluster,
) -> None:
    """Two connections of one user with many lookups at once, ten times the limit: the
    namenode reads them as answers leave, and every one is answered right."""
    address = limited.namenode.address
    await _homes(address)
    async with Client(address, token=TOKENS["alice"]) as setup:
        for k in range(8):
            await setup.create(f"/alice/f{k}")
    async with (
        Client(address, token=TOKENS["alice"]) as one,
        Client(address, token=TOKENS["alice"]) as two,
    ):
        lookups = [
            fs.stat(f"/alice/f{k % 8}") for k in range(20 * MAX_INFLIGHT) for fs in (one, two)
        ]
        attrs = await asyncio.wait_for(asyncio.gather(*lookups), 60)
        assert len({a.ino for a in attrs}) == 8


async def test_a_flood_is_held_back_while_another_user_looks_up(
    namenode: NamenodeProcess,
) -> None:
    """Bob floods the namenode with lookups on two connections; alice's lookups, one
    at a time, keep much of their rate, and bob is served meanwhile (held back, not
    refused). Loose bounds, the flood running in the test's own process: the
    benchmark (loadtests/fair_bench.py) measures it with the users apart."""
    address = namenode.address
    await _homes(address)
    async with Client(address) as root:
        await root.create("/alice/target")
        await root.create("/bob/target")
    stop = asyncio.Event()
    flooded = [0]

    async def flood(fs: Client) -> None:
        while not stop.is_set():
            await fs.stat("/bob/target")
            flooded[0] += 1

    async def lookups(fs: Client, seconds: float) -> float:
        n, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            await fs.stat("/alice/target")
            n += 1
        return n / seconds

    async with Client(address, token=TOKENS["alice"]) as alice:
        alone = await lookups(alice, 1.0)
        floods = [Client(address, token=TOKENS["bob"]) for _ in range(2)]
        try:
            tasks = [asyncio.create_task(flood(fs)) for fs in floods for _ in range(64)]
            await asyncio.sleep(0.3)
            during = await lookups(alice, 1.0)
            stop.set()
            await asyncio.gather(*tasks)
        finally:
            for fs in floods:
                await fs.close()
    assert flooded[0] > 0
    assert during > 0.3 * alone, (during, alone)
