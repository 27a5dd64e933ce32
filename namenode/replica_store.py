"""The SQL of replica health: block groups that may need copies, corrupt blocks,
datanodes' administrative state, and the cross-checks fsck runs on the records.

A block group is the replicas of one file range: every replica row of a file with the
same file index has the same block count (allocation, truncation and repair keep it
so), which lets PostgreSQL group and count replicas without looking at ranges.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from plasmafs.core.attributes import FileKind
from plasmafs.namenode.inode_records import SNAPSHOT_INO_BASE, ExtentRow
from plasmafs.namenode.replica_health import DatanodeSets
from plasmafs.namenode.store import Store

SCAN_BATCH = 10_000  # group rows fetched per round trip of a scan

_GROUPS = """
SELECT x.ino, x.file_index, x.block_count, i.replication,
       array_agg(x.datanode_id ORDER BY x.datanode_id) AS datanodes,
       array_agg(x.block_start ORDER BY x.datanode_id) AS starts,
       array_agg(x.generation ORDER BY x.datanode_id) AS generations,
       array_agg(x.stamp_ino ORDER BY x.datanode_id) AS stamp_inos,
       array_agg(x.stamp_shift ORDER BY x.datanode_id) AS stamp_shifts
FROM extents x JOIN inodes i ON i.ino = x.ino
WHERE x.ino = ANY($1::bigint[])
GROUP BY x.ino, x.file_index, x.block_count, i.replication
"""

# Replica counts by state per group, counted by PostgreSQL and packed with the group's
# block count and replication into one bigint (its "pattern"): a scan of a million
# replica rows then costs the namenode a small row per group that needs a look, and
# groups share a handful of patterns. Counts are capped at 63 (a group has at most a
# few rows more than its replication, at most 32).
_COUNT = "least(count(*) FILTER (WHERE x.datanode_id = ANY(${}::integer[])), 63)"
_GROUP_COUNTS = f"""
SELECT x.ino, x.file_index,
       (x.block_count::bigint << 36) | (i.replication::bigint << 30)
       | ({_COUNT.format(2)} << 24) | ({_COUNT.format(3)} << 18) | ({_COUNT.format(4)} << 12)
       | ({_COUNT.format(5)} << 6) | {_COUNT.format(6)} AS pattern,
       bool_or(x.datanode_id = ANY($7::integer[])) AS on_corrupt
