"""Connections to a replicated PostgreSQL whose DSN names several hosts
(`postgresql://u:p@h1:5432,h2:5432,h3:5432/db?target_session_attrs=read-write`).

asyncpg tries the hosts one after another under one timeout, moving on only when a
host refuses: a host cut off (packets dropped, nothing refused) uses the whole timeout
and the primary behind it is never reached. Here every host is tried at once, each
with its own deadline, and the first that is the primary (read-write) is kept; the
other attempts are cancelled or closed. A DSN of one host (or in key=value form) is
asyncpg's alone.

Every connection made here gives up on its server by itself: TCP keepalives find an
idle peer gone within seconds, and TCP_USER_TIMEOUT ends a connection whose sent data
goes unacknowledged (a commit to a primary whose host was cut off would otherwise
wait for the kernel's retransmissions, a quarter of an hour), so the namenode
reconnects to the new primary instead of hanging on the old one. A busy server
acknowledges at the TCP level all the same: long statements are not cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import asyncpg

CONNECT_TIMEOUT = 5.0  # seconds per host
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES = 2, 1, 3  # seconds, seconds, count
UNACKNOWLEDGED_MS = 5000  # TCP_USER_TIMEOUT


def hosts_of(dsn: str) -> list[str]:
    """One DSN per host of a URL-form `dsn` naming several (else [dsn])."""
    scheme, sep, rest = dsn.partition("://")
    if not sep:
        return [dsn]
    authority, slash, tail = rest.partition("/")
    user, at, hosts = authority.rpartition("@")
    if "," not in hosts:
        return [dsn]
    return [f"{scheme}://{user}{at}{host}{slash}{tail}" for host in hosts.split(",") if host]


async def connect(dsn: str | None, **kwargs: Any) -> asyncpg.Connection:
    """A connection to the host of `dsn` that qualifies (for a DSN naming several, the
    first to answer as its target_session_attrs asks), each host within `timeout`
    (CONNECT_TIMEOUT unless given). No `dsn`: the PG* variables, as asyncpg reads them."""
    kwargs.setdefault("timeout", CONNECT_TIMEOUT)
    candidates = hosts_of(dsn) if dsn else []
    if len(candidates) <= 1:
        return _give_up_when_gone(await asyncpg.connect(dsn, **kwargs))
    attempts = [asyncio.ensure_future(asyncpg.connect(one, **kwargs)) for one in candidates]
    for attempt in attempts:
        attempt.add_done_callback(_retrieve)
    winner: asyncpg.Connection | None = None
    errors: list[BaseException] = []
    try:
        for finished in asyncio.as_completed(attempts):
            try:
                winner = await finished
                return _give_up_when_gone(winner)
            except Exception as exc:  # that host failed or is not the primary: others may do
                errors.append(exc)
    finally:
        for attempt in attempts:
            if not attempt.done():
                attempt.cancel()
            elif (
                not attempt.cancelled()
                and attempt.exception() is None
                and attempt.result() is not winner
            ):
                attempt.result().terminate()  # a second success: not needed
    raise errors[-1]


def _retrieve(attempt: asyncio.Future[asyncpg.Connection]) -> None:
    """Mark a lost attempt's failure as seen (it was one host of several)."""
    if not attempt.cancelled():
        with contextlib.suppress(Exception):
            attempt.exception()


def _give_up_when_gone(conn: asyncpg.Connection) -> asyncpg.Connection:
    """Set `conn`'s TCP keepalives and user timeout (see the module's docstring)."""
    transport = getattr(conn, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return conn  # a Unix socket: the server's host is this one
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, UNACKNOWLEDGED_MS)
    return conn
