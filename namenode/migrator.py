"""Applies the ordered SQL migrations shipped in plasmafs.sql, once, under an advisory lock.

Each migration runs in its own transaction together with its row in
`schema_migrations`, so a crash leaves either the whole migration or none of it.
Running the migrator again is a no-op; a recorded migration whose file changed is an
error (landed migrations are never edited).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

from plasmafs.core.errors import ConfigError, StorageError
from plasmafs.namenode import pg_connect

# An arbitrary constant shared by every namenode of a database: "pfs-mig" in ASCII.
MIGRATION_LOCK_KEY = 0x7066732D6D6967
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the file's text."""
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations() -> list[Migration]:
    """Every migration shipped with the package, in order."""
    found: list[Migration] = []
    for entry in resources.files("plasmafs.sql").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise ConfigError(f"migration numbers are not 1..n without gaps: {versions}")
    return found


def schema_version() -> int:
    """The schema version this code runs on: its newest migration's number."""
    return len(load_migrations())


async def migrate_database(dsn: str | None) -> list[int]:
    """Connect to `dsn` (None: the PG* variables), check that it can hold a namespace,
    apply the missing migrations; return the versions applied now."""
    try:
        conn = await pg_connect.connect(dsn)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        encoding = await conn.fetchval("SHOW server_encoding")
        if encoding.upper() not in ("UTF8", "UTF-8"):
            raise ConfigError(f"the database encoding must be UTF8, not {encoding}")
        return await migrate(conn)
    finally:
        await conn.close()


async def migrate(conn: asyncpg.Connection) -> list[int]:
    """Apply the missing migrations on `conn`; return the versions applied now."""
    migrations = load_migrations()
    applied_now: list[int] = []
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version    integer     NOT NULL,
                   name       text        NOT NULL,
                   checksum   text        NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now(),
                   CONSTRAINT schema_migrations_pkey PRIMARY KEY (version))"""
        )
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
        recorded = {r["version"]: r["checksum"] for r in rows}
        known = {m.version for m in migrations}
        unknown = sorted(set(recorded) - known)
        if unknown:
            raise ConfigError(
                f"database has migrations {unknown} this namenode does not know; "
                "it is older than the schema"
            )
        for m in migrations:
            if m.version in recorded:
                if recorded[m.version] != m.checksum:
                    raise ConfigError(
                        f"migration {m.version:04d}_{m.name} differs from the one applied"
                    )
                continue
            async with conn.transaction():
                await conn.execute(m.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    m.version,
                    m.name,
                    m.checksum,
                )
            applied_now.append(m.version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    return applied_now
