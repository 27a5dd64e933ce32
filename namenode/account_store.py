"""The SQL of accounts: users, groups, membership and credentials (sql/0007).

Rows become the records below here and nowhere else. The violation of a named
constraint becomes the plasmafs error of what was refused (a taken name, an unknown
group); every other driver error goes through the store's `domain_errors`. Names and
ids are checked here first, so the refusals name the value; the constraints are the
backstop. A credential's secret leaves this module only inside the token returned once.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import asyncpg

from plasmafs.core.credentials import (
    MAX_CREDENTIAL_ID,
    format_token,
    new_secret,
    secret_digest,
)
from plasmafs.core.errors import (
    BusyError,
    ExistsError,
    InvalidArgumentError,
    NotFoundError,
    PlasmaError,
)
from plasmafs.namenode.store import domain_errors

MAX_ID = 2**32 - 1
FIRST_AUTO_ID = 1000  # below: system accounts, as useradd's UID_MIN
MAX_LABEL = 200
_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")  # the CHECK of sql/0007, matched whole

_USER_COLUMNS = "uid, name, gid, superuser, callers_first_uid, callers_last_uid"
_CREDENTIAL_COLUMNS = "credential_id, uid, secret_sha256, label, expires_at, revoked_at, created_at"

# The first id >= $1 that no group has: $1 itself, or one past a group's gid.
_FREE_GID = """
SELECT min(c.n)
FROM (SELECT $1::bigint AS n UNION ALL SELECT gid + 1 FROM groups WHERE gid >= $1) c
WHERE NOT EXISTS (SELECT 1 FROM groups g WHERE g.gid = c.n)
"""
_NEXT_UID = f"""
SELECT coalesce(max(uid) + 1, {FIRST_AUTO_ID}) FROM users WHERE uid >= {FIRST_AUTO_ID}
"""


@dataclass(frozen=True, slots=True)
class GroupRow:
    """A group."""

    gid: int
    name: str


@dataclass(frozen=True, slots=True)
class UserRow:
    """A user; `gid` is its primary group; `callers`, the first and last local uid its
    connections may act for (None: none; sql/0014)."""

    uid: int
    name: str
    gid: int
    superuser: bool
    callers: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class CredentialRow:
    """A credential as stored: the SHA-256 of its secret, never the secret. Times are
    time.time() values; None: never expires, or not revoked (or, for `created`, not
    known)."""

    credential_id: int
    uid: int
    secret_sha256: bytes
    label: str
    expires: float | None
    revoked: float | None
    created: float | None = None


@dataclass(frozen=True, slots=True)
class AccountRows:
    """Every account record, read in one snapshot. `members` holds (gid, uid) pairs of
    supplementary groups."""

    groups: tuple[GroupRow, ...]
    users: tuple[UserRow, ...]
    members: tuple[tuple[int, int], ...]
    credentials: tuple[CredentialRow, ...]


@dataclass(frozen=True, slots=True)
class NewUser:
    """What add_user wrote: the user, its group when one was made for it, and the
    supplementary groups it joined."""

    user: UserRow
    group: GroupRow | None
    groups: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IssuedCredential:
    """A new credential: its record, and the token, which exists only here."""

    row: CredentialRow
    token: str

    @property
    def credential_id(self) -> int:
        """The credential's id."""
        return self.row.credential_id


class Connections(Protocol):
    """Where account queries get a connection: the namenode's Store, or OneConnection."""

    def read_connection(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A connection whose driver errors become plasmafs errors."""
        ...


class OneConnection:
    """One open connection as a `Connections` (for tools and test fixtures)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    @contextlib.asynccontextmanager
    async def read_connection(self) -> AsyncIterator[asyncpg.Connection]:
        """The connection, with driver errors turned into plasmafs errors."""
        with domain_errors("accounts"):
            yield self._conn


def check_name(name: str, what: str) -> str:
    """A user or group name: lower-case letters, digits, `_`, `.` and `-`, not starting
    with a digit, `.` or `-`, at most 32 characters."""
    if not _NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"bad {what} name {name!r}: use at most 32 of a-z 0-9 _ . -, "
            "starting with a letter or _"
        )
    return name


