"""The active namenode's lease, kept in PostgreSQL's `namenode_terms` row (sql/0011).

The active namenode renews the lease (`lease_expires`, on PostgreSQL's clock) well
before it runs out; a standby takes the next term, with a lease of its own, only once
the lease has expired. Taking the term waits for group commits of the old term being
written (their row lock), and every later one of the old term is refused (sql/0004),
so at most one namenode's commits land. The lease has a connection of its own, and
every statement a deadline: a connection stuck on a cut network fails the call in
time, is dropped and made again, so the lease never depends on PostgreSQL or this
host noticing a dead TCP peer.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from plasmafs.core.errors import StorageError
from plasmafs.namenode import pg_connect
from plasmafs.namenode.store import domain_errors


@dataclass(frozen=True, slots=True)
class LeaseState:
    """The lease as PostgreSQL has it."""

    term: int
    holder: str  # "<place> <process id>" of the one that took the term ("" before any did)
    holder_address: str  # where it serves clients
    remaining: float  # seconds until it expires (<= 0: expired, anyone may take it)
    taken_at: float  # when the term was taken (time.time())


@dataclass(frozen=True, slots=True)
class Renewal:
    """A renewal's answer: whether the term is still this namenode's, and when the
    PostgreSQL server it reached started (a change means it restarted)."""

    held: bool
    server_started: float


class LeaseStore:
    """Takes, renews, releases and reads the lease over one connection of its own."""

    def __init__(self, dsn: str | None, deadline: float) -> None:
        self._dsn = dsn
        self._deadline = deadline  # seconds any connect or statement may take
        self._conn: asyncpg.Connection | None = None

    async def take(
        self, place: str, holder: str, address: str, ttl: float
    ) -> tuple[int, float] | None:
        """The next term and PostgreSQL's start time if the lease has expired, or was
        held from `place` (this process then holds it for `ttl` seconds); None while
        another's lease runs. `holder` starts with `place`."""
        row = await self._fetchrow(
            """UPDATE namenode_terms
               SET term = term + 1, taken_at = now(), holder = $1, holder_address = $2,
                   lease_expires = now() + make_interval(secs => $3)
               WHERE lease_expires < now() OR split_part(holder, ' ', 1) = $4
               RETURNING term, extract(epoch FROM pg_postmaster_start_time()) AS started""",
            holder,
            address,
            ttl,
            place,
        )
        return None if row is None else (int(row["term"]), float(row["started"]))

    async def renew(self, term: int, ttl: float) -> Renewal:
        """Extend the lease of `term` by `ttl` seconds from now (even if it has just
        expired: nobody took a newer term meanwhile)."""
        row = await self._fetchrow(
            """UPDATE namenode_terms SET lease_expires = now() + make_interval(secs => $2)
               WHERE term = $1
               RETURNING extract(epoch FROM pg_postmaster_start_time()) AS started""",
            term,
            ttl,
        )
        if row is None:
            return Renewal(False, 0.0)
        return Renewal(True, float(row["started"]))

    async def step_past(self, term: int, newer: int) -> bool:
        """Move the term row from `term` (this namenode's) to `newer` (at least `term`)
        and end the lease, so that the next take gives `newer + 1`; False if `term` is
        not the current one."""
        row = await self._fetchrow(
            """UPDATE namenode_terms SET term = $2, lease_expires = '-infinity'
               WHERE term = $1 AND $2 >= term RETURNING 1""",
            term,
            newer,
        )
        return row is not None

    async def release(self, term: int) -> None:
        """End the lease of `term` now: a standby takes over at its next try."""
        await self._fetchrow(
            "UPDATE namenode_terms SET lease_expires = '-infinity' WHERE term = $1 RETURNING 1",
            term,
        )

    async def state(self) -> LeaseState:
        """The lease as it stands."""
        row = await self._fetchrow(
            """SELECT term, holder, holder_address,
                      greatest(extract(epoch FROM lease_expires - now()), -1e9) AS remaining,
                      extract(epoch FROM taken_at) AS taken
               FROM namenode_terms"""
        )
        assert row is not None
        return LeaseState(
            int(row["term"]),
            row["holder"],
            row["holder_address"],
            float(row["remaining"]),
            float(row["taken"]),
        )

    async def close(self) -> None:
        """Drop the connection."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            conn.terminate()

    async def _fetchrow(self, query: str, *args: object) -> asyncpg.Record | None:
        try:
            with domain_errors("namenode lease"):
                if self._conn is None or self._conn.is_closed():
                    self._conn = await pg_connect.connect(
                        self._dsn,
                        timeout=self._deadline,
                        server_settings={"application_name": "pfs-namenode-lease"},
                    )
                return await self._conn.fetchrow(query, *args, timeout=self._deadline)
        except StorageError:
            await self.close()  # it may be stuck: the next call connects anew
            raise
