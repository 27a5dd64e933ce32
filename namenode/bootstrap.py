"""`python -m plasmafs.namenode.bootstrap`: the first superuser of a cluster.

Accounts are managed through the namenode by a superuser, so the first one is made
here, straight in the database (migrated first), before the namenode starts: `pfs local
up` runs it for the user who starts the cluster, and an operator runs it once when
setting a cluster up. A user of that name who exists already gets a new credential.
Prints the user's name; the token goes only to the 0600 file.

A namenode that is running keeps its accounts in memory: it sees a credential made
here only after a restart.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import asyncpg

from plasmafs.core.credentials import write_token_file
from plasmafs.core.errors import PlasmaError, StorageError
from plasmafs.namenode import pg_connect
from plasmafs.namenode.account_store import AccountStore, OneConnection
from plasmafs.namenode.migrator import migrate_database


async def bootstrap(
    dsn: str | None, name: str, uid: int | None, token_file: Path, label: str
) -> None:
    """Make (or find) the superuser `name` and write a new credential of it to
    `token_file`."""
    await migrate_database(dsn)
    try:
        conn = await pg_connect.connect(dsn)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        store = AccountStore(OneConnection(conn))
        known = {u.name: u for u in (await store.load()).users}
        user = known.get(name)
        if user is None:
            user = (await store.add_user(name, uid, superuser=True)).user
        elif not user.superuser:
            raise PlasmaError(f"user {name} exists and is no superuser")
        issued = await store.issue_credential(user.uid, label)
    finally:
        await conn.close()
    write_token_file(token_file, issued.token)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and make the superuser's credential."""
    parser = argparse.ArgumentParser(
        prog="pfs-namenode-bootstrap", description="make a cluster's first superuser"
    )
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: the PG* variables)")
    parser.add_argument("--name", required=True, help="the user's name")
    parser.add_argument("--uid", type=int, help="the user's uid (default: the next free)")
    parser.add_argument("--token-file", type=Path, required=True, help="written with mode 0600")
    parser.add_argument("--label", default="bootstrap", help="what the credential is for")
    args = parser.parse_args(argv)
    try:
        asyncio.run(bootstrap(args.dsn, args.name, args.uid, args.token_file, args.label))
    except (PlasmaError, OSError, ValueError) as exc:
        print(f"pfs-namenode-bootstrap: {exc}", file=sys.stderr)
        return 1
    print(args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