def check_id(value: int, what: str) -> int:
    """A uid or gid: 0 to 2^32-1."""
    if not 0 <= value <= MAX_ID:
        raise InvalidArgumentError(f"{what} {value} is outside 0..{MAX_ID}")
    return value


def check_uid_range(uids: tuple[int, int]) -> tuple[int, int]:
    """A range of uids (first, last), both included: first <= last, both uids."""
    first, last = check_id(uids[0], "uid"), check_id(uids[1], "uid")
    if first > last:
        raise InvalidArgumentError(f"uid range {first}-{last}: the first is past the last")
    return first, last


def check_label(label: str) -> str:
    """A credential's label: printable, at most MAX_LABEL characters."""
    if len(label) > MAX_LABEL or not label.isprintable():
        raise InvalidArgumentError(f"a credential label is printable, at most {MAX_LABEL}")
    return label


def check_expires(expires: float | None) -> float | None:
    """A credential's expiry (time.time()): in the future, or None (never)."""
    if expires is not None and expires <= time.time():
        raise InvalidArgumentError("a credential's expiry must lie in the future")
    return expires


@contextlib.contextmanager
def _refusals(**errors: PlasmaError) -> Iterator[None]:
    """Raise the error given for the named constraint a statement violated."""
    try:
        yield
    except asyncpg.IntegrityConstraintViolationError as exc:
        error = errors.get(getattr(exc, "constraint_name", None) or "")
        if error is None:
            raise
        raise error from exc


