"""A lost namenode connection: every waiting call fails with ConnectionLostError, nothing
is logged about futures nobody awaited, closing does not wait for calls that wait at the
namenode, and a closed client leaves nothing behind on its closed event loop."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from plasmafs.client import Client, ConnectionLostError
from plasmafs.client.connection import CLOSE_GRACE
from plasmafs.client.transaction import Transaction
from tests.support.cluster import NamenodeProcess

WAITERS = 16
NOISE = ("never retrieved", "Event loop is closed", "Task was destroyed", "Traceback")


async def _waiting_creates(fs: Client, path: str) -> tuple[Transaction, list[asyncio.Task[Any]]]:
    """A transaction holding `path`, and WAITERS transactions waiting for it at the
    namenode (a minute each), once the namenode has them all."""
    holder = await fs.begin()
    await holder.create(path)
    before = (await fs.request_counts()).get("create", 0)
    waiters = [await fs.begin(lock_wait=60) for _ in range(WAITERS)]
    calls = [asyncio.ensure_future(t.create(path)) for t in waiters]
    async with asyncio.timeout(30):
        while (await fs.request_counts()).get("create", 0) < before + WAITERS:
            pass
    assert not any(call.done() for call in calls)
    return holder, calls


@contextmanager
def _loop_errors() -> Iterator[list[dict[str, Any]]]:
    """What the running loop's exception handler is handed meanwhile."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: seen.append(context))
    try:
        yield seen
    finally:
        loop.set_exception_handler(previous)


async def test_every_waiting_call_fails_with_connection_lost(namenode: NamenodeProcess) -> None:
    fs = Client(namenode.address, connect_timeout=0.5)
    try:
        with _loop_errors() as errors:
            _, calls = await _waiting_creates(fs, "/held")
            # A caller that gives up, and requests that never leave the client: the
            # connection dies before its writer runs again (kill9 blocks the loop).
            gave_up = calls.pop()
            gave_up.cancel()
            unsent = (await fs.begin()).getattr(1)
            namenode.kill9()
            for call in calls:
                with pytest.raises(ConnectionLostError):
                    await call
            with pytest.raises(ConnectionLostError):
                await unsent
            with pytest.raises(asyncio.CancelledError):
                await gave_up
            with pytest.raises(ConnectionLostError):
                await fs.getattr(1)  # reconnecting fails too: nobody listens
            del calls, unsent, gave_up
            gc.collect()
        assert [e["message"] for e in errors] == []
    finally:
        await fs.close()


async def test_closing_with_calls_waiting_at_the_namenode_ends_them_at_once(
    namenode: NamenodeProcess,
) -> None:
    fs, other = Client(namenode.address), Client(namenode.address)
    try:
        _, calls = await _waiting_creates(fs, "/held")
        # Not cut after the grace period: the namenode ends the stream as soon as the
        # client has ended its side, aborting the transactions first.
        async with asyncio.timeout(CLOSE_GRACE / 2):
            await fs.close()
        for call in calls:
            with pytest.raises(ConnectionLostError):
                await call
        await other.create("/held")  # the holder's transaction is gone
    finally:
        await fs.close()
        await other.close()


# A client in its own process, so that its stderr shows what asyncio and gRPC print at
# loop close and interpreter exit. First it has calls waiting at the namenode when that
# is killed; then, on a restarted namenode, clients on one loop after another: busy ones
# that close when done, and ones that close while their calls wait at the namenode.
_CLIENT = textwrap.dedent(
    """
    import asyncio, gc, sys
    import uvloop
    from plasmafs.client import Client
    from tests.integration.test_connection_loss import _waiting_creates

    address = sys.argv[1]

    async def lost():
        fs = Client(address)
        _, calls = await _waiting_creates(fs, "/held")
        unsent = (await fs.begin()).getattr(1)
        print("READY", flush=True)
        assert sys.stdin.readline() == "KILLED\\n"  # blocks the loop: nothing is sent
        results = await asyncio.gather(*calls, unsent, return_exceptions=True)
        print(" ".join(type(r).__name__ for r in results), flush=True)
        await fs.close()

    async def abandon(path):
        fs = Client(address)
        _, calls = await _waiting_creates(fs, path)
        await fs.close()
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(type(r).__name__ == "ConnectionLostError" for r in results), results

    async def busy():
        fs = Client(address)
        try:
            async def worker():
                async with fs.transaction() as t:
                    for _ in range(20):
                        await t.getattr(1)
            await asyncio.gather(*(worker() for _ in range(32)))
        finally:
            await fs.close()

    asyncio.run(lost())
    gc.collect()
    assert sys.stdin.readline() == "GO\\n"
    for k in range(8):
        uvloop.run(busy())
        asyncio.run(abandon(f"/held{k}"))
        asyncio.run(busy())
    gc.collect()
    print("END", flush=True)
    """
)


def test_a_client_process_prints_nothing_when_its_namenode_dies(
    namenode: NamenodeProcess,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLIENT, namenode.address],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "READY\n"
        namenode.kill9()
        proc.stdin.write("KILLED\n")
        proc.stdin.flush()
        outcomes = proc.stdout.readline().split()
        assert outcomes == ["ConnectionLostError"] * (WAITERS + 1)
        namenode.start()
        proc.stdin.write("GO\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out == "END\n", err
    assert proc.returncode == 0, err
    assert not [line for line in err.splitlines() if any(n in line for n in NOISE)], err
