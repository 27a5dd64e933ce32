"""Finding the active namenode among several addresses, and waiting through a failover.

A client may know several namenodes (`"host1:7530,host2:7530"`): one active, the
others standbys, which refuse every connection at once (NotActiveError). A connection
is tried to every address at the same time, and the first one the active namenode
admits is kept (the others are closed), so neither a standby nor an unreachable host
delays it; HDFS's RequestHedgingProxyProvider does the same. While no namenode admits
one (the active died and a standby is taking over), rounds are tried again with
jittered, growing pauses, until `failover_timeout` has passed.

Reads of committed state are answered the same by any active namenode, so a read cut
by a failover is sent again on the new connection (`retrying`). A transaction cannot
be: it fails with ConnectionLostError and the caller decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from plasmafs.client.connection import Connection
from plasmafs.core.errors import (
    AuthenticationError,
    ConnectionLostError,
    PlasmaError,
    ShutdownError,
)

if TYPE_CHECKING:
    from plasmafs.core.tls import ChannelTLS

log = logging.getLogger(__name__)

T = TypeVar("T")
FIRST_PAUSE = 0.05  # seconds before the second round
LONGEST_PAUSE = 1.0
_closing: set[asyncio.Future[None]] = set()  # closes of unused connections under way


def is_failover(exc: BaseException) -> bool:
    """True for the errors of a namenode going away or standing by: worth trying the
    next address or the same one again later."""
    return isinstance(exc, (ConnectionLostError, ShutdownError))


async def connect_to_active(
    addresses: list[str],
    connect_timeout: float,
    tls: ChannelTLS | None,
    token: str | None,
    failover_timeout: float,
) -> Connection:
    """A connection the active namenode admitted (see the module's docstring);
    ConnectionLostError once `failover_timeout` has passed without one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + failover_timeout
    pause = FIRST_PAUSE
    while True:
        try:
            return await _one_round(addresses, connect_timeout, tls, token)
        except (ConnectionLostError, ShutdownError) as exc:
            if loop.time() + pause > deadline:
                if failover_timeout > 0:
                    raise ConnectionLostError(
                        f"no active namenode within {failover_timeout:g}s: {exc}"
                    ) from None
                raise
            log.info("no active namenode yet (%s); trying again", exc)
            await asyncio.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(pause * 2, LONGEST_PAUSE)


async def _one_round(
    addresses: list[str], connect_timeout: float, tls: ChannelTLS | None, token: str | None
) -> Connection:
    """The first connection admitted among attempts to every address at once."""
    if len(addresses) == 1:
        return await Connection.open(addresses[0], connect_timeout, tls, token)
    attempts = [
        asyncio.ensure_future(Connection.open(a, connect_timeout, tls, token)) for a in addresses
    ]
    failures: list[BaseException] = []
    kept: list[Connection] = []
    try:
        for finished in asyncio.as_completed(attempts):
            try:
                conn = await finished
            except AuthenticationError:
                raise  # the active namenode refused the credential: no other will take it
            except PlasmaError as exc:
                failures.append(exc)
                continue
            kept.append(conn)
            return conn
    finally:
        for attempt in attempts:
            attempt.add_done_callback(lambda done: _close_unless_kept(done, kept))
    reasons = "; ".join(str(f) for f in failures)
    raise ConnectionLostError(f"no namenode admitted the connection: {reasons}")


def _close_unless_kept(attempt: asyncio.Future[Connection], kept: list[Connection]) -> None:
    """Close a connection admitted besides the one kept (two actives cannot both
    admit, but an attempt may end after the round did)."""
    if attempt.cancelled() or attempt.exception() is not None:
        return
    conn = attempt.result()
    if conn not in kept:
        task = asyncio.ensure_future(conn.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)


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
        except (ConnectionLostError, ShutdownError):
            if failover_timeout <= 0 or loop.time() > deadline:
                raise
            with contextlib.suppress(PlasmaError):
                await drop(conn)
