"""Every SQL statement of the namenode: reads of committed state and the group commit.

Rows become `Inode` records here and nowhere else; driver errors become plasmafs
errors at this boundary, keyed on SQLSTATE classes, never on message text.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import NotActiveError, StorageError
from plasmafs.core.value_checks import DEFAULT_LOCATION
from plasmafs.namenode import pg_connect
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.inode_records import ROOT_INO, SNAPSHOT_INO_BASE, ExtentRow, Inode

INODE_COLUMNS = (
    "ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns, nlink, replication, blocksize, "
    "version, target, data, rdev, xattrs"
)

# Every column of an inode, as a join (table alias i) reads it.
JOINED_INODE_COLUMNS = ", ".join("i." + c.strip() for c in INODE_COLUMNS.split(","))

# An inode as listings carry it (table alias i): attributes only, never a small file's
# content or its extended attributes, only whether it has some (a page could hold
# thousands of them); such inodes are not cached.
_LISTED_AS = {
    "data": "NULL::bytea AS data",
    "xattrs": "CASE WHEN i.xattrs IS NULL THEN NULL ELSE ''::bytea END AS xattrs",
}
LISTED_COLUMNS = ", ".join(
    _LISTED_AS.get(c.strip(), "i." + c.strip()) for c in INODE_COLUMNS.split(",")
)

_APPLY_GROUP = f"""
SELECT {INODE_COLUMNS} FROM apply_group(
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
    $15, $16, $17, $18, $19, $20, $21, $22, $23,
    $24, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41,
    $42, $43, $44)
"""


def inode_from_row(row: asyncpg.Record) -> Inode:
    """Turn an `inodes` row into an Inode."""
    return Inode(
        Attr(
            row["ino"],
            FileKind(row["kind"]),
            row["mode"],
            row["uid"],
            row["gid"],
            row["size"],
            row["mtime_ns"],
            row["ctime_ns"],
            row["nlink"],
            row["replication"],
            row["blocksize"],
            row["version"],
            row["rdev"],
            row["xattrs"] is not None,
        ),
        row["target"],
        row["data"],
        row["xattrs"],
    )


@dataclass(frozen=True, slots=True)
class DatanodeRow:
    """A registered datanode."""

    datanode_id: int
    identity: str
    host: str
    address: str
    blocksize: int
    capacity_blocks: int
    local_socket: str = ""
    admin_state: int = 0  # 0 normal, 1 decommissioning, 2 decommissioned
    principal: str | None = None  # the certificate name the volume is bound to
    plaintext: bool = False  # its data port runs without TLS
    location: str = DEFAULT_LOCATION  # its rack or zone


@dataclass(frozen=True, slots=True)
class ListedEntry:
    """A committed directory entry as readdir reads it."""

    name: str
    ino: int
    inode: Inode | None


# Raised by apply_group when the namenode's term has ended (sql/0004).
TERM_ENDED = "PFS01"


class RetryableStoreError(StorageError):
    """A deadlock or serialization failure: nothing was applied, the write may be retried."""


class OutcomeUnknownError(StorageError):
    """The connection failed during a write: PostgreSQL may or may not have committed it."""


_RETRYABLE = ("40001", "40P01")  # serialization_failure, deadlock_detected
# 08: connection exception; 57P: operator intervention (shutdown, crash)
_CONNECTION_CLASSES = ("08", "57P")


@contextlib.contextmanager
def domain_errors(what: str) -> Iterator[None]:
    """Turn driver errors raised inside into plasmafs errors, keyed on SQLSTATE (never on
    message text): the single boundary between asyncpg and the rest of the namenode."""
    try:
        yield
    except asyncpg.PostgresError as exc:
        sqlstate = getattr(exc, "sqlstate", "") or ""
        text = f"{what}: {exc.__class__.__name__}: {exc}"
        if sqlstate == TERM_ENDED:
            raise NotActiveError(str(exc)) from exc
        if sqlstate in _RETRYABLE:
            raise RetryableStoreError(text) from exc
        if sqlstate.startswith(_CONNECTION_CLASSES):
            raise OutcomeUnknownError(text) from exc
        constraint = getattr(exc, "constraint_name", None)
        if constraint:
            text += f" (constraint {constraint})"
        raise StorageError(text) from exc
    except (asyncpg.InterfaceError, OSError, ConnectionError, TimeoutError) as exc:
        raise OutcomeUnknownError(f"{what}: {exc.__class__.__name__}: {exc}") from exc


_FILE, _DIRECTORY, _SYMLINK = int(FileKind.FILE), int(FileKind.DIRECTORY), int(FileKind.SYMLINK)
_USAGE_DIRECTORIES = f"""
SELECT e.parent, e.ino, i.mode FROM entries e JOIN inodes i ON i.ino = e.ino
WHERE i.kind = {_DIRECTORY} AND e.parent < {SNAPSHOT_INO_BASE}
UNION ALL SELECT 0, ino, mode FROM inodes WHERE ino = {ROOT_INO}
"""
_USAGE_TOTALS = f"""
SELECT e.parent,
       count(*) FILTER (WHERE i.kind = {_FILE}),
       count(*) FILTER (WHERE i.kind = {_SYMLINK}),
       count(*) FILTER (WHERE i.kind NOT IN ({_FILE}, {_DIRECTORY}, {_SYMLINK})),
       coalesce(sum(i.size) FILTER (WHERE i.kind = {_FILE}), 0),
       coalesce(sum(CASE WHEN i.data IS NULL THEN i.size * i.replication ELSE i.size END)
                FILTER (WHERE i.kind = {_FILE}), 0),
       count(*) FILTER (WHERE i.kind = {_FILE} AND i.nlink > 1)
