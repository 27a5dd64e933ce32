"""File locks on a real namenode between clients: conflicts and F_GETLK's answer,
waits granted and withdrawn, a holder killed with -9, a lock lost with its
connection, and who may lock what."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from plasmafs.client import Client
from plasmafs.client.file_locks import EOF, FLOCK, READ, UNLOCK, WRITE
from plasmafs.core.errors import LockedError, LockLostError, NotFoundError, PermissionError
from tests.conftest import NamenodeProcess
from tests.support.accounts import TOKENS


async def test_conflicts_between_clients(fs: Client, alice: Client) -> None:
    ino = (await fs.create("/f", 0o666)).ino
    await alice.set_lock("/f", WRITE, start=100, end=199, pid=4242)
    with pytest.raises(LockedError):
        await fs.set_lock(ino, READ, start=150, end=150)
    await fs.set_lock(ino, WRITE, start=0, end=99)  # ranges apart
    conflict = await fs.test_lock(ino, READ, start=0, end=EOF)
    assert conflict is not None and (conflict.start, conflict.end, conflict.pid) == (100, 199, 4242)
    assert not conflict.same_session
    assert await alice.test_lock(ino, READ, start=200) is None
    # flock locks never meet POSIX ones
    await fs.set_lock(ino, WRITE, family=FLOCK)
    with pytest.raises(LockedError):
        await alice.set_lock(ino, READ, family=FLOCK)
    await fs.set_lock(ino, UNLOCK, family=FLOCK)
    await alice.set_lock(ino, READ, family=FLOCK)
    # owners of one connection are holders of their own
    with pytest.raises(LockedError):
        await alice.set_lock(ino, WRITE, start=0, end=0, owner=2)
    await alice.release_locks(ino)
    await fs.set_lock(ino, WRITE, start=150, end=150)


async def test_a_wait_is_granted_or_withdrawn(fs: Client, alice: Client) -> None:
    await fs.create("/f", 0o666)
    await alice.set_lock("/f", WRITE)
    waiting = asyncio.create_task(fs.set_lock("/f", WRITE, wait=True))
    with pytest.raises(TimeoutError):  # given up: withdrawn from the namenode's line
        await asyncio.wait_for(fs.set_lock("/f", READ, owner=7, wait=True), 0.3)
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await alice.set_lock("/f", UNLOCK)
    await asyncio.wait_for(waiting, 10)
    blocker = await alice.test_lock("/f", READ)
    assert blocker is not None and blocker.type == WRITE
    await fs.release_locks("/f")
    assert await alice.test_lock("/f", WRITE) is None  # owner 7 holds nothing


async def test_a_killed_holder_lets_the_waiter_in(namenode: NamenodeProcess, fs: Client) -> None:
    await fs.create("/f", 0o666)
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, namenode.address, TOKENS["alice"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert await asyncio.wait_for(holder.stdout.readline(), 60) == b"locked\n"
        with pytest.raises(LockedError):
            await fs.set_lock("/f", WRITE)
        waiting = asyncio.create_task(fs.set_lock("/f", WRITE, wait=True))
        await asyncio.sleep(0.3)
        holder.kill()
        await asyncio.wait_for(waiting, 30)
    finally:
        if holder.returncode is None:
            holder.kill()
        await holder.wait()


HOLDER = """
import sys, time
from plasmafs.client import SyncClient
from plasmafs.client.file_locks import WRITE
fs = SyncClient(sys.argv[1], token=sys.argv[2])
fs.set_lock("/f", WRITE)
print("locked", flush=True)
time.sleep(600)
"""


async def test_a_lock_is_lost_with_its_connection(namenode: NamenodeProcess) -> None:
    async with Client(namenode.address) as fs:
        await fs.create("/f")
        lock = fs.flock("/f")
        async with lock, Client(namenode.address, token=TOKENS["alice"]) as alice:
            with pytest.raises(LockedError):
                await alice.set_lock("/f", READ, family=FLOCK)
        other = Client(namenode.address)
        async with other, fs.flock("/f", shared=True), other.flock("/f", shared=True):
            with pytest.raises(LockedError):
                await other.set_lock("/f", WRITE, family=FLOCK)
        held = fs.flock("/f")
        await held.__aenter__()
        namenode.stop()
        namenode.start()
        with pytest.raises(LockLostError):
            await held.release()


async def test_who_may_lock(fs: Client, alice: Client) -> None:
    await fs.create("/private", 0o600)
    await fs.create("/readable", 0o644)
    with pytest.raises(PermissionError):
        await alice.set_lock("/private", READ)
    await alice.set_lock("/readable", WRITE)  # a descriptor open for reading may lock
    with pytest.raises(NotFoundError):
        await fs.set_lock(2**40, READ)
