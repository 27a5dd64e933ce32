"""Snapshots in PostgreSQL: taking one copies a directory's tree of rows in one
transaction, deleting one removes them (namenode/snapshots.py decides around it).

Taking a snapshot reads the tree at one instant (one statement: it sees one committed
state) and copies its inodes, entries and extents with fresh numbers from the snapshot
sequence; a file with several names in the tree becomes one copy with as many names.
The copied extents name the same blocks, with the owner stamps their datanodes wrote
(as a concatenation's moved extents do), so that reads, tickets and re-replication
treat them as any file's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import ExistsError, NotActiveError, NotFoundError
from plasmafs.namenode.inode_records import SNAPSHOT_DIR_NAME, Inode
from plasmafs.namenode.store import Store, domain_errors, inode_from_row

Range = tuple[int, int, int]  # datanode, first block, blocks
SNAPSHOT_DIR_MODE = 0o555
_DIRECTORY = int(FileKind.DIRECTORY)

# One statement, so that every part of the copy reads the same committed state (READ
# COMMITTED gives each statement its own snapshot). One row, its last column NULL, names
# the root's copy and how many inodes were copied; the others the copied extents' block
# ranges. (A data-modifying part runs whether or not the query reads it.)
_COPY = """
WITH RECURSIVE tree(ino) AS (
    SELECT $1::bigint
    UNION
    SELECT e.ino FROM tree t JOIN entries e ON e.parent = t.ino
),
copies AS MATERIALIZED (
    SELECT ino, nextval('snapshot_inode_numbers') AS copy FROM tree
),
copied_inodes AS (
    INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns, nlink,
                        replication, blocksize, version, target, data, rdev, xattrs)
    SELECT c.copy, i.kind, i.mode, i.uid, i.gid, i.size, i.mtime_ns, i.ctime_ns, i.nlink,
           i.replication, i.blocksize, i.version, i.target, i.data, i.rdev, i.xattrs
    FROM copies c JOIN inodes i ON i.ino = c.ino
    RETURNING 1
),
copied_entries AS (
    INSERT INTO entries (parent, name, ino)
    SELECT p.copy, e.name, c.copy
    FROM entries e JOIN copies p ON p.ino = e.parent JOIN copies c ON c.ino = e.ino
),
copied_extents AS (
    INSERT INTO extents (ino, file_index, datanode_id, block_start, block_count, generation,
                         stamp_ino, stamp_shift)
    SELECT c.copy, x.file_index, x.datanode_id, x.block_start, x.block_count, x.generation,
           CASE WHEN x.stamp_ino = 0 THEN x.ino ELSE x.stamp_ino END, x.stamp_shift
    FROM extents x JOIN copies c ON c.ino = x.ino
    RETURNING datanode_id, block_start, block_count
)
SELECT (SELECT copy FROM copies WHERE ino = $1), (SELECT count(*) FROM copied_inodes),
       NULL::bigint, NULL::bigint