FROM extents x JOIN inodes i ON i.ino = x.ino
GROUP BY x.ino, x.file_index, x.block_count, i.replication
HAVING count(*) <> i.replication OR bool_or(x.datanode_id = ANY($1::integer[]))
"""


# Files with a group whose replicas lie in fewer locations than they could: as many as
# its replicas, its replication and the locations of live datanodes allow.
_MISPLACED = """
SELECT DISTINCT g.ino FROM (
    SELECT x.ino
    FROM extents x
    JOIN unnest($1::integer[], $2::integer[]) AS l(datanode_id, place)
      ON l.datanode_id = x.datanode_id
    JOIN inodes i ON i.ino = x.ino
    GROUP BY x.ino, x.file_index, i.replication
    HAVING count(DISTINCT l.place) < least(count(*), i.replication, $3)
) AS g
"""


def unpack_pattern(pattern: int) -> tuple[int, int, int, int, int, int, int]:
    """(block_count, replication, live, suspect, lost, draining, on_placeable) of a
    group_counts pattern."""
    return (
        pattern >> 36,
        (pattern >> 30) & 63,
        (pattern >> 24) & 63,
        (pattern >> 18) & 63,
        (pattern >> 12) & 63,
        (pattern >> 6) & 63,
        pattern & 63,
    )


class UsedRow(NamedTuple):
    """A committed replica range as a datanode's scrub and the balancer see it: where,
    the owner stamp of its first block (file, generation, index), and the extent's key
    (the file naming it and its index there: the page cursor)."""

    start: int
    blocks: int
    owner: tuple[int, int, int]
    ino: int
    file_index: int


@dataclass(frozen=True, slots=True)
class BlockGroup:
    """The replica rows of file blocks [file_index, file_index + block_count)."""

    ino: int
    file_index: int
    block_count: int
    replication: int
    rows: tuple[ExtentRow, ...]

    @property
    def key(self) -> tuple[int, int]:
        """(ino, file_index): unique per group."""
        return (self.ino, self.file_index)


@dataclass(frozen=True, slots=True)
class FsckEntry:
    """An inode under the path fsck checks."""

    path: str
    ino: int
    kind: FileKind
    size: int
    replication: int


def _group(r: Sequence[Any]) -> BlockGroup:
    ino, fi, n, rep, datanodes, starts, generations, stamp_inos, stamp_shifts = r
    rows = tuple(
        ExtentRow(fi, n, *columns)
        for columns in zip(datanodes, starts, generations, stamp_inos, stamp_shifts, strict=True)
    )
    return BlockGroup(ino, fi, n, rep, rows)


class ReplicaStore:
    """Queries of replica health over the namenode's store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def group_counts(self, sets: DatanodeSets) -> AsyncIterator[list[Sequence[Any]]]:
        """Batches of (ino, file_index, pattern, on_corrupt) of every group that may need
        work: its replicas counted by the state of their datanodes, packed (see
        unpack_pattern); corrupt blocks are not considered: `on_corrupt` says a replica
        is on a datanode that has some. Records unconverted: a scan reads many."""
        args = (
            sets.not_live,
            sets.live,
            sets.suspect,
            sets.lost,
            sets.draining,
            sets.placeable,
            sets.with_corrupt,
        )
        async with self.store.read_connection() as conn, conn.transaction(readonly=True):
            cursor = await conn.cursor(_GROUP_COUNTS, *args)
            while True:
                rows = await cursor.fetch(SCAN_BATCH)
                if not rows:
                    return
                yield rows

    async def misplaced_files(self, places: dict[int, str]) -> list[int]:
        """Files with a group whose replicas on the live datanodes `places` (datanode ->
        location) span fewer locations than its replicas and replication could."""
        names = {place: k for k, place in enumerate(sorted(set(places.values())))}
        if len(names) < 2:
            return []
        async with self.store.read_connection() as conn, conn.transaction(readonly=True):
            rows = await conn.fetch(
                _MISPLACED, list(places), [names[p] for p in places.values()], len(names)
            )
        return [r[0] for r in rows]

    async def groups_of(self, inos: Sequence[int]) -> list[BlockGroup]:
        """Every group of the files `inos`."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(_GROUPS, list(inos))
        return [_group(tuple(r)) for r in rows]

    async def files_on(self, datanodes: Sequence[int]) -> list[int]:
        """The files with a replica on one of `datanodes`."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(
                "SELECT DISTINCT ino FROM extents WHERE datanode_id = ANY($1::integer[])",
                list(datanodes),
            )
        return [r[0] for r in rows]

    async def replica_blocks(self) -> dict[int, int]:
        """Per datanode, the blocks of committed replicas on it."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(
                "SELECT datanode_id, sum(block_count) FROM extents GROUP BY datanode_id"
            )
        return {r[0]: int(r[1]) for r in rows}

    async def replica_count(self, datanode: int) -> int:
        """How many replica rows a datanode holds."""
        async with self.store.read_connection() as conn:
            return int(
                await conn.fetchval("SELECT count(*) FROM extents WHERE datanode_id = $1", datanode)
            )

    async def used_ranges(
        self, datanode: int, after: int, limit: int, after_ino: int = 0, after_index: int = 0
    ) -> list[UsedRow]:
        """Committed replica ranges of a datanode by start, then file and index: those
        starting at or after block `after`, or with `after_ino` set, those after the
        range of that file and index starting at `after` (a page's last range)."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(
                """SELECT block_start, block_count,
                          CASE stamp_ino WHEN 0 THEN ino ELSE stamp_ino END, generation,
                          file_index + stamp_shift, ino, file_index
                   FROM extents
                   WHERE datanode_id = $1 AND block_start >= $2
                         AND (block_start, ino, file_index) > ($2, $3, $4)
                   ORDER BY block_start, ino, file_index LIMIT $5""",
                datanode,
                after,
                after_ino,
                after_index if after_ino else -1,
                limit,
            )
        return [UsedRow(r[0], r[1], (r[2], r[3], r[4]), r[5], r[6]) for r in rows]

    # --- corrupt blocks -------------------------------------------------------------------

    async def corrupt_ranges(self) -> list[tuple[int, int, int]]:
        """Every recorded corrupt range: (datanode, start, count)."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(
                "SELECT datanode_id, block_start, block_count FROM corrupt_blocks"
            )
        return [(r[0], r[1], r[2]) for r in rows]

    async def record_corrupt(
        self, datanode: int, ranges: Sequence[tuple[int, int, str]]
    ) -> list[tuple[int, int, int]]:
        """Record the parts of `ranges` (start, count, reason) that committed replicas
        of `datanode` use; return the affected replicas as (ino, start, count) of the
        corrupt part. Blocks no replica uses are not corrupt data: they are ignored."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(
                """WITH hit AS (
                       SELECT x.ino, greatest(x.block_start, r.s) AS s,
                              least(x.block_start + x.block_count, r.s + r.c)
                                  - greatest(x.block_start, r.s) AS c,
                              r.reason
                       FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS r(s, c, reason)
                       JOIN extents x ON x.datanode_id = $1
                            AND x.block_start < r.s + r.c
                            AND x.block_start + x.block_count > r.s),
                   saved AS (
                       INSERT INTO corrupt_blocks (datanode_id, block_start, block_count, reason)
                       SELECT $1, s, c, reason FROM hit
                       ON CONFLICT ON CONSTRAINT corrupt_blocks_pkey DO UPDATE
                       SET block_count = greatest(corrupt_blocks.block_count, EXCLUDED.block_count))
                   SELECT ino, s, c FROM hit""",
                datanode,
                [r[0] for r in ranges],
                [r[1] for r in ranges],
                [r[2] for r in ranges],
            )
        return [(r[0], r[1], r[2]) for r in rows]

    # --- datanodes ------------------------------------------------------------------------

    async def set_admin_state(self, datanode: int, state: int) -> None:
        """Record a datanode's administrative state."""
        async with self.store.read_connection() as conn:
            await conn.execute(
                "UPDATE datanodes SET admin_state = $2 WHERE datanode_id = $1", datanode, state
            )

    async def unhold(self, datanode: int, until: float) -> list[tuple[int, int]]:
        """Blocks held for a datanode's return become free after `until` (time.time());
        returns them."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(
                """UPDATE released_extents SET reusable_after = $2
                   WHERE datanode_id = $1 AND reusable_after = 'infinity'
                   RETURNING block_start, block_count""",
                datanode,
                datetime.fromtimestamp(until, UTC),
            )
        return [(r[0], r[1]) for r in rows]

    async def remove_datanode(self, datanode: int) -> bool:
        """Forget a datanode that no replica row names; False if one still does."""
        async with self.store.read_connection() as conn, conn.transaction():
            # Locks the datanode's row: a commit adding a replica on it waits or fails.
            await conn.execute(
                "SELECT 1 FROM datanodes WHERE datanode_id = $1 FOR UPDATE", datanode
            )
            if await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM extents WHERE datanode_id = $1)", datanode
            ):
                return False
            for table in ("released_extents", "corrupt_blocks", "datanodes"):
                await conn.execute(f"DELETE FROM {table} WHERE datanode_id = $1", datanode)
        return True

    # --- fsck -----------------------------------------------------------------------------

    async def subtree(self, root: int, root_path: str) -> AsyncIterator[FsckEntry]:
        """Every inode at and below directory or file `root`, with its path."""
        query = """
            WITH RECURSIVE tree(ino, path) AS (
                SELECT $1::bigint, $2::text COLLATE "C"
                UNION ALL
                SELECT e.ino, CASE WHEN tree.path = '/' THEN '/' ELSE tree.path || '/' END
                              || e.name
                FROM entries e JOIN tree ON e.parent = tree.ino)
            SELECT tree.path, i.ino, i.kind, i.size, i.replication
            FROM tree JOIN inodes i ON i.ino = tree.ino"""
        async with (
            self.store.read_connection() as conn,
            conn.transaction(readonly=True, isolation="repeatable_read"),
        ):
            async for r in conn.cursor(query, root, root_path, prefetch=SCAN_BATCH):
                yield FsckEntry(r[0], r[1], FileKind(r[2]), r[3], r[4])

    async def overlapping_claims(self, limit: int = 100) -> list[str]:
        """Block ranges claimed twice on one datanode, or past its capacity. Extents of
        several files may name the same blocks when they are one file's blocks with
        the same owner stamps (a snapshot's copies of a live file's extents): those
        count as one claim, which a release may overlap only if a snapshot holds it."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(_OVERLAPPING_CLAIMS, limit, SNAPSHOT_INO_BASE)
        errors = []
        for d, start, count, what, overlapped, _capacity in rows:
            end = start + count - 1
            if overlapped:
                errors.append(f"datanode {d}: blocks {start}-{end} ({what}) claimed twice")
            else:
                errors.append(f"datanode {d}: blocks {start}-{end} ({what}) past its capacity")
        return errors

    async def used_blocks(self, now: float) -> dict[int, int]:
        """Per datanode, blocks that committed replicas and releases not yet reusable at
        `now` (time.time()) occupy, each block once however many extents name it."""
        async with self.store.read_connection() as conn:
            rows = await conn.fetch(_USED_BLOCKS, datetime.fromtimestamp(now, UTC))
        return {r[0]: int(r[1]) for r in rows}


