"""The SQL of S3 access keys (sql/0017): add, find, list and revoke."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from plasmafs.core.errors import NotFoundError
from plasmafs.namenode.account_store import Connections, check_id

_COLUMNS = "access_key_id, uid, secret_sealed, created_at, revoked_at"


@dataclass(frozen=True, slots=True)
class S3KeyRow:
    """An access key of user `uid`, its secret sealed; times are time.time() values
    (`revoked` None: live)."""

    access_key_id: str
    uid: int
    sealed: bytes
    created: float
    revoked: float | None


class S3KeyStore:
    """Access keys in PostgreSQL."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections

    async def add(self, access_key_id: str, uid: int, sealed: bytes) -> S3KeyRow:
        """Store a new key of user `uid` (NotFoundError if there is no such user)."""
        check_id(uid, "uid")
        async with self.connections.read_connection() as conn:
            try:
                row = await conn.fetchrow(
                    f"""INSERT INTO s3_keys (access_key_id, uid, secret_sealed)
                        VALUES ($1, $2, $3) RETURNING {_COLUMNS}""",
                    access_key_id,
                    uid,
                    sealed,
                )
            except asyncpg.ForeignKeyViolationError:
                raise NotFoundError(f"no user with uid {uid}") from None
        return _row(row)

    async def get(self, access_key_id: str) -> S3KeyRow | None:
        """The key `access_key_id`, revoked or not, or None."""
        async with self.connections.read_connection() as conn:
            row = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM s3_keys WHERE access_key_id = $1", access_key_id
            )
        return None if row is None else _row(row)

    async def of_user(self, uid: int | None) -> list[S3KeyRow]:
        """The keys of user `uid` (None: of everyone), oldest first."""
        async with self.connections.read_connection() as conn:
            rows = await conn.fetch(
                f"""SELECT {_COLUMNS} FROM s3_keys WHERE $1::bigint IS NULL OR uid = $1
                    ORDER BY created_at, access_key_id""",
                uid,
            )
        return [_row(r) for r in rows]

    async def revoke(self, access_key_id: str) -> S3KeyRow:
        """Revoke a key (again: no change); returns it as now stored."""
        async with self.connections.read_connection() as conn:
            row = await conn.fetchrow(
                f"""UPDATE s3_keys SET revoked_at = coalesce(revoked_at, now())
                    WHERE access_key_id = $1 RETURNING {_COLUMNS}""",
                access_key_id,
            )
        if row is None:
            raise NotFoundError(f"no S3 key {access_key_id}")
        return _row(row)


def _row(row: asyncpg.Record) -> S3KeyRow:
    revoked: datetime | None = row["revoked_at"]
    return S3KeyRow(
        row["access_key_id"],
        row["uid"],
        bytes(row["secret_sealed"]),
        row["created_at"].timestamp(),
        None if revoked is None else revoked.timestamp(),
    )
