"""The balancer with real processes: two full datanodes and two new empty ones reach
the threshold while clients read and write, through the library and `pfs admin
balance`; a datanode killed mid-run leaves every block at its replication; fsck is
healthy at the end."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client
from tests.support.cli_runner import assert_error, clean_env, run_pfs
from tests.support.heal_cluster import (
    BS,
    HealCluster,
    assert_healthy,
    fully_replicated,
    heal_client,
    heal_cluster,
)
from tests.support.waiting import eventually

THRESHOLD = 0.10


@pytest.fixture
def two_full(dsn: str, tmp_path: Path) -> Iterator[HealCluster]:
    """Two datanodes (their volumes filled by the tests), two more added empty."""
    with heal_cluster(dsn, tmp_path, locations=("", "")) as cluster:
        yield cluster


async def fill_two(fs: Client, singles: bool = True) -> dict[str, bytes]:
    """About 70% of the two datanodes: files of 8 blocks, with two replicas (a quarter
    with one, if `singles`)."""
    contents = {}
    for k in range(48):
        path = f"/old/f{k}"
        contents[path] = os.urandom(8 * BS - k)
    await fs.mkdir("/old")
    for k, (path, data) in enumerate(contents.items()):
        await fs.write_file(path, data, replication=1 if singles and k % 4 == 0 else 2)
    return contents


async def clients_at_work(fs: Client, contents: dict[str, bytes], stop: asyncio.Event) -> int:
    """Read every file again and again, and write new ones, until `stop`; the number of
    files written (each read back). Any error or wrong byte fails the test."""
    written = 0
    await fs.mkdir("/new", parents=True)

    async def reader() -> None:
        while not stop.is_set():
            for path, data in list(contents.items()):
                assert await fs.read_file(path) == data, path

    async def writer() -> None:
        nonlocal written
        while not stop.is_set():
            path, data = f"/new/w{written}", os.urandom(2 * BS + written)
            await fs.write_file(path, data, replication=2)
            assert await fs.read_file(path) == data
            contents[path] = data
            written += 1
            await asyncio.sleep(0.05)

    await asyncio.gather(reader(), writer())
    return written


async def test_new_datanodes_fill_up_to_the_threshold_under_reads_and_writes(
    two_full: HealCluster,
) -> None:
    async with heal_client(two_full) as fs:
        contents = await fill_two(fs)
        two_full.add_datanode("dn3")
        two_full.add_datanode("dn4")
        await eventually(lambda: _live(fs, 4), "four live datanodes", timeout=30, interval=0.1)
        before = await fs.balance(status_only=True)
        assert not before.running and not before.balanced
        assert before.most_used - before.least_used > 0.5

        stop = asyncio.Event()
        work = asyncio.create_task(clients_at_work(fs, contents, stop))
        status = await fs.balance(THRESHOLD)
        assert status.running
        try:

            async def done() -> bool:
                return not (await fs.balance(status_only=True)).running

            await eventually(done, "the run to end", timeout=120, interval=0.2)
        finally:
            stop.set()
            written = await work  # raises what a reader or writer ran into
        assert written > 0
        status = await fs.balance(status_only=True)
        assert status.balanced and status.moves_done > 0 and status.bytes_moved > 0
        assert status.most_used - status.mean_used <= THRESHOLD
        assert status.mean_used - status.least_used <= THRESHOLD
        assert await fully_replicated(fs, list(contents))
        for path, data in contents.items():
            assert await fs.read_file(path) == data, path
        await assert_healthy(fs)

        # The CLI: the same run's state, and its one-line errors.
        env = clean_env(two_full.workdir / "home", two_full.namenode.address)
        shown = run_pfs(env, "admin", "balance", "--status")
        assert shown.rc == 0 and shown.out.startswith("balanced: used "), shown
        again = run_pfs(env, "admin", "balance", timeout=60)  # balanced already: ends at once
        assert again.rc == 0 and again.out.splitlines()[-1].startswith("balanced: "), again
        assert_error(run_pfs(env, "admin", "balance", "--threshold", "0"), "admin", "threshold")
        assert_error(run_pfs(env, "admin", "balance", "--bandwidth", "fast"), "admin", "fast")


async def test_a_datanode_killed_mid_run_leaves_every_block_at_its_replication(
    two_full: HealCluster,
) -> None:
    async with heal_client(two_full) as fs:
        contents = await fill_two(fs, singles=False)  # (a single replica dies with its host)
        fresh = [two_full.add_datanode("dn3"), two_full.add_datanode("dn4")]
        await eventually(lambda: _live(fs, 4), "four live datanodes", timeout=30, interval=0.1)
        # Slowly (a group a second), so that the kill lands mid-run.
        await fs.balance(THRESHOLD, bandwidth=8 * BS)

        async def moving() -> bool:
            return (await fs.balance(status_only=True)).moves_done >= 2

        await eventually(moving, "moves under way", timeout=60, interval=0.1)
        fresh[0].kill9()  # a target of the run's copies, holding moved replicas
        for path, data in contents.items():
            assert await fs.read_file(path) == data, path
        await fs.balance(THRESHOLD)  # full speed from here
        await eventually(
            lambda: fully_replicated(fs, list(contents)),
            "every block at its replication",
            timeout=120,
            interval=0.2,
        )
        for path, data in contents.items():
            assert await fs.read_file(path) == data, path
        await assert_healthy(fs)
        await fs.balance(stop=True)


async def _live(fs: Client, count: int) -> bool:
    return (await fs.fsstat()).live_datanodes == count
