"""The fixed accounts of the test template database, and their known tokens.

root (uid 0, superuser), alice (1001) and bob (1002), each with a group of their own
name and, for alice and bob, staff (2000). Each has one live credential whose token is
a constant here; alice also has an expired one and a revoked one.
"""

from __future__ import annotations

from pathlib import Path

import asyncpg

from plasmafs.core.credentials import format_token, secret_digest, write_token_file
from plasmafs.namenode.account_store import AccountStore, OneConnection

STAFF_GID = 2000
UIDS = {"root": 0, "alice": 1001, "bob": 1002}
USER_NAMES = {uid: name for name, uid in UIDS.items()}
GROUP_NAMES = {**USER_NAMES, STAFF_GID: "staff"}  # each user has a group of its name and id

# (credential id, user, secret, label, expires_at and revoked_at as SQL): known secrets,
# so tests hold tokens without asking the database.
_CREDENTIALS = [
    (1, "root", b"root" * 8, "test root", "NULL", "NULL"),
    (2, "alice", b"alice" * 6 + b"..", "test alice", "NULL", "NULL"),
    (3, "bob", b"bob." * 8, "test bob", "NULL", "NULL"),
    (4, "alice", b"expired." * 4, "expired", "now() - interval '1 day'", "NULL"),
    (5, "alice", b"revoked." * 4, "revoked", "NULL", "now() - interval '1 hour'"),
]
ROOT_TOKEN, ALICE_TOKEN, BOB_TOKEN, ALICE_EXPIRED_TOKEN, ALICE_REVOKED_TOKEN = (
    format_token(c[0], c[2]) for c in _CREDENTIALS
)
TOKENS = {"root": ROOT_TOKEN, "alice": ALICE_TOKEN, "bob": BOB_TOKEN}


async def insert_test_accounts(conn: asyncpg.Connection) -> None:
    """Add the fixed accounts and credentials to a migrated database."""
    accounts = AccountStore(OneConnection(conn))
    await accounts.add_group("staff", STAFF_GID)
    await accounts.add_user("root", uid=UIDS["root"], superuser=True)
    await accounts.add_user("alice", uid=UIDS["alice"], groups=[STAFF_GID])
    await accounts.add_user("bob", uid=UIDS["bob"], groups=[STAFF_GID])
    for credential_id, name, secret, label, expires_at, revoked_at in _CREDENTIALS:
        # Fixed ids need OVERRIDING SYSTEM VALUE; the store only issues random secrets.
        await conn.execute(
            f"""INSERT INTO credentials (credential_id, uid, secret_sha256, label, expires_at,
                                         revoked_at)
                OVERRIDING SYSTEM VALUE
                VALUES ($1, $2, $3, $4, {expires_at}, {revoked_at})""",
            credential_id,
            UIDS[name],
            secret_digest(secret),
            label,
        )
    # Credentials issued later continue after the fixed ids.
    await conn.execute(
        """SELECT setval(pg_get_serial_sequence('credentials', 'credential_id'),
                         (SELECT max(credential_id) FROM credentials))"""
    )


def write_test_token(directory: Path, name: str) -> Path:
    """A token file (mode 0600) in `directory` holding the live token of `name`."""
    path = directory / f"{name}.token"
    write_token_file(path, TOKENS[name])
    return path
