"""Standby namenodes on one host: a second namenode stands by and takes over, under a
create load through clients that know both, when the active one is killed, stopped or
paused past its lease; no acknowledged create is lost, and an old active that comes
back stands by."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plasmafs.client import Client, ConnectionLostError, PermissionDeniedError
from plasmafs.client.datapath import write_range
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY
from tests.support.cluster import DatanodeProcess, NamenodeProcess
from tests.support.create_load import CreateLoad
from tests.support.mounts import mounted

LEASE_TTL = 1.0  # seconds: takeovers within a few seconds


@dataclass
class Pair:
    """Two namenodes of one database: `active` started first, `standby` after it."""

    active: NamenodeProcess
    standby: NamenodeProcess

    @property
    def addresses(self) -> str:
        """Both, as a client lists them."""
        return f"{self.active.address},{self.standby.address}"


@pytest.fixture
async def pair(dsn: str, tmp_path: Path) -> AsyncIterator[Pair]:
    """An active namenode and a standby, with /load made."""
    env = {
        "PFS_NAMENODE_LEASE_TTL": str(LEASE_TTL),
        "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(TEST_BLOCKSIZE),
        "PFS_NAMENODE_HEARTBEAT_MS": "200",
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    active = NamenodeProcess(dsn, tmp_path / "a", env=env)
    standby = NamenodeProcess(dsn, tmp_path / "b", env=env)
    try:
        await asyncio.to_thread(active.start)
        await asyncio.to_thread(standby.start)
        async with Client(active.address) as fs:
            await fs.mkdir("/load")
        yield Pair(active, standby)
    finally:
        for namenode in (active, standby):
            if namenode.proc is not None and namenode.proc.poll() is None:
                os.kill(namenode.proc.pid, signal.SIGCONT)  # a paused one must hear SIGTERM
            namenode.stop()


async def _refused_as_standby(address: str) -> None:
    with pytest.raises(ConnectionLostError, match="standby"):
        async with Client(address, connect_timeout=5) as fs:
            await fs.ping()


async def _until_logged(namenode: NamenodeProcess, text: str, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while text not in namenode.log_tail(400):
            await asyncio.sleep(0.05)


async def _all_present(addresses: str, load: CreateLoad) -> None:
    async with Client(addresses) as fs:
        names = set(await fs.listdir("/load"))
    missing = set(load.acknowledged) - names
    assert not missing, f"{len(missing)} acknowledged creates lost"


async def test_a_standby_refuses_clients_and_names_the_active_one(pair: Pair) -> None:
    await _refused_as_standby(pair.standby.address)
    async with Client(pair.addresses) as fs:  # the client finds the active one
        await fs.create("/load/x")
        assert (await fs.connection()).address == pair.active.address


async def test_the_standby_takes_over_when_the_active_is_killed(pair: Pair) -> None:
    load = CreateLoad(pair.addresses)
    try:
        load.start()
        await load.wait_for_progress()
        pair.active.kill9()
        killed = time.monotonic()
        await load.wait_for_progress()
        assert any(t > killed for t in load.acknowledged_at)
        await _until_logged(pair.standby, "namenode active")
        await load.wait_for_progress()
        await load.stop()
        await _all_present(pair.addresses, load)
        # The old active comes back as a standby, never as a second active one.
        await asyncio.to_thread(pair.active.start)
        await _until_logged(pair.active, "standing by")
        await _refused_as_standby(pair.active.address)
    finally:
        await load.stop()


async def test_a_stopped_active_hands_its_lease_over_at_once(pair: Pair) -> None:
    load = CreateLoad(pair.addresses)
    try:
        load.start()
        await load.wait_for_progress()
        await asyncio.to_thread(pair.active.stop)
        assert "lease of term" in pair.active.log_tail(100)  # released, not left to expire
        await load.wait_for_progress()
        await load.stop()
        await _all_present(pair.addresses, load)
    finally:
        await load.stop()


@pytest.mark.slow
async def test_an_active_paused_past_its_lease_is_deposed_and_stands_by(pair: Pair) -> None:
    load = CreateLoad(pair.addresses)
    assert pair.active.proc is not None
    try:
        load.start()
        await load.wait_for_progress()
        os.kill(pair.active.proc.pid, signal.SIGSTOP)
        try:
            await _until_logged(pair.standby, "namenode active")
            await load.wait_for_progress()
        finally:
            os.kill(pair.active.proc.pid, signal.SIGCONT)
        await _until_logged(pair.active, "no longer the active one")
        await _until_logged(pair.active, "standing by")
        await _refused_as_standby(pair.active.address)
        await load.wait_for_progress()
        await load.stop()
        await _all_present(pair.addresses, load)
    finally:
        await load.stop()


async def test_a_namenode_restarted_on_its_address_takes_over_at_once(
    dsn: str, tmp_path: Path
) -> None:
    # With a lease of ten minutes, only the proof of its address explains a takeover.
    env = {"PFS_NAMENODE_LEASE_TTL": "600"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = NamenodeProcess(dsn, tmp_path / "a", env=env)
    other = NamenodeProcess(dsn, tmp_path / "b", env=env)
    try:
        await asyncio.to_thread(first.start)
        async with Client(first.address) as fs:
            await fs.create("/before")
        first.kill9()
        await asyncio.to_thread(other.start)  # another address proves nothing: it waits
        await _refused_as_standby(other.address)
        await asyncio.to_thread(first.start)
        async with Client(first.address) as fs:
            await fs.create("/after")
            assert await fs.exists("/before")
        await _refused_as_standby(other.address)
    finally:
        first.stop()
        other.stop()


async def test_datanodes_follow_the_takeover_and_data_goes_on(pair: Pair, tmp_path: Path) -> None:
    registries = f"{pair.active.registry_address},{pair.standby.registry_address}"
    datanodes = [
        DatanodeProcess(tmp_path / f"dn{k}", registries, TEST_CAPACITY, TEST_BLOCKSIZE)
        for k in (1, 2)
    ]
    try:
        for datanode in datanodes:
            await asyncio.to_thread(datanode.start)
        before = os.urandom(3 * TEST_BLOCKSIZE + 5)
        async with Client(pair.addresses) as fs:
            await fs.write_file("/load/before", before, replication=2)
            pair.active.kill9()
            after = os.urandom(2 * TEST_BLOCKSIZE)
            async with asyncio.timeout(60):  # both datanodes heard from by the new active
                while (await fs.fsstat()).live_datanodes < 2:
                    await asyncio.sleep(0.1)
            await fs.write_file("/load/after", after, replication=2)
            assert await fs.read_file("/load/before") == before
            assert await fs.read_file("/load/after") == after
            assert (await fs.connection()).address == pair.standby.address
    finally:
        for datanode in datanodes:
            datanode.stop()


async def test_snapshots_and_their_shared_blocks_survive_a_takeover(
    pair: Pair, tmp_path: Path
) -> None:
    registries = f"{pair.active.registry_address},{pair.standby.registry_address}"
    datanode = DatanodeProcess(tmp_path / "dn", registries, TEST_CAPACITY, TEST_BLOCKSIZE)
    try:
        await asyncio.to_thread(datanode.start)
        kept = os.urandom(4 * TEST_BLOCKSIZE)
        async with Client(pair.addresses) as fs:
            await fs.write_file("/load/f", kept, replication=1)
            await (await fs.snapshots()).create("/load", "s")
            await fs.unlink("/load/f")  # only the snapshot names the blocks now
            pair.active.kill9()
            async with asyncio.timeout(60):
                while (await fs.fsstat()).live_datanodes < 1:
                    await asyncio.sleep(0.1)
            assert (await fs.connection()).address == pair.standby.address
            assert [s.name for s in await (await fs.snapshots()).list("/load")] == ["s"]
            # The new active counts the snapshot's blocks as used: new data lands elsewhere.
            await fs.write_file("/load/g", os.urandom(TEST_CAPACITY // 2), replication=1)
            assert await fs.read_file("/load/.snapshot/s/f") == kept
            items = [item async for item in fs.fsck("/")]
            assert items[-1].record_errors == ()  # type: ignore[union-attr]
    finally:
        datanode.stop()


async def test_a_mount_goes_on_across_a_takeover(pair: Pair, tmp_path: Path) -> None:
    with mounted(pair.addresses, tmp_path / "mnt") as mount:
        load = mount.path / "load"
        fd = os.open(load / "before", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"written before")
            os.fsync(fd)  # durable: on the namenode before the kill
        finally:
            os.close(fd)
        (load / "queued").write_bytes(b"queued")  # may still be in the write-behind queue
        pair.active.kill9()
        # Requests made while no namenode is active wait for the standby to take over.
        names = await asyncio.to_thread(os.listdir, load)
        assert "before" in names
        assert (load / "before").read_bytes() == b"written before"
        (load / "after").write_bytes(b"written after")
        os.mkdir(load / "dir")
        # What the queue held when the session went is lost as in a crash, never
        # silently: the next fsync says so.
        fd = os.open(load / "after", os.O_RDONLY)
        try:
            os.fsync(fd)
            reported = False
        except OSError as exc:
            assert exc.errno == errno.EIO
            reported = True
        finally:
            os.close(fd)
        assert "queued" in os.listdir(load) or reported
    async with Client(pair.addresses) as fs:
        assert await fs.read_file("/load/after") == b"written after"
        assert (await fs.stat("/load/dir")).is_dir


async def test_write_tickets_of_a_deposed_namenode_are_refused_by_datanodes(
    pair: Pair, tmp_path: Path
) -> None:
    registries = f"{pair.active.registry_address},{pair.standby.registry_address}"
    datanode = DatanodeProcess(tmp_path / "dn", registries, TEST_CAPACITY, TEST_BLOCKSIZE)
    old = Client(pair.active.address)  # the active namenode's, and its alone
    new = Client(pair.addresses)
    assert pair.active.proc is not None
    try:
        await asyncio.to_thread(datanode.start)
        t = await old.begin()
        attr = await t.create("/load/fenced", replication=1)
        blocks = await t.allocate(attr.ino, 0, 2)  # write tickets of the first term
        replica = blocks.extents[0].replicas[0]
        os.kill(pair.active.proc.pid, signal.SIGSTOP)  # paused past its lease
        try:
            async with asyncio.timeout(60):  # the new active heard from the datanode
                while (await new.fsstat()).live_datanodes < 1:
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # a heartbeat or two: the datanode knows the term
            chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
            await chunks.put(os.urandom(TEST_BLOCKSIZE))
            await chunks.put(None)
            with pytest.raises(PermissionDeniedError, match="write ticket of namenode term"):
                await write_range(new.data, replica, TEST_BLOCKSIZE, 0, 1, chunks)
        finally:
            os.kill(pair.active.proc.pid, signal.SIGCONT)
        async with new.transaction() as t2:  # the new active's tickets are good
            mine = await t2.create("/load/fresh", replication=1)
        await new.write_file("/load/fresh", os.urandom(TEST_BLOCKSIZE), replication=1)
        assert mine.ino
    finally:
        await old.close()
        await new.close()
        datanode.stop()