FROM entries e JOIN inodes i ON i.ino = e.ino
WHERE e.parent < {SNAPSHOT_INO_BASE}
GROUP BY e.parent
"""


class Store:
    """The namenode's PostgreSQL: a pool for reads, one connection for commits."""

    def __init__(self, dsn: str | None, read_pool_size: int, commit_lanes: int = 1) -> None:
        self._dsn = dsn
        self._read_pool_size = read_pool_size
        self._pool: asyncpg.Pool | None = None
        self._writers: list[asyncpg.Connection | None] = [None] * commit_lanes
        self._writer_durable = [True] * commit_lanes  # each one's synchronous_commit
        # Groups acknowledged before their WAL flush and not known to be flushed since:
        # if PostgreSQL restarts meanwhile, they may be gone.
        self.unflushed = 0

    async def open(self) -> None:
        """Connect the read pool and the commit connection."""
        self._pool = await asyncpg.create_pool(
            self._dsn,
            connect=pg_connect.connect,
            # One connection at start, and no floor kept: a floor is restored by a task
            # of the pool's own that retries (and logs a traceback) every second while
            # PostgreSQL fails over; reads reconnect when they need to anyway.
            init_size=1,
            min_size=0,
            max_size=self._read_pool_size,
            server_settings={"application_name": "pfs-namenode-read"},
            reset=_keep_session,
        )
        for lane in range(len(self._writers)):
            await self._writer_connection(lane)

    async def _connect(self, name: str) -> asyncpg.Connection:
        return await pg_connect.connect(self._dsn, server_settings={"application_name": name})

    async def connect_apart(self, name: str) -> asyncpg.Connection:
        """A connection of its own (application `name`), for long work such as a dump
        that must not hold one of the read pool's; the caller closes it."""
        with domain_errors("metadata store"):
            return await self._connect(name)

    async def close(self) -> None:
        """Close every connection."""
        if self._pool is not None:
            await self._pool.close()
        for conn in self._writers:
            if conn is not None and not conn.is_closed():
                await conn.close()

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[asyncpg.Connection]:
        async with self.read_connection() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def read_connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection for reads and small writes outside the group commit, with
        driver errors turned into plasmafs errors (for the other store modules)."""
        assert self._pool is not None
        with domain_errors("metadata store"):
            async with self._pool.acquire() as conn:
                yield conn

    async def read_grants_until(self) -> float:
        """No read ticket issued so far lives past this time (time.time())."""
        async with self._read() as conn:
            value = await conn.fetchval(
                "SELECT greatest(extract(epoch FROM read_grants_until), 0) FROM namenode_terms"
            )
        return float(value)

    async def extend_read_grants(self, until: float) -> None:
        """Record that read tickets may live until `until` (time.time())."""
        async with self._read() as conn:
            await conn.execute(
                """UPDATE namenode_terms
                   SET read_grants_until = greatest(read_grants_until, $1)""",
                datetime.fromtimestamp(until, UTC),
            )

    # --- reads of committed state -------------------------------------------------

    async def get_inodes(self, inos: list[int]) -> dict[int, Inode]:
        """The committed inodes among `inos` (absent ones are missing from the result)."""
        async with self._read() as conn:
            rows = await conn.fetch(
                f"SELECT {INODE_COLUMNS} FROM inodes WHERE ino = ANY($1::bigint[])", inos
            )
        return {r["ino"]: inode_from_row(r) for r in rows}

    async def get_entries(self, keys: list[tuple[int, str]]) -> dict[tuple[int, str], Inode]:
        """The committed entries among (parent, name) `keys`, each with its inode (a
        lookup of a name wants its attributes next: one round trip, not two)."""
        async with self._read() as conn:
            rows = await conn.fetch(
                f"""SELECT e.parent, e.name, {JOINED_INODE_COLUMNS}
                   FROM unnest($1::bigint[], $2::text[]) AS k(parent, name)
                   JOIN entries e ON e.parent = k.parent AND e.name = k.name COLLATE "C"
                   JOIN inodes i ON i.ino = e.ino
                """,
                [k[0] for k in keys],
                [k[1] for k in keys],
            )
        return {(r["parent"], r["name"]): inode_from_row(r) for r in rows}

    async def get_parent(self, ino: int) -> int | None:
        """The committed parent directory of directory `ino`, or None."""
        async with self._read() as conn:
            value = await conn.fetchval("SELECT parent FROM entries WHERE ino = $1 LIMIT 1", ino)
        return int(value) if value is not None else None

    async def usage_rows(
        self, moment: Callable[[], contextlib.AbstractAsyncContextManager[None]] | None
    ) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int, int, int, int, int]]]:
        """Every directory (parent, inode, mode) and what each directory's entries add
        up to (namenode/usage.py), from one snapshot taken inside `moment` if given."""
        async with (
            self.read_connection() as conn,
            conn.transaction(readonly=True, isolation="repeatable_read"),
        ):
            if moment is not None:
                async with moment():
                    await conn.fetchval("SELECT 1")  # the snapshot is taken here
            directories = await conn.fetch(_USAGE_DIRECTORIES)
            direct = await conn.fetch(_USAGE_TOTALS)
        return [(r[0], r[1], r[2]) for r in directories], [
            (r[0], r[1], r[2], r[3], int(r[4]), int(r[5]), r[6]) for r in direct
        ]

    async def directories_with_entries(self, ino: int) -> list[tuple[int, int, int, int]]:
        """Every directory of the tree at directory `ino` (itself too) that holds
        entries: (inode, mode, uid, gid), as committed."""
        async with self._read() as conn:
            rows = await conn.fetch(
                """WITH RECURSIVE tree(ino) AS (
                       SELECT $1::bigint
                       UNION ALL
                       SELECT e.ino FROM tree t JOIN entries e ON e.parent = t.ino
                       JOIN inodes i ON i.ino = e.ino WHERE i.kind = $2
                   )
                   SELECT i.ino, i.mode, i.uid, i.gid FROM tree t JOIN inodes i ON i.ino = t.ino
                   WHERE EXISTS (SELECT 1 FROM entries e WHERE e.parent = t.ino)""",
                ino,
                _DIRECTORY,
            )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    async def entry_of_another(self, directories: list[int], uid: int) -> str | None:
        """The name of one entry of `directories` whose inode `uid` does not own."""
        async with self._read() as conn:
            value = await conn.fetchval(
                """SELECT e.name FROM entries e JOIN inodes i ON i.ino = e.ino
                   WHERE e.parent = ANY($1::bigint[]) AND i.uid <> $2 LIMIT 1""",
                directories,
                uid,
            )
        return None if value is None else str(value)

    async def quotas(self) -> list[tuple[int, int | None, int | None]]:
        """Every directory quota: (inode, most entries, most space)."""
        async with self._read() as conn:
            rows = await conn.fetch("SELECT ino, max_entries, max_space FROM directory_quotas")
        return [(r[0], r[1], r[2]) for r in rows]

    async def set_quota(self, ino: int, entries: int | None, space: int | None) -> None:
        """Give directory `ino` this quota (replacing the one it has)."""
        async with self._read() as conn:
            await conn.execute(
                """INSERT INTO directory_quotas (ino, max_entries, max_space) VALUES ($1, $2, $3)
                   ON CONFLICT (ino) DO UPDATE SET max_entries = $2, max_space = $3""",
                ino,
                entries,
                space,
            )

    async def clear_quota(self, ino: int) -> None:
        """Remove directory `ino`'s quota."""
        async with self._read() as conn:
            await conn.execute("DELETE FROM directory_quotas WHERE ino = $1", ino)

    async def get_parents(self, ino: int) -> list[int]:
        """The directories of every committed name of `ino`, one per name."""
        async with self._read() as conn:
            rows = await conn.fetch("SELECT parent FROM entries WHERE ino = $1", ino)
        return [int(r[0]) for r in rows]

    async def list_entries(
        self, parent: int, after: str, limit: int, with_inodes: bool
    ) -> list[ListedEntry]:
        """Up to `limit` committed entries of `parent` whose names sort after `after`."""
        async with self._read() as conn:
            if with_inodes:
                rows = await conn.fetch(
                    f"""SELECT e.name AS entry_name, {LISTED_COLUMNS} FROM entries e
                        JOIN inodes i ON i.ino = e.ino
                        WHERE e.parent = $1 AND e.name > $2 ORDER BY e.name LIMIT $3""",
                    parent,
                    after,
                    limit,
                )
                return [ListedEntry(r["entry_name"], r["ino"], inode_from_row(r)) for r in rows]
            rows = await conn.fetch(
                """SELECT name, ino FROM entries WHERE parent = $1 AND name > $2
                   ORDER BY name LIMIT $3""",
                parent,
                after,
                limit,
            )
        return [ListedEntry(r["name"], r["ino"], None) for r in rows]

    async def get_extents(self, inos: list[int]) -> dict[int, tuple[ExtentRow, ...]]:
        """The committed extents of each inode in `inos` (every key present)."""
        async with self._read() as conn:
            rows = await conn.fetch(
                """SELECT ino, file_index, datanode_id, block_start, block_count, generation,
                          stamp_ino, stamp_shift
                   FROM extents
                   WHERE ino = ANY($1::bigint[]) ORDER BY ino, file_index, datanode_id""",
                inos,
            )
        found: dict[int, list[ExtentRow]] = {ino: [] for ino in inos}
        for r in rows:
            row = ExtentRow(
                r["file_index"], r["block_count"], r["datanode_id"], r["block_start"],
                r["generation"], r["stamp_ino"], r["stamp_shift"],
            )  # fmt: skip
            found[r["ino"]].append(row)
        return {ino: tuple(v) for ino, v in found.items()}

    async def cluster_settings(self, blocksize: int, make_secret: bytes) -> tuple[int, bytes]:
        """The cluster's blocksize and ticket secret, fixed by the first namenode."""
        async with self._read() as conn:
            row = await conn.fetchrow(
                """INSERT INTO cluster_settings (blocksize, ticket_secret) VALUES ($1, $2)
                   ON CONFLICT ON CONSTRAINT cluster_settings_pkey DO NOTHING
                   RETURNING blocksize, ticket_secret""",
                blocksize,
                make_secret,
            )
            if row is None:
                row = await conn.fetchrow("SELECT blocksize, ticket_secret FROM cluster_settings")
        return int(row["blocksize"]), bytes(row["ticket_secret"])

    async def datanodes(self) -> list[DatanodeRow]:
        """Every registered datanode."""
        async with self._read() as conn:
            rows = await conn.fetch("SELECT * FROM datanodes ORDER BY datanode_id")
        return [_datanode(r) for r in rows]

    async def register_datanode(
        self,
        identity: str,
        host: str,
        address: str,
        blocksize: int,
        capacity: int,
        local_socket: str,
        principal: str | None = None,
        plaintext: bool = False,
        location: str = DEFAULT_LOCATION,
    ) -> DatanodeRow | None:
        """Insert a datanode, or update the addresses of a known identity; a volume is
        bound to the first principal that registers it. None when it is bound to another
        principal (nothing is changed then). A plaintext cluster registers with no
        principal, and keeps a binding made earlier."""
        async with self._read() as conn:
            row = await conn.fetchrow(
                """INSERT INTO datanodes (identity, host, address, blocksize, capacity_blocks,
                                          local_socket, principal, plaintext, location)
                   VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9)
                   ON CONFLICT ON CONSTRAINT datanodes_identity_key DO UPDATE
                   SET host = EXCLUDED.host, address = EXCLUDED.address,
                       local_socket = EXCLUDED.local_socket,
                       plaintext = EXCLUDED.plaintext, location = EXCLUDED.location,
                       principal = COALESCE(datanodes.principal, EXCLUDED.principal)
                   WHERE EXCLUDED.principal IS NULL OR datanodes.principal IS NULL
                      OR datanodes.principal = EXCLUDED.principal
                   RETURNING *""",
                identity,
                host,
                address,
                blocksize,
                capacity,
                local_socket,
                principal,
                plaintext,
                location,
            )
        return _datanode(row) if row is not None else None

    async def blocks_in_use(self) -> dict[int, list[tuple[int, int]]]:
        """Per datanode, the ranges committed extents and unexpired releases occupy."""
        async with self._read() as conn:
            rows = await conn.fetch(
                """SELECT datanode_id, block_start, block_count FROM extents
                   UNION ALL
                   SELECT datanode_id, block_start, block_count FROM released_extents
                   WHERE reusable_after > now()"""
            )
        used: dict[int, list[tuple[int, int]]] = {}
        for r in rows:
            used.setdefault(r["datanode_id"], []).append((r["block_start"], r["block_count"]))
        return used

    async def released_until(self) -> list[tuple[int, int, int, float]]:
        """Unexpired released ranges: (datanode, start, count, reusable_after as epoch)."""
        async with self._read() as conn:
            rows = await conn.fetch(
                """SELECT datanode_id, block_start, block_count,
                          extract(epoch FROM reusable_after) AS until
                   FROM released_extents WHERE reusable_after > now()"""
            )
        return [(r[0], r[1], r[2], float(r[3])) for r in rows]

    async def forget_expired_releases(self) -> int:
        """Delete released ranges whose quarantine is over; returns how many."""
        async with self._read() as conn:
            status = await conn.execute(
                "DELETE FROM released_extents WHERE reusable_after <= now()"
            )
        return int(status.split()[-1])

    async def snapshot_rows(self) -> list[tuple[int, str, int, int, int, int]]:
        """Every snapshot: (directory, name, its hidden directory, root, created_ns,
        inodes), by directory and age."""
        async with self._read() as conn:
            rows = await conn.fetch(
                """SELECT dir_ino, name, snapdir_ino, root_ino, created_ns, inodes
                   FROM snapshots ORDER BY dir_ino, created_ns"""
            )
        return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    async def extent_ranges_if_shared(self) -> list[tuple[int, int, int]]:
        """Every extent's (datanode, start, count) when some snapshot exists (only then
        may extents share blocks); empty otherwise."""
        async with self._read() as conn:
            if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM snapshots)"):
                return []
            rows = await conn.fetch("SELECT datanode_id, block_start, block_count FROM extents")
        return [(r[0], r[1], r[2]) for r in rows]

    async def reserve_inode_numbers(self) -> int:
        """The first of 1024 fresh inode numbers (the sequence's increment)."""
        async with self._read() as conn:
            return int(await conn.fetchval("SELECT nextval('inode_numbers')"))

    async def count_kinds(self) -> dict[FileKind, int]:
        """How many inodes of each kind exist (outside snapshots)."""
        async with self._read() as conn:
            rows = await conn.fetch(
                "SELECT kind, count(*) AS n FROM inodes WHERE ino < $1 GROUP BY kind",
                SNAPSHOT_INO_BASE,
            )
        return {FileKind(r["kind"]): int(r["n"]) for r in rows}

    # --- the group commit ---------------------------------------------------------

    async def apply(
        self, changesets: Sequence[ChangeSet], lane: int, term: int, durable: bool = True
    ) -> list[Inode]:
        """Write `changesets` in one PostgreSQL transaction; return the touched directories.
        Not `durable`: acknowledged before its WAL is flushed (synchronous_commit off),
        durable with the next durable commit or `sync`.

        Raises NotActiveError, writing nothing, if `term` is no longer the current one;
        RetryableStoreError if nothing was applied and it may be tried again;
        OutcomeUnknownError if the connection failed (the caller must forget what it
        cached); StorageError otherwise.
        The caller guarantees that no two change sets write the same inode row or
        entry (their transactions hold exclusive locks on them); touches of one
        directory by several change sets are merged here.
        """
        upserts: dict[int, Inode] = {}
        deleted_inodes: list[int] = []
        removed: list[tuple[int, str]] = []
        linked: list[tuple[int, str, int]] = []
        touches: dict[int, list[int]] = {}
        dropped: list[tuple[int, int, int]] = []
        added: list[tuple[int, int, int, int, int, int, int, int]] = []
        released: list[tuple[int, int, int, datetime]] = []
        held: list[tuple[int, int, int]] = []
        for cs in changesets:
            for ino, file_index, datanode in cs.extents_dropped | cs.extents_replaced:
                dropped.append((ino, file_index, datanode))
            for (ino, _, _), x in cs.extents_added.items():
                added.append(
                    (
                        ino, x.file_index, x.datanode_id, x.block_start, x.block_count,
                        x.generation, x.stamp_ino, x.stamp_shift,
                    )
                )  # fmt: skip
            held_until = datetime.fromtimestamp(cs.held_until, UTC)
            released.extend((d, start, n, held_until) for d, start, n in cs.released)
            held.extend(cs.released_held)
            for ino, inode in cs.inodes.items():
                if inode is None:
                    deleted_inodes.append(ino)
                else:
                    upserts[ino] = inode
            for (parent, name), target in cs.entries.items():
                if target is None:
                    removed.append((parent, name))
                else:
                    linked.append((parent, name, target))
            for ino, touch in cs.touches.items():
                merged = touches.setdefault(ino, [0, 0])
                merged[0] = max(merged[0], touch.mtime_ns)
                merged[1] += touch.nlink_delta
        order = sorted(touches)  # a fixed order keeps row locks deadlock-free
        arguments = (
            *_inode_columns(upserts.values()),
            *_columns(removed, 2),
            *_columns(linked, 3),
            deleted_inodes,
            order,
            [touches[i][0] for i in order],
            [touches[i][1] for i in order],
            *_columns(dropped, 3),
            *_columns(added, 8),
            *_columns(released, 4),
            *_columns(held, 3),
        )
        flushed = self.unflushed  # written before this group: a durable one flushes them
        with domain_errors("group commit"):
            conn = await self._writer_connection(lane)
            if self._writer_durable[lane] != durable:
                # DEFAULT: back to the server's own setting (on, or stricter).
                await conn.execute(f"SET synchronous_commit TO {'DEFAULT' if durable else 'off'}")
                self._writer_durable[lane] = durable
            rows = await conn.fetch(_APPLY_GROUP, term, *arguments)
        if durable:
            self._flushed(flushed)
        else:
            self.unflushed += 1
        return [inode_from_row(r) for r in rows]

    async def sync(self) -> None:
        """Make every commit acknowledged so far durable: a durable commit after them
        flushes the WAL up to itself."""
        flushed = self.unflushed
        with domain_errors("sync"):
            async with self._read() as conn:
                await conn.execute(
                    "UPDATE durability_barrier SET flushes = flushes + 1 WHERE id = 1"
                )
        self._flushed(flushed)

    def _flushed(self, before: int) -> None:
        """The `before` relaxed groups counted when a durable commit began are durable
        now (its WAL flush covered them); later ones may not be."""
        self.unflushed -= min(before, self.unflushed)

    async def _writer_connection(self, lane: int) -> asyncpg.Connection:
        conn = self._writers[lane]
        if conn is None or conn.is_closed():
            conn = self._writers[lane] = await self._connect(f"pfs-namenode-commit-{lane}")
            self._writer_durable[lane] = True  # the server's default
        return conn

    async def reset_writer(self, lane: int) -> None:
        """Drop a commit connection after a failure; the next commit reconnects."""
        conn = self._writers[lane]
        if conn is not None:
            conn.terminate()
        self._writers[lane] = None