class AccountStore:
    """Account queries over the namenode's store (its only writer)."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections

    async def load(self) -> AccountRows:
        """Every account record, credentials revoked or expired included."""
        async with (
            self.connections.read_connection() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            groups = await conn.fetch("SELECT gid, name FROM groups ORDER BY gid")
            users = await conn.fetch(f"SELECT {_USER_COLUMNS} FROM users ORDER BY uid")
            members = await conn.fetch("SELECT gid, uid FROM group_members ORDER BY gid, uid")
            credentials = await conn.fetch(
                f"SELECT {_CREDENTIAL_COLUMNS} FROM credentials ORDER BY credential_id"
            )
        return AccountRows(
            tuple(GroupRow(r["gid"], r["name"]) for r in groups),
            tuple(_user(r) for r in users),
            tuple((r["gid"], r["uid"]) for r in members),
            tuple(_credential(r) for r in credentials),
        )

    # --- groups ---------------------------------------------------------------------------

    async def add_group(
        self, name: str, gid: int | None = None, members: Sequence[int] = ()
    ) -> GroupRow:
        """A new group with the users `members` (uids) in it, all or nothing; without
        `gid`, the first free one from 1000."""
        check_name(name, "group")
        if gid is not None:
            check_id(gid, "gid")
        async with self.connections.read_connection() as conn, conn.transaction():
            await _lock_accounts(conn)
            if gid is None:
                gid = int(await conn.fetchval(_FREE_GID, FIRST_AUTO_ID))
            await _insert_group(conn, name, gid)
            await _insert_members(conn, [(gid, uid) for uid in members])
        return GroupRow(gid, name)

    async def remove_group(self, gid: int) -> None:
        """Remove a group and its memberships; refused while it is a user's primary group."""
        check_id(gid, "gid")
        async with self.connections.read_connection() as conn, conn.transaction():
            await _lock_accounts(conn)
            primary = await conn.fetch(
                "SELECT name FROM users WHERE gid = $1 ORDER BY name LIMIT 4", gid
            )
            if primary:
                names = ", ".join(r["name"] for r in primary[:3])
                more = ", ..." if len(primary) > 3 else ""
                raise BusyError(
                    f"group {gid} is the primary group of {names}{more}; "
                    "give them another primary group first"
                )
            if await conn.fetchval("DELETE FROM groups WHERE gid = $1 RETURNING gid", gid) is None:
                raise NotFoundError(f"no group with gid {gid}")

    async def add_members(self, gid: int, uids: Iterable[int]) -> tuple[int, ...]:
        """Make users members of a group; returns those that were not already."""
        pairs = [(gid, uid) for uid in uids]
        async with self.connections.read_connection() as conn, conn.transaction():
            await _lock_accounts(conn)
            added = await _insert_members(conn, pairs)
        return tuple(uid for _, uid in added)

    # --- users ----------------------------------------------------------------------------

    async def add_user(
        self,
        name: str,
        uid: int | None = None,
        gid: int | None = None,
        groups: Sequence[int] = (),
        superuser: bool = False,
    ) -> NewUser:
        """A new user. Without `uid`: one past the highest from 1000. Without `gid`: the
        group named like the user, made with gid = uid when there is none. `groups` are
        supplementary groups to join."""
        check_name(name, "user")
        for value, what in ((uid, "uid"), (gid, "gid"), *((g, "gid") for g in groups)):
            if value is not None:
                check_id(value, what)
        async with self.connections.read_connection() as conn, conn.transaction():
            await _lock_accounts(conn)
            made: GroupRow | None = None
            if gid is None:
                gid = await conn.fetchval("SELECT gid FROM groups WHERE name = $1", name)
            if uid is None:
                uid = int(await conn.fetchval(_NEXT_UID))
                if gid is None:  # a group will be made with gid = uid: skip taken gids
                    uid = int(await conn.fetchval(_FREE_GID, uid))
                check_id(uid, "uid")
            if gid is None:
                gid = uid
                made = GroupRow(gid, name)
                await _insert_group(conn, name, gid)
            with _refusals(
                users_pkey=ExistsError(f"uid {uid} is taken"),
                users_name_key=ExistsError(f"user {name} exists"),
                users_gid_fkey=NotFoundError(f"no group with gid {gid}"),
            ):
                await conn.execute(
                    "INSERT INTO users (uid, name, gid, superuser) VALUES ($1, $2, $3, $4)",
                    uid,
                    name,
                    gid,
                    superuser,
                )
            joined = await _insert_members(conn, [(g, uid) for g in groups if g != gid])
        return NewUser(UserRow(uid, name, gid, superuser), made, tuple(g for g, _ in joined))

    async def set_callers(self, uid: int, callers: tuple[int, int] | None) -> UserRow:
        """Let user `uid`'s connections act for the local uids `callers` (first, last),
        or for none (None); returns the user as now stored."""
        check_id(uid, "uid")
        first, last = (None, None) if callers is None else check_uid_range(callers)
        async with self.connections.read_connection() as conn:
            row = await conn.fetchrow(
                f"""UPDATE users SET callers_first_uid = $2, callers_last_uid = $3
                    WHERE uid = $1 RETURNING {_USER_COLUMNS}""",
                uid,
                first,
                last,
            )
        if row is None:
            raise NotFoundError(f"no user with uid {uid}")
        return _user(row)

    async def remove_user(self, uid: int) -> tuple[int, ...]:
        """Remove a user with its memberships and credentials; returns the ids of its
        credentials that were not revoked (sessions and tickets to cut)."""
        check_id(uid, "uid")
        async with self.connections.read_connection() as conn, conn.transaction():
            await _lock_accounts(conn)
            live = await conn.fetch(
                """SELECT credential_id FROM credentials
                   WHERE uid = $1 AND revoked_at IS NULL ORDER BY credential_id""",
                uid,
            )
            if await conn.fetchval("DELETE FROM users WHERE uid = $1 RETURNING uid", uid) is None:
                raise NotFoundError(f"no user with uid {uid}")
        return tuple(r["credential_id"] for r in live)

    # --- credentials ----------------------------------------------------------------------

    async def issue_credential(
        self, uid: int, label: str = "", expires: float | None = None
    ) -> IssuedCredential:
        """A new credential for user `uid`, expiring at `expires` (time.time(); None:
        never). Only the secret's SHA-256 is stored; the token is returned once."""
        check_id(uid, "uid")
        check_label(label)
        check_expires(expires)
        secret = new_secret()
        digest = secret_digest(secret)
        async with self.connections.read_connection() as conn:
            with _refusals(credentials_uid_fkey=NotFoundError(f"no user with uid {uid}")):
                row = await conn.fetchrow(
                    f"""INSERT INTO credentials (uid, secret_sha256, label, expires_at)
                        VALUES ($1, $2, $3, $4) RETURNING {_CREDENTIAL_COLUMNS}""",
                    uid,
                    digest,
                    label,
                    _timestamp(expires),
                )
        credential = _credential(row)
        return IssuedCredential(credential, format_token(credential.credential_id, secret))

    async def revoke_credential(self, credential_id: int) -> CredentialRow:
        """Revoke a credential (again: no change); returns it as now stored."""
        if not 1 <= credential_id <= MAX_CREDENTIAL_ID:
            raise NotFoundError(f"no credential {credential_id}")
        async with self.connections.read_connection() as conn:
            row = await conn.fetchrow(
                f"""UPDATE credentials SET revoked_at = coalesce(revoked_at, now())
                    WHERE credential_id = $1 RETURNING {_CREDENTIAL_COLUMNS}""",
                credential_id,
            )
        if row is None:
            raise NotFoundError(f"no credential {credential_id}")
        return _credential(row)

    async def revoke_user_credentials(self, uid: int) -> tuple[CredentialRow, ...]:
        """Revoke every credential of user `uid`; returns those revoked now."""
        check_id(uid, "uid")
        async with self.connections.read_connection() as conn, conn.transaction():
            if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM users WHERE uid = $1)", uid):
                raise NotFoundError(f"no user with uid {uid}")
            rows = await conn.fetch(
                f"""UPDATE credentials SET revoked_at = now()
                    WHERE uid = $1 AND revoked_at IS NULL RETURNING {_CREDENTIAL_COLUMNS}""",
                uid,
            )
        return tuple(sorted((_credential(r) for r in rows), key=lambda c: c.credential_id))