UNION ALL
SELECT datanode_id, block_start, block_count, 1 FROM copied_extents
"""
_TREE_OF = """
INSERT INTO pfs_snapshot_map (ino)
SELECT ino FROM (
    WITH RECURSIVE tree(ino) AS (
        SELECT $1::bigint
        UNION
        SELECT e.ino FROM tree t JOIN entries e ON e.parent = t.ino
    )
    SELECT ino FROM tree
) walked
"""


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """One snapshot as PostgreSQL records it."""

    dir_ino: int
    name: str
    snapdir_ino: int
    root_ino: int
    created_ns: int
    inodes: int


@dataclass(frozen=True, slots=True)
class Taken:
    """What taking a snapshot wrote: its row, the hidden directory as it is now, and
    the block ranges (datanode, start, count) its extents name."""

    snapshot: SnapshotRow
    snapdir: Inode
    ranges: list[Range]


@dataclass(frozen=True, slots=True)
class Deleted:
    """What deleting a snapshot removed: its inodes, the block ranges its extents named,
    and the hidden directory as it is now (None when it went with its last snapshot)."""

    inodes: list[int]
    ranges: list[Range]
    snapdir: Inode | None


class SnapshotStore:
    """The snapshots' rows in PostgreSQL."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def all(self) -> list[SnapshotRow]:
        """Every snapshot."""
        return [SnapshotRow(*row) for row in await self.store.snapshot_rows()]

    async def take(
        self, term: int, dir_ino: int, name: str, snapdir_ino: int | None, now_ns: int
    ) -> Taken:
        """Copy directory `dir_ino`'s tree as snapshot `name` (below `snapdir_ino`, made
        now when None). ExistsError if the directory has a snapshot of that name."""
        with domain_errors("taking a snapshot"):
            async with self.store.read_connection() as conn, conn.transaction():
                if await conn.fetchval(
                    "SELECT 1 FROM snapshots WHERE dir_ino = $1 AND name = $2", dir_ino, name
                ):
                    raise ExistsError(f"the directory already has a snapshot named {name!r}")
                if await conn.fetchval(
                    "SELECT 1 FROM entries WHERE parent = $1 AND name = $2",
                    dir_ino,
                    SNAPSHOT_DIR_NAME,
                ):
                    raise ExistsError(
                        f"the directory has an entry named {SNAPSHOT_DIR_NAME}: rename it first"
                    )
                rows = await conn.fetch(_COPY, dir_ino)
                (root, copied, _, _) = next(r for r in rows if r[3] is None)
                if not copied:
                    raise NotFoundError("the directory was removed")
                ranges = [(r[0], r[1], r[2]) for r in rows if r[3] is not None]
                if snapdir_ino is None:
                    snapdir_ino = await _make_snapdir(conn, dir_ino, now_ns)
                await conn.execute(
                    "INSERT INTO entries (parent, name, ino) VALUES ($1, $2, $3)",
                    snapdir_ino,
                    name,
                    root,
                )
                snapdir = await _count_into(conn, snapdir_ino, 1, now_ns)
                row = await conn.fetchrow(
                    """INSERT INTO snapshots (dir_ino, name, snapdir_ino, root_ino, created_ns,
                                              inodes)
                       VALUES ($1, $2, $3, $4, $5, $6) RETURNING *""",
                    dir_ino, name, snapdir_ino, root, now_ns, copied - 1,
                )  # fmt: skip
                await _check_term(conn, term)
        return Taken(_snapshot(row), snapdir, ranges)

    async def delete(
        self,
        term: int,
        dir_ino: int,
        name: str,
        freed: Callable[[list[Range]], list[Range]],
        reusable_after: float,
        now_ns: int,
    ) -> Deleted:
        """Remove snapshot `name` of `dir_ino` with its rows; the ranges `freed` says
        nobody else names are recorded released until `reusable_after` (time.time())."""
        with domain_errors("deleting a snapshot"):
            async with self.store.read_connection() as conn, conn.transaction():
                row = await conn.fetchrow(
                    "DELETE FROM snapshots WHERE dir_ino = $1 AND name = $2 RETURNING *",
                    dir_ino,
                    name,
                )
                if row is None:
                    raise NotFoundError(f"the directory has no snapshot named {name!r}")
                snapshot = _snapshot(row)
                await conn.execute(
                    "CREATE TEMP TABLE pfs_snapshot_map (ino bigint PRIMARY KEY) ON COMMIT DROP"
                )
                await conn.execute(_TREE_OF, snapshot.root_ino)
                ranges = await conn.fetch(
                    """DELETE FROM extents x USING pfs_snapshot_map m WHERE x.ino = m.ino
                       RETURNING x.datanode_id, x.block_start, x.block_count"""
                )
                await conn.execute(
                    "DELETE FROM entries e USING pfs_snapshot_map m WHERE e.parent = m.ino"
                )
                await conn.execute(
                    "DELETE FROM entries WHERE parent = $1 AND name = $2",
                    snapshot.snapdir_ino,
                    name,
                )
                gone = await conn.fetch(
                    "DELETE FROM inodes i USING pfs_snapshot_map m WHERE i.ino = m.ino"
                    " RETURNING i.ino"
                )
                released = freed([(r[0], r[1], r[2]) for r in ranges])
                if released:
                    await conn.execute(
                        """INSERT INTO released_extents (datanode_id, block_start, block_count,
                                                         reusable_after)
                           SELECT d, s, n, $4 FROM unnest($1::int[], $2::bigint[], $3::bigint[])
                               AS r(d, s, n)
                           ON CONFLICT ON CONSTRAINT released_extents_pkey DO UPDATE SET
                               block_count = EXCLUDED.block_count,
                               reusable_after = EXCLUDED.reusable_after""",
                        [d for d, _, _ in released],
                        [s for _, s, _ in released],
                        [n for _, _, n in released],
                        datetime.fromtimestamp(reusable_after, UTC),
                    )
                inodes = [r[0] for r in gone]
                if await conn.fetchval("SELECT 1 FROM snapshots WHERE dir_ino = $1", dir_ino):
                    snapdir: Inode | None = await _count_into(
                        conn, snapshot.snapdir_ino, -1, now_ns
                    )
                else:
                    await conn.execute("DELETE FROM inodes WHERE ino = $1", snapshot.snapdir_ino)
                    inodes.append(snapshot.snapdir_ino)
                    snapdir = None
                await _check_term(conn, term)
        return Deleted(inodes, [(r[0], r[1], r[2]) for r in ranges], snapdir)


async def _check_term(conn: asyncpg.Connection, term: int) -> None:
    """Fence a change made by a deposed namenode, as the group commit does: the row lock,
    taken last so that renewals of the lease are not held up meanwhile, orders the
    commit before a newer term is taken."""
    found = await conn.fetchval("SELECT 1 FROM namenode_terms WHERE term = $1 FOR SHARE", term)
    if not found:
        raise NotActiveError(f"namenode term {term} has ended; another namenode is active")


async def _make_snapdir(conn: asyncpg.Connection, dir_ino: int, now_ns: int) -> int:
    """The hidden directory holding `dir_ino`'s snapshots, owned as the directory is."""
    return int(
        await conn.fetchval(
            """INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns, nlink,
                                   replication, blocksize, version)
               SELECT nextval('snapshot_inode_numbers'), $2, $3, uid, gid, 0, $4, $4, 2,
                      replication, blocksize, 1
               FROM inodes WHERE ino = $1
               RETURNING ino""",
            dir_ino,
            _DIRECTORY,
            SNAPSHOT_DIR_MODE,
            now_ns,
        )
    )


async def _count_into(conn: asyncpg.Connection, snapdir_ino: int, delta: int, now_ns: int) -> Inode:
    """One snapshot more or fewer in the hidden directory: its link count and times."""
    row = await conn.fetchrow(
        """UPDATE inodes SET nlink = nlink + $2, mtime_ns = $3, ctime_ns = $3,
                             version = version + 1
           WHERE ino = $1 RETURNING *""",
        snapdir_ino,
        delta,
        now_ns,
    )
    return inode_from_row(row)


def _snapshot(row: asyncpg.Record) -> SnapshotRow:
    return SnapshotRow(
        row["dir_ino"],
        row["name"],
        row["snapdir_ino"],
        row["root_ino"],
        row["created_ns"],
        row["inodes"],
    )
