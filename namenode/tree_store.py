"""The SQL of subtree summaries and walks: committed entries of many directories at
once, read inside one snapshot (a read-only REPEATABLE READ transaction), so that a
summary or a page of a walk sees one consistent state however many queries it takes.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import NamedTuple

import asyncpg

from plasmafs.core.attributes import FileKind
from plasmafs.namenode.inode_records import Listed
from plasmafs.namenode.store import Store


@dataclass(slots=True)
class LevelTotals:
    """What the entries of a set of directories add up to (their own subdirectories
    counted, not entered)."""

    files: int = 0
    directories: int = 0
    symlinks: int = 0
    bytes: int = 0
    space: int = 0
    linked: tuple[tuple[int, int, int], ...] = ()  # (ino, size, space) of hard-linked files


class Subdirectory(NamedTuple):
    """A directory a summary found: what deciding whether to enter it takes."""

    ino: int
    mode: int
    uid: int
    gid: int


# An entry found by `TreeSnapshot.children`: which of the asked directories holds it
# (its position in the request), its name and its inode.
Child = tuple[int, str, Listed]

# Listed's columns, in its order.
_LISTED = (
    "i.ino, i.kind, i.mode, i.uid, i.gid, i.size, i.mtime_ns, i.ctime_ns, i.nlink, "
    "i.replication, i.blocksize, i.version, i.target, i.data IS NOT NULL, i.rdev, "
    "i.xattrs IS NOT NULL"
)


_FILE, _DIRECTORY, _SYMLINK = int(FileKind.FILE), int(FileKind.DIRECTORY), int(FileKind.SYMLINK)
_SPACE = "CASE WHEN i.data IS NULL THEN i.size * i.replication ELSE i.size END"
# Files with several names (hard links) come as (ino, size, space) lists: a summary
# counts each once, wherever its names are.
_LEVEL = f"""
SELECT count(*) FILTER (WHERE i.kind = {_FILE} AND i.nlink = 1) AS files,
       count(*) FILTER (WHERE i.kind = {_DIRECTORY}) AS directories,
       count(*) FILTER (WHERE i.kind = {_SYMLINK}) AS symlinks,
       coalesce(sum(i.size) FILTER (WHERE i.kind = {_FILE} AND i.nlink = 1), 0) AS bytes,
       coalesce(sum({_SPACE}) FILTER (WHERE i.kind = {_FILE} AND i.nlink = 1), 0) AS space,
       array_agg(i.ino) FILTER (WHERE i.kind = {_FILE} AND i.nlink > 1) AS linked_inos,
       array_agg(i.size) FILTER (WHERE i.kind = {_FILE} AND i.nlink > 1) AS linked_sizes,
       array_agg({_SPACE}) FILTER (WHERE i.kind = {_FILE} AND i.nlink > 1) AS linked_spaces,
       array_agg(i.ino) FILTER (WHERE i.kind = {_DIRECTORY}) AS inos,
       array_agg(i.mode) FILTER (WHERE i.kind = {_DIRECTORY}) AS modes,
       array_agg(i.uid) FILTER (WHERE i.kind = {_DIRECTORY}) AS uids,
       array_agg(i.gid) FILTER (WHERE i.kind = {_DIRECTORY}) AS gids
FROM entries e JOIN inodes i ON i.ino = e.ino
WHERE e.parent = ANY($1::bigint[])
"""


class TreeSnapshot:
    """Reads of one snapshot of committed state."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def entry(self, parent: int, name: str) -> Listed | None:
        """The inode that `name` in directory `parent` names."""
        row = await self._conn.fetchrow(
            f"""SELECT {_LISTED} FROM entries e JOIN inodes i ON i.ino = e.ino
                WHERE e.parent = $1 AND e.name = $2""",
            parent,
            name,
        )
        return None if row is None else Listed._make(row)

    async def entries_named(self, parent: int, names: list[str]) -> dict[str, Listed]:
        """The inodes of those of `names` that directory `parent` holds, by name."""
        rows = await self._conn.fetch(
            f"""SELECT e.name, {_LISTED} FROM entries e JOIN inodes i ON i.ino = e.ino
                WHERE e.parent = $1 AND e.name = ANY($2::text[])""",
            parent,
            names,
        )
        return {r[0]: Listed._make(r[1:]) for r in rows}

    async def children(self, directories: list[tuple[int, str]], limit: int) -> list[Child]:
        """Up to `limit` entries of the directories given as (inode, name to continue
        after), ordered by the directory's position in `directories`, then by name. Every
        directory before the one of the last entry returned is complete."""
        rows = await self._conn.fetch(
            # LATERAL: an index range per directory, whatever the planner guesses (a
            # hash join would read the whole entries table for every query).
            f"""SELECT q.position - 1, e.name, {_LISTED}
                FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS q(dir, after, position)
                CROSS JOIN LATERAL (
                    SELECT e.name, e.ino FROM entries e
                    WHERE e.parent = q.dir AND e.name > q.after
                    ORDER BY e.name LIMIT $3) e
                JOIN inodes i ON i.ino = e.ino
                ORDER BY q.position, e.name
                LIMIT $3""",
            [d for d, _ in directories],
            [after for _, after in directories],
            limit,
        )
        return [(r[0], r[1], Listed._make(r[2:])) for r in rows]

    async def level(self, parents: list[int]) -> tuple[LevelTotals, list[Subdirectory]]:
        """The totals of the entries of directories `parents`, and the subdirectories
        among those entries, in one query."""
        r = await self._conn.fetchrow(_LEVEL, parents)
        linked: tuple[tuple[int, int, int], ...] = ()
        if r["linked_inos"]:
            linked = tuple(
                zip(r["linked_inos"], r["linked_sizes"], r["linked_spaces"], strict=True)
            )
        totals = LevelTotals(
            r["files"], r["directories"], r["symlinks"], int(r["bytes"]), int(r["space"]), linked
        )
        if not r["inos"]:
            return totals, []
        found = zip(r["inos"], r["modes"], r["uids"], r["gids"], strict=True)
        return totals, [Subdirectory(*row) for row in found]


class TreeStore:
    """Opens snapshots of the metadata store for subtree reads."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[TreeSnapshot]:
        """A snapshot of committed state, held until the block ends."""
        async with (
            self.store.read_connection() as conn,
            conn.transaction(readonly=True, isolation="repeatable_read"),
        ):
            yield TreeSnapshot(conn)