async def _lock_accounts(conn: asyncpg.Connection) -> None:
    # Account writers go one at a time: an id found free, or a group found present,
    # stays so until the commit.
    await conn.execute("LOCK TABLE groups, users IN SHARE ROW EXCLUSIVE MODE")


async def _insert_group(conn: asyncpg.Connection, name: str, gid: int) -> None:
    with _refusals(
        groups_pkey=ExistsError(f"gid {gid} is taken"),
        groups_name_key=ExistsError(f"group {name} exists"),
    ):
        await conn.execute("INSERT INTO groups (gid, name) VALUES ($1, $2)", gid, name)


async def _insert_members(
    conn: asyncpg.Connection, pairs: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Insert (gid, uid) memberships (under the accounts lock); returns the new ones."""
    for gid, uid in pairs:
        check_id(gid, "gid")
        check_id(uid, "uid")
    if not pairs:
        return []
    gids = [p[0] for p in pairs]
    uids = [p[1] for p in pairs]
    for table, column, ids in (("groups", "gid", gids), ("users", "uid", uids)):
        missing = await conn.fetchval(
            f"""SELECT min(i) FROM unnest($1::bigint[]) i
                WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE {column} = i)""",
            ids,
        )
        if missing is not None:
            raise NotFoundError(f"no {table[:-1]} with {column} {missing}")
    rows = await conn.fetch(
        """INSERT INTO group_members (gid, uid)
           SELECT * FROM unnest($1::bigint[], $2::bigint[])
           ON CONFLICT ON CONSTRAINT group_members_pkey DO NOTHING RETURNING gid, uid""",
        gids,
        uids,
    )
    return sorted((r["gid"], r["uid"]) for r in rows)


def _timestamp(when: float | None) -> datetime | None:
    return None if when is None else datetime.fromtimestamp(when, UTC)


def _epoch(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()


def _user(row: asyncpg.Record) -> UserRow:
    first, last = row["callers_first_uid"], row["callers_last_uid"]
    callers = None if first is None else (first, last)
    return UserRow(row["uid"], row["name"], row["gid"], row["superuser"], callers)


def _credential(row: asyncpg.Record) -> CredentialRow:
    return CredentialRow(
        row["credential_id"],
        row["uid"],
        bytes(row["secret_sha256"]),
        row["label"],
        _epoch(row["expires_at"]),
        _epoch(row["revoked_at"]),
        _epoch(row["created_at"]),
    )
