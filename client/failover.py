"""Finding the active namenode among several addresses, and waiting through a failover.

A client may know several namenodes (`"host1:7530,host2:7530"`): one active, the
others standbys, which refuse every connection at once (NotActiveError). Every address
is tried at the same time, each again with jittered, growing pauses while it refuses
or cannot be reached, and the first connection the active namenode admits is kept
(the other attempts are cancelled), so neither a standby nor an unreachable host
delays it; HDFS's RequestHedgingProxyProvider does the same. After `failover_timeout`
seconds without one (a takeover takes a few), the client gives up.

Reads of committed state are answered the same by any active namenode, so a read cut
by a failover is sent again on the new connection (`retrying`). A transaction cannot
be: it fails with ConnectionLostError and the caller decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from plasmafs.client.connection import Connection
from plasmafs.core.errors import (
    FAILOVER_ERRORS,
    AuthenticationError,
    ConnectionLostError,
    PlasmaError,
)

if TYPE_CHECKING:
    from plasmafs.core.tls import ChannelTLS

T = TypeVar("T")
FIRST_PAUSE = 0.05  # seconds before an address is tried again the first time
# A standby answers at once, so short pauses cost it little; the pause (jittered up to
# 1.5x) adds to how long a failover looks to a client.
LONGEST_PAUSE = 0.4


async def connect_to_active(
    addresses: list[str],
    connect_timeout: float,
    tls: ChannelTLS | None,
    token: str | None,
    failover_timeout: float,
) -> Connection:
    """A connection the active namenode admitted (see the module's docstring);
    ConnectionLostError once every address failed and `failover_timeout` has passed."""
    deadline = asyncio.get_running_loop().time() + failover_timeout
    if len(addresses) == 1:
        return await _keep_trying(addresses[0], connect_timeout, tls, token, deadline)
    attempts = {
        asyncio.ensure_future(_keep_trying(a, connect_timeout, tls, token, deadline)): a
        for a in addresses
    }
    pending = set(attempts)
    failures: list[str] = []
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for attempt in done:
                failure = attempt.exception()
                if failure is None:
                    return attempt.result()
                if isinstance(failure, AuthenticationError):
                    raise failure  # the active namenode refused the credential: so would any
                failures.append(f"{attempts[attempt]}: {failure}")
    finally:
        for attempt in pending:
            attempt.cancel()
        settled = await asyncio.gather(*pending, return_exceptions=True)
        for extra in settled:  # admitted while the kept one was: cannot be two actives,
            if isinstance(extra, Connection):  # but a standby may have just taken over
                await extra.close()
    raise ConnectionLostError("no active namenode: " + "; ".join(failures))


async def _keep_trying(
    address: str,
    connect_timeout: float,
    tls: ChannelTLS | None,
    token: str | None,
    deadline: float,
) -> Connection:
    """A connection to `address`, tried again with jittered, growing pauses while it
    stands by or cannot be reached, until `deadline` (loop time)."""
    loop = asyncio.get_running_loop()
    pause = FIRST_PAUSE
    while True:
        try:
            return await Connection.open(address, connect_timeout, tls, token)
        except FAILOVER_ERRORS:
            if loop.time() + pause > deadline:
                raise
        await asyncio.sleep(pause * random.uniform(0.5, 1.5))
        pause = min(pause * 2, LONGEST_PAUSE)


async def retrying(
    connection: Callable[[], Awaitable[Connection]],
    drop: Callable[[Connection], Awaitable[None]],
    read: Callable[[Connection], Awaitable[T]],
    failover_timeout: float,
) -> T:
    """`read` on the client's connection, sent again on a new connection when it was
    cut by a failover (until `failover_timeout` has passed)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + failover_timeout
    while True:
        conn = await connection()
        try:
            return await read(conn)
        except FAILOVER_ERRORS:
            if failover_timeout <= 0 or loop.time() > deadline:
                raise
            with contextlib.suppress(PlasmaError):
                await drop(conn)


@dataclass(frozen=True, slots=True)
class NamenodeRole:
    """What one namenode address answers: "active" (with its term and since when, as
    time.time()), "standby", or "not answering" (with why)."""

    address: str
    role: str
    term: int = 0
    since: float = 0.0
    detail: str = ""


async def namenode_roles(
    addresses: list[str], connect_timeout: float, tls: ChannelTLS | None, token: str | None
) -> list[NamenodeRole]:
    """Every namenode's role, each asked on its own, at the same time."""

    async def ask(address: str) -> NamenodeRole:
        try:
            conn = await Connection.open(address, connect_timeout, tls, token)
        except AuthenticationError:
            raise
        except PlasmaError as exc:
            role = "standby" if "standby" in str(exc) else "not answering"
            return NamenodeRole(address, role, detail=str(exc))
        try:
            reply = await conn.ping()
        except PlasmaError as exc:
            return NamenodeRole(address, "not answering", detail=str(exc))
        finally:
            await conn.close()
        return NamenodeRole(address, "active", reply.term, reply.active_since_ns / 1e9)

    return list(await asyncio.gather(*(ask(a) for a in addresses)))