async def _keep_session(conn: asyncpg.Connection) -> None:
    # Read connections never change session state; asyncpg's default reset would cost
    # a round trip on every release.
    return None


def _datanode(row: asyncpg.Record) -> DatanodeRow:
    return DatanodeRow(
        row["datanode_id"],
        str(row["identity"]),
        row["host"],
        row["address"],
        row["blocksize"],
        row["capacity_blocks"],
        row["local_socket"],
        row["admin_state"],
        row["principal"],
        row["plaintext"],
        row["location"],
    )


def _columns(rows: Iterable[tuple[object, ...]], width: int) -> list[list[object]]:
    cols: list[list[object]] = [[] for _ in range(width)]
    for row in rows:
        for col, value in zip(cols, row, strict=True):
            col.append(value)
    return cols


def _inode_columns(inodes: Iterable[Inode]) -> list[list[object]]:
    return _columns(
        (
            (
                n.attr.ino,
                int(n.attr.kind),
                n.attr.mode,
                n.attr.uid,
                n.attr.gid,
                n.attr.size,
                n.attr.mtime_ns,
                n.attr.ctime_ns,
                n.attr.nlink,
                n.attr.replication,
                n.attr.blocksize,
                n.attr.version,
                n.target,
                n.data,
                n.attr.rdev,
                n.xattrs,
            )
            for n in inodes
        ),
        16,
    )
