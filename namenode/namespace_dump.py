"""`pfs admin dump` and `pfs admin load`: the namespace and the accounts as one
consistent logical copy, streamed, for moving a cluster to another PostgreSQL or
keeping an offline copy (continuous backups are PostgreSQL's: deploy/BACKUP.md).

A dump is read in one REPEATABLE READ, READ ONLY transaction — one snapshot, while
the namenode goes on serving — with PostgreSQL's binary COPY of each table, and sent
as it is read. The stream is a magic line, then frames (kind, length, crc32, payload,
checked before any of it is used): a
JSON header (format, schema version, blocksize, the inode number sequences, each
table's columns), each table's name then its COPY data, and a JSON trailer with the
row counts and the SHA-256 of everything before it.

A load goes into a cluster whose namespace is empty, in one transaction that first
takes the next term (every commit of this namenode's term is refused from then on),
so nothing else changes the namespace meanwhile and a failed load leaves no trace.
As pg_restore does, it copies the big tables without their foreign keys and
secondary indexes and puts those back after, each checked or built in one pass.
Datanodes are matched by their volume identity (the dumped cluster's ids are mapped
to this one's; unknown ones are recorded and register later). Accounts are merged:
a user or group the cluster has already must be the same (name and number); a
credential keeps its id, so its tokens go on working, unless this cluster uses that
id already (counted as skipped). The namenode then starts over (drops its cache and
allocator and takes the lease again), as after a failover.
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg

from plasmafs.core.errors import InvalidArgumentError, NotActiveError, NotEmptyError
from plasmafs.core.trash_names import TRASH_NAME

log = logging.getLogger(__name__)

MAGIC = b"plasmafs namespace dump\n"
FORMAT = 1
_FRAME = struct.Struct(">cII")  # kind, payload length, the payload's crc32
HEADER, TABLE, DATA, TRAILER = b"H", b"T", b"D", b"Z"
CHUNK = 1 << 20  # COPY data sent per frame at most
MAX_FRAME = 64 << 20  # a longer frame is not from a dump

# Each table with the columns dumped, in load order (referenced tables first).
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (name, tuple(columns.split()))
    for name, columns in (
        ("groups", "gid name"),
        ("users", "uid name gid superuser created_at callers_first_uid callers_last_uid"),
        ("group_members", "gid uid"),
        ("credentials", "credential_id uid secret_sha256 label created_at expires_at revoked_at"),
        # Sealed: they open where the same s3_secret_file is (namenode/s3_key_sealing.py).
        ("s3_keys", "access_key_id uid secret_sealed created_at revoked_at"),
        (
            "datanodes",
            "datanode_id identity host address local_socket blocksize "
            "capacity_blocks registered_at admin_state principal plaintext location",
        ),
        (
            "inodes",
            "ino kind mode uid gid size mtime_ns ctime_ns nlink replication blocksize "
            "version target data rdev xattrs",
        ),
        ("entries", "parent name ino"),
        ("directory_quotas", "ino max_entries max_space"),
        ("snapshots", "dir_ino name snapdir_ino root_ino created_ns inodes"),
        (
            "extents",
            "ino file_index datanode_id block_start block_count generation stamp_ino stamp_shift",
        ),
        ("corrupt_blocks", "datanode_id block_start block_count found_at reason"),
    )
)
_COLUMNS = {name: list(columns) for name, columns in TABLES}  # as the header names them
# Copied straight into their tables, their checks dropped meanwhile (the quotas keep
# theirs: few rows); the others go through a staging table first.
_DIRECT = frozenset({"inodes", "entries"})
_STRAIGHT = _DIRECT | {"directory_quotas", "snapshots"}
ROOT_INO = 1


@dataclass(slots=True)
class LoadResult:
    """What a load wrote."""

    rows: dict[str, int] = field(default_factory=dict)
    credentials_skipped: int = 0  # their ids are this cluster's own credentials'
    datanodes_added: int = 0  # dumped datanodes this cluster had not seen
    seconds: float = 0.0


Send = Callable[[bytes], Awaitable[None]]


async def dump(conn: asyncpg.Connection, schema: int, send: Send) -> dict[str, int]:
    """Stream the dump to `send` (bytes, about CHUNK at a time); the rows per table."""
    out = _Writer(send)
    await out.raw(MAGIC)
    rows: dict[str, int] = {}
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        blocksize = await conn.fetchval("SELECT blocksize FROM cluster_settings")
        sequence = await conn.fetchval("SELECT last_value FROM inode_numbers")
        snapshot_sequence = await conn.fetchval("SELECT last_value FROM snapshot_inode_numbers")
        header = {
            "format": FORMAT,
            "schema": schema,
            "blocksize": blocksize,
            "inode_numbers": sequence,
            "snapshot_inode_numbers": snapshot_sequence,
            "tables": _COLUMNS,
            "created": time.time(),
        }
        await out.frame(HEADER, json.dumps(header).encode())
        for name, columns in TABLES:
            await out.frame(TABLE, name.encode())
            status = await conn.copy_from_query(
                f"SELECT {', '.join(columns)} FROM {name}", output=out.data, format="binary"
            )
            await out.flush_data()
            rows[name] = _copied(status)
    trailer = {"rows": rows, "sha256": out.digest.hexdigest()}
    await out.frame(TRAILER, json.dumps(trailer).encode(), hashed=False)
    await out.flush()
    return rows


async def load(
    conn: asyncpg.Connection,
    schema: int,
    term: int,
    stream: AsyncIterator[bytes],
) -> LoadResult:
    """Load a dump read from `stream` into the empty namespace of `conn`'s database,
    fencing namenode term `term` out first; everything or nothing is written."""
    started = time.monotonic()
    frames = _Frames(stream)
    result = LoadResult()
    async with conn.transaction():
        fenced = await conn.fetchval(
            """UPDATE namenode_terms SET term = term + 1, lease_expires = '-infinity'
               WHERE term = $1 RETURNING term""",
            term,
        )
        if fenced is None:
            raise NotActiveError("another namenode took a newer term; load through it")
        await _require_empty(conn)
        header = await _header(frames, schema, await conn.fetchval(
            "SELECT blocksize FROM cluster_settings"))  # fmt: skip
        # Checked and indexed once after the copy, not row by row during it.
        restore = await _drop_checks(conn, sorted(_DIRECT))
        for name, columns in TABLES:
            kind, payload = await frames.next()
            if kind != TABLE or payload.decode(errors="replace") != name:
                raise InvalidArgumentError(f"the dump is damaged: table {name} expected")
            target = name if name in _STRAIGHT else await _staging(conn, name, columns)
            if name == "inodes":
                await conn.execute("DELETE FROM inodes WHERE ino = $1", ROOT_INO)
            began = time.monotonic()
            status = await conn.copy_to_table(
                target, source=frames.data(), columns=list(columns), format="binary"
            )
            result.rows[name] = _copied(status)
            log.info("load: %d rows of %s in %.1f s", result.rows[name], name,
                     time.monotonic() - began)  # fmt: skip
        kind, payload = await frames.next()
        if kind != TRAILER:
            raise InvalidArgumentError("the dump is damaged: no trailer after the last table")
        trailer = json.loads(payload)
        if trailer.get("sha256") != frames.digest_before_trailer:
            raise InvalidArgumentError("the dump is damaged: its checksum does not match")
        if trailer.get("rows") != result.rows:
            raise InvalidArgumentError("the dump is damaged: its row counts do not match")
        began = time.monotonic()
        for statement in restore:
            await conn.execute(statement)
        log.info("load: checks and indexes back in %.1f s", time.monotonic() - began)
        began = time.monotonic()
        await _merge_accounts(conn, result)
        await _merge_datanodes(conn, result)
        log.info("load: accounts and block lists merged in %.1f s", time.monotonic() - began)
        await conn.execute(
            "SELECT setval('inode_numbers', greatest($1::bigint, last_value)) FROM inode_numbers",
            header["inode_numbers"],
        )
        await conn.execute(
            """SELECT setval('snapshot_inode_numbers', greatest($1::bigint, last_value))
               FROM snapshot_inode_numbers""",
            header["snapshot_inode_numbers"],
        )
    result.seconds = time.monotonic() - started
    return result


async def _require_empty(conn: asyncpg.Connection) -> None:
    """NotEmptyError unless the namespace holds its root alone, or with the empty trash
    directory a namenode makes as it starts: that one goes (the dump brings its own)."""
    trash = await conn.fetchval(
        "SELECT ino FROM entries WHERE parent = $1 AND name = $2", ROOT_INO, TRASH_NAME
    )
    if trash is not None and not await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM entries WHERE parent = $1)", trash
    ):
        await conn.execute("DELETE FROM entries WHERE parent = $1 AND ino = $2", ROOT_INO, trash)
        await conn.execute("DELETE FROM inodes WHERE ino = $1", trash)
    entries = await conn.fetchval("SELECT count(*) FROM (SELECT 1 FROM entries LIMIT 1000) e")
    inodes = await conn.fetchval("SELECT count(*) FROM (SELECT 1 FROM inodes LIMIT 2) i")
    extents = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM extents)")
    if entries or inodes > 1 or extents:
        more = "+" if entries >= 1000 else ""
        raise NotEmptyError(
            f"the namespace is not empty ({entries}{more} entries): a dump loads into a "
            "new cluster only"
        )


async def _drop_checks(conn: asyncpg.Connection, tables: list[str]) -> list[str]:
    """Drop the foreign keys and the secondary (not unique) indexes of `tables`, as
    pg_restore creates them after the data; the statements that put them back."""
    rows = await conn.fetch(
        """SELECT format('ALTER TABLE %s DROP CONSTRAINT %I', conrelid::regclass, conname),
                  format('ALTER TABLE %s ADD CONSTRAINT %I %s', conrelid::regclass, conname,
                         pg_get_constraintdef(oid))
           FROM pg_constraint WHERE contype = 'f' AND conrelid = ANY($1::regclass[])
           UNION ALL
           SELECT format('DROP INDEX %s', indexrelid::regclass), pg_get_indexdef(indexrelid)
           FROM pg_index
           WHERE indrelid = ANY($1::regclass[]) AND NOT indisunique AND NOT indisprimary""",
        tables,
    )
    for drop, _ in rows:
        await conn.execute(drop)
    return [add for _, add in rows]


async def _header(frames: _Frames, schema: int, blocksize: int) -> dict[str, object]:
    kind, payload = await frames.next()
    try:
        header = json.loads(payload) if kind == HEADER else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidArgumentError("not a plasmafs namespace dump of a known format")
    if header.get("schema") != schema:
        raise InvalidArgumentError(
            f"the dump is of schema version {header.get('schema')}, this cluster's is "
            f"{schema}: load it into a cluster of the version that made it, then upgrade"
        )
    if header.get("blocksize") != blocksize:
        raise InvalidArgumentError(
            f"the dump's blocksize is {header.get('blocksize')}, this cluster's {blocksize}"
        )
    if header.get("tables") != _COLUMNS:
        raise InvalidArgumentError("the dump's tables are not this version's")
    return header


async def _staging(conn: asyncpg.Connection, name: str, columns: tuple[str, ...]) -> str:
    staging = f"dump_{name}"
    await conn.execute(
        f"CREATE TEMP TABLE {staging} ON COMMIT DROP AS "
        f"SELECT {', '.join(columns)} FROM {name} WITH NO DATA"
    )
    return staging


async def _merge_accounts(conn: asyncpg.Connection, result: LoadResult) -> None:
    clash = await conn.fetchrow(
        """SELECT d.name, d.gid FROM dump_groups d JOIN groups g
           ON (g.gid = d.gid) <> (g.name = d.name) LIMIT 1"""
    )
    if clash is not None:
        raise InvalidArgumentError(
            f"group {clash['name']} (gid {clash['gid']}) of the dump clashes with a group "
            "of this cluster (same name or gid, not both)"
        )
    clash = await conn.fetchrow(
        """SELECT d.name, d.uid FROM dump_users d JOIN users u
           ON (u.uid = d.uid) <> (u.name = d.name) LIMIT 1"""
    )
    if clash is not None:
        raise InvalidArgumentError(
            f"user {clash['name']} (uid {clash['uid']}) of the dump clashes with a user "
            "of this cluster (same name or uid, not both)"
        )
    await conn.execute("INSERT INTO groups SELECT * FROM dump_groups ON CONFLICT DO NOTHING")
    columns = ", ".join(dict(TABLES)["users"])
    await conn.execute(
        f"INSERT INTO users ({columns}) SELECT {columns} FROM dump_users ON CONFLICT DO NOTHING"
    )
    await conn.execute(
        "INSERT INTO group_members SELECT * FROM dump_group_members ON CONFLICT DO NOTHING"
    )
    columns = ", ".join(dict(TABLES)["credentials"])
    status = await conn.execute(
        f"""INSERT INTO credentials ({columns}) OVERRIDING SYSTEM VALUE
            SELECT {columns} FROM dump_credentials d
            WHERE NOT EXISTS (SELECT 1 FROM credentials c
                              WHERE c.credential_id = d.credential_id)"""
    )
    result.credentials_skipped = result.rows["credentials"] - int(status.split()[-1])
    columns = ", ".join(dict(TABLES)["s3_keys"])
    await conn.execute(
        f"""INSERT INTO s3_keys ({columns}) SELECT {columns} FROM dump_s3_keys
            ON CONFLICT DO NOTHING"""
    )
    await conn.execute(
        """SELECT setval(pg_get_serial_sequence('credentials', 'credential_id'),
                         greatest(max(credential_id), 1))
           FROM credentials"""
    )


async def _merge_datanodes(conn: asyncpg.Connection, result: LoadResult) -> None:
    """Map the dump's datanode ids to this cluster's by volume identity (adding the
    datanodes it lacks), then write the extents and corrupt ranges with them."""
    await conn.execute(
        """CREATE TEMP TABLE dump_datanode_ids ON COMMIT DROP AS
           SELECT d.datanode_id AS dumped, n.datanode_id AS here
           FROM dump_datanodes d LEFT JOIN datanodes n ON n.identity = d.identity"""
    )
    added = await conn.fetch(
        """INSERT INTO datanodes (identity, host, address, local_socket, blocksize,
                                  capacity_blocks, registered_at, admin_state, principal,
                                  plaintext, location)
           SELECT identity, host, address, local_socket, blocksize, capacity_blocks,
                  registered_at, admin_state, principal, plaintext, location
           FROM dump_datanodes d
           WHERE NOT EXISTS (SELECT 1 FROM datanodes n WHERE n.identity = d.identity)
           RETURNING datanode_id, identity"""
    )
    result.datanodes_added = len(added)
    await conn.execute(
        """UPDATE dump_datanode_ids m SET here = n.datanode_id
           FROM dump_datanodes d JOIN datanodes n ON n.identity = d.identity
           WHERE m.dumped = d.datanode_id AND m.here IS NULL"""
    )
    await conn.execute(
        """INSERT INTO extents (ino, file_index, datanode_id, block_start, block_count,
                                generation, stamp_ino, stamp_shift)
           SELECT e.ino, e.file_index, m.here, e.block_start, e.block_count, e.generation,
                  e.stamp_ino, e.stamp_shift
           FROM dump_extents e JOIN dump_datanode_ids m ON m.dumped = e.datanode_id"""
    )
    await conn.execute(
        """INSERT INTO corrupt_blocks (datanode_id, block_start, block_count, found_at, reason)
           SELECT m.here, c.block_start, c.block_count, c.found_at, c.reason
           FROM dump_corrupt_blocks c JOIN dump_datanode_ids m ON m.dumped = c.datanode_id"""
    )


def _copied(status: str) -> int:
    """The row count of a COPY's status ("COPY 123")."""
    return int(status.split()[-1])