# Extents with the same owner stamps at the same place (owner file, generation, and
# the block the owner's block 0 would be at) are one file's blocks named by a live file
# and its snapshots' copies: merged into islands, they make one claim.
_OVERLAPPING_CLAIMS = """
WITH stamped AS (
    SELECT datanode_id, block_start, block_count, generation,
           CASE WHEN stamp_ino = 0 THEN ino ELSE stamp_ino END AS owner,
           block_start - file_index - stamp_shift AS base, ino >= $2 AS in_snapshot
    FROM extents),
marked AS (
    SELECT s.*, max(block_start + block_count) OVER (
        PARTITION BY datanode_id, owner, generation, base ORDER BY block_start, block_count
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM stamped s),
islands AS (
    SELECT m.*, sum(CASE WHEN prev_end IS NULL OR prev_end <= block_start THEN 1 ELSE 0 END)
        OVER (PARTITION BY datanode_id, owner, generation, base ORDER BY block_start, block_count
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
    FROM marked m),
claims AS (
    SELECT datanode_id, min(block_start) AS block_start,
           max(block_start + block_count) - min(block_start) AS block_count,
           'replica' AS what, bool_or(in_snapshot) AS in_snapshot
    FROM islands GROUP BY datanode_id, owner, generation, base, island
    UNION ALL
    SELECT datanode_id, block_start, block_count, 'released', false
    FROM released_extents WHERE reusable_after > now()),
ordered AS (
    SELECT c.*,
        max(block_start + block_count) FILTER (WHERE what = 'replica') OVER w AS replica_end,
        max(block_start + block_count) FILTER (WHERE what = 'replica' AND NOT in_snapshot)
            OVER w AS live_end,
        max(block_start + block_count) FILTER (WHERE what = 'released') OVER w AS released_end
    FROM claims c
    WINDOW w AS (PARTITION BY datanode_id ORDER BY block_start, block_count
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)),
checked AS (
    SELECT o.*, CASE
        WHEN what = 'replica' THEN replica_end > block_start
            OR (NOT in_snapshot AND released_end > block_start)
        ELSE released_end > block_start OR live_end > block_start
    END AS overlapped
    FROM ordered o)
SELECT c.datanode_id, c.block_start, c.block_count, c.what, coalesce(c.overlapped, false),
       d.capacity_blocks
FROM checked c JOIN datanodes d USING (datanode_id)
WHERE coalesce(c.overlapped, false) OR c.block_start + c.block_count > d.capacity_blocks
LIMIT $1
"""

_USED_BLOCKS = """
WITH claims AS (
    SELECT datanode_id, block_start, block_start + block_count AS block_end FROM extents
    UNION ALL
    SELECT datanode_id, block_start, block_start + block_count FROM released_extents
    WHERE reusable_after > $1),
marked AS (
    SELECT c.*, max(block_end) OVER (
        PARTITION BY datanode_id ORDER BY block_start, block_end
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM claims c),
islands AS (
    SELECT m.*, sum(CASE WHEN prev_end IS NULL OR prev_end < block_start THEN 1 ELSE 0 END)
        OVER (PARTITION BY datanode_id ORDER BY block_start, block_end
              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
    FROM marked m)
SELECT datanode_id, sum(n) FROM (
    SELECT datanode_id, max(block_end) - min(block_start) AS n
    FROM islands GROUP BY datanode_id, island) merged
GROUP BY datanode_id
"""