class _Writer:
    """Frames written to `send` in pieces of about CHUNK bytes, hashed as they go."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._out = bytearray()
        self._data = bytearray()
        self.digest = hashlib.sha256()

    async def raw(self, payload: bytes) -> None:
        self.digest.update(payload)
        self._out += payload

    async def frame(self, kind: bytes, payload: bytes, *, hashed: bool = True) -> None:
        framed = _FRAME.pack(kind, len(payload), zlib.crc32(payload)) + payload
        if hashed:
            self.digest.update(framed)
        self._out += framed
        if len(self._out) >= CHUNK:
            await self.flush()

    async def data(self, chunk: bytes) -> None:
        """COPY output, gathered into frames of about CHUNK bytes."""
        self._data += chunk
        if len(self._data) >= CHUNK:
            await self.flush_data()

    async def flush_data(self) -> None:
        if self._data:
            payload, self._data = bytes(self._data), bytearray()
            await self.frame(DATA, payload)

    async def flush(self) -> None:
        if self._out:
            out, self._out = bytes(self._out), bytearray()
            await self._send(out)


class _Frames:
    """Frames read from a stream of byte chunks of any size, hashed as read."""

    def __init__(self, stream: AsyncIterator[bytes]) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._digest = hashlib.sha256()
        self._started = False
        self.digest_before_trailer = ""

    async def _take(self, n: int) -> bytes:
        while len(self._buffer) < n:
            try:
                chunk = await anext(self._stream)
            except StopAsyncIteration:
                raise InvalidArgumentError("the dump ends too early (cut short?)") from None
            self._buffer += chunk
        taken = bytes(self._buffer[:n])
        del self._buffer[:n]
        return taken

    async def next(self) -> tuple[bytes, bytes]:
        """The next frame (kind, payload)."""
        if not self._started:
            self._started = True
            magic = await self._take(len(MAGIC))
            if magic != MAGIC:
                raise InvalidArgumentError("not a plasmafs namespace dump")
            self._digest.update(magic)
        head = await self._take(_FRAME.size)
        if head[:1] == TRAILER:
            self.digest_before_trailer = self._digest.hexdigest()
        return await self._payload(head)

    async def _payload(self, head: bytes) -> tuple[bytes, bytes]:
        kind, length, crc = _FRAME.unpack(head)
        if length > MAX_FRAME:
            raise InvalidArgumentError("the dump is damaged: a frame is too long")
        payload = await self._take(length)
        if zlib.crc32(payload) != crc:
            raise InvalidArgumentError("the dump is damaged: a frame fails its checksum")
        self._digest.update(head)
        self._digest.update(payload)
        return kind, payload

    async def data(self) -> AsyncIterator[bytes]:
        """The payloads of the DATA frames that follow (the frame after them is the
        next `next()`)."""
        while True:
            head = await self._take(_FRAME.size)
            if head[:1] != DATA:
                self._buffer[:0] = head
                return
            yield (await self._payload(head))[1]
