"""How the namenode's costs grow with the namespace: the same measurements on namespaces
of 0, 1M and 10M entries, each figure with its ratio to the empty namespace.

    python -m loadtests.scale_bench [--sizes 0,1000000,10000000] [--seconds 4]
                                    [--update BENCHMARKS.md]

A local cluster (PostgreSQL, a namenode with its default settings, one datanode). The
"empty" namespace holds only what the measurements need: 1,000 files in 10 directories
(lookups draw from them), 20 files with data, and a deep tree. Each larger size is
reached by bulk-inserting entries into PostgreSQL while the namenode is stopped (SQL
`INSERT ... SELECT generate_series`, then VACUUM ANALYZE; the setup is not what is
measured, so it goes around the namenode): first /big, one directory of 1,000,000 empty
files, then /bulk/dNNNNNN directories of 1,000 empty files each. At each size, after a
cold start of the namenode:

  cold start        process start to the first answered lookup of a random name
  (warm-up)         `--warm` seconds of the lookups below, 64 in flight: the cache fills
                    up to its bound (cache_size, the default 512M)
  lookup 1 / 64     stat of random existing names (uniform over every entry), 1 and 64
                    in flight over one client; then the same over a working set of
                    100,000 names drawn from the whole namespace (each looked up once
                    before)
  create 1 / 64     create+commit of an empty file, one per transaction, 1 and 64 in
                    flight, each writer in its own new directory
  ls first page     the first page of /big (1M entries), and the whole of it
  rename / rm deep  a directory 30 levels down renamed (ms each), a 1,000-entry subtree
                    there removed (rm -r)
  replication scan  the namenode's first full pass over every block group
  fsck              `pfs fsck /` (the CLI)
  memory            what the cache charges for its items, the namenode's resident memory
                    (now, and its peak), PostgreSQL's database size

Prints the table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from loadtests.dump_bench import pfs, wait_live
from loadtests.harness import BenchCluster, bench_cluster, scrape, timed, update_benchmarks_md
from plasmafs.client import Client
from plasmafs.client.removing import remove_tree
from plasmafs.local.cluster import start_namenode_process, stop_process

BIG = 1_000_000  # entries of /big (unless --big says otherwise)
PER_DIR = 1_000  # files per /bulk directory
SMALL_DIRS, SMALL_FILES = 10, 100
DEPTH = 30
WORKING_SET = 100_000  # names looked up again and again (they fit in the cache)
FIRST_BULK_INO = 1 << 40  # far above what the namenode hands out in this run


@dataclass
class Layout:
    """What has been bulk-inserted so far, to draw random names from."""

    big_size: int = BIG  # files /big is made with, once the namespace is that large
    big: int = 0  # files in /big
    bulk_dirs: int = 0  # full directories under /bulk
    next_ino: int = FIRST_BULK_INO
    bulk_ino: int = 0  # the inode of /bulk, once made

    @property
    def entries(self) -> int:
        """Bulk-inserted entries (directories included)."""
        return self.big + (self.big > 0) + self.bulk_dirs * (PER_DIR + 1) + (self.bulk_ino > 0)

    def random_path(self, rng: random.Random) -> str:
        """A name that exists, uniform over the bulk-inserted files and the small tree."""
        small = SMALL_DIRS * SMALL_FILES
        k = rng.randrange(small + self.big + self.bulk_dirs * PER_DIR)
        if k < small:
            return f"/small/d{k // SMALL_FILES}/f{k % SMALL_FILES}"
        k -= small
        if k < self.big:
            return f"/big/f{k:07d}"
        k -= self.big
        return f"/bulk/d{k // PER_DIR:06d}/f{k % PER_DIR:03d}"


async def _insert_files(
    conn: asyncpg.Connection, parent: int, first_ino: int, count: int, names: str, uid: int
) -> None:
    """`count` empty files in directory `parent`, inodes from `first_ino`, named by the
    SQL expression `names` over i (0-based)."""
    now = time.time_ns()
    await conn.execute(
        """INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns, nlink,
                               replication, blocksize)
           SELECT $1::bigint + i, 1, 420, $3::bigint, $3::bigint, 0, $4::bigint,
                  $4::bigint, 1, 1, 1048576
           FROM generate_series(0, $2::int - 1) AS i""",
        first_ino, count, uid, now,
    )  # fmt: skip
    await conn.execute(
        f"""INSERT INTO entries (parent, name, ino)
            SELECT $1::bigint, {names}, $2::bigint + i FROM generate_series(0, $3::int - 1) AS i""",
        parent, first_ino, count,
    )  # fmt: skip


async def _insert_directory(
    conn: asyncpg.Connection, parent: int, name: str, ino: int, subdirs: int, uid: int
) -> None:
    now = time.time_ns()
    await conn.execute(
        """INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns, nlink,
                               replication, blocksize)
           VALUES ($1, 2, 493, $2, $2, 0, $3, $3, $4, 1, 1048576)""",
        ino, uid, now, 2 + subdirs,
    )  # fmt: skip
    await conn.execute(
        "INSERT INTO entries (parent, name, ino) VALUES ($1, $2, $3)", parent, name, ino
    )
    await conn.execute("UPDATE inodes SET nlink = nlink + 1 WHERE ino = $1", parent)


async def grow(dsn: str, layout: Layout, target: int, uid: int) -> None:
    """Bulk-insert entries until `layout.entries` reaches `target`: /big first, then
    /bulk directories of PER_DIR files (a million rows per transaction)."""
    conn = await asyncpg.connect(dsn)
    try:
        # Past every number the namenode handed out (it is stopped).
        handed_out = await conn.fetchval("SELECT last_value FROM inode_numbers")
        layout.next_ino = max(layout.next_ino, handed_out + 1)
        size = layout.big_size
        if layout.big == 0 and target >= size:
            async with conn.transaction():
                big = layout.next_ino
                await _insert_directory(conn, 1, "big", big, 0, uid)
                await _insert_files(conn, big, big + 1, size, "'f' || lpad(i::text, 7, '0')", uid)
            layout.big = size
            layout.next_ino += size + 1
        if layout.bulk_ino == 0 and target > layout.entries:
            layout.bulk_ino = layout.next_ino
            layout.next_ino += 1
            await _insert_directory(conn, 1, "bulk", layout.bulk_ino, 0, uid)
        while layout.entries + PER_DIR + 1 <= target:
            step = min(1000, (target - layout.entries) // (PER_DIR + 1))
            async with conn.transaction():
                first_dir = layout.bulk_dirs
                dirs_ino = layout.next_ino
                await conn.execute(
                    """INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns,
                                          nlink, replication, blocksize)
                       SELECT $1::bigint + i, 2, 493, $3::bigint, $3::bigint, 0, $4::bigint,
                              $4::bigint, 2, 1, 1048576
                       FROM generate_series(0, $2::int - 1) AS i""",
                    dirs_ino, step, uid, time.time_ns(),
                )  # fmt: skip
                await conn.execute(
                    """INSERT INTO entries (parent, name, ino)
                       SELECT $1::bigint, 'd' || lpad(($3::int + i)::text, 6, '0'), $2::bigint + i
                       FROM generate_series(0, $4::int - 1) AS i""",
                    layout.bulk_ino, dirs_ino, first_dir, step,
                )  # fmt: skip
                await conn.execute(
                    "UPDATE inodes SET nlink = nlink + $2 WHERE ino = $1", layout.bulk_ino, step
                )
                files_ino = dirs_ino + step
                await conn.execute(
                    """INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns,
                                          nlink, replication, blocksize)
                       SELECT $1::bigint + i, 1, 420, $3::bigint, $3::bigint, 0, $4::bigint,
                              $4::bigint, 1, 1, 1048576
                       FROM generate_series(0, $2::int - 1) AS i""",
                    files_ino, step * PER_DIR, uid, time.time_ns(),
                )  # fmt: skip
                await conn.execute(
                    """INSERT INTO entries (parent, name, ino)
                       SELECT $1::bigint + i / $4::int, 'f' || lpad((i % $4::int)::text, 3, '0'),
                              $2::bigint + i
                       FROM generate_series(0, $3::int - 1) AS i""",
                    dirs_ino, files_ino, step * PER_DIR, PER_DIR,
                )  # fmt: skip
            layout.bulk_dirs += step
            layout.next_ino = files_ino + step * PER_DIR
        await conn.execute(
            "SELECT setval('inode_numbers', greatest($1, last_value)) FROM inode_numbers",
            layout.next_ino + 1024,
        )
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def build_small(client: Client) -> None:
    """The measurements' own entries: the small tree, files with data, a deep tree."""
    await client.mkdir("/small")
    for d in range(SMALL_DIRS):
        await client.mkdir(f"/small/d{d}")
        async with client.transaction() as t:
            for f in range(SMALL_FILES):
                await t.create(f"/small/d{d}/f{f}")
    await client.mkdir("/data")
    for k in range(20):
        await client.write_file(f"/data/f{k:02d}", os.urandom(64 * 1024 + k))


async def deep_ops(client: Client, tag: str) -> tuple[float, float]:
    """Milliseconds per rename of a directory DEPTH levels down, and seconds to remove a
    1,000-entry subtree there."""
    path = f"/deep-{tag}"
    await client.mkdir(path)
    for level in range(DEPTH):
        path += f"/l{level}"
        await client.mkdir(path)
    await client.mkdir(f"{path}/a")
    for d in range(10):
        await client.mkdir(f"{path}/a/s{d}")
        async with client.transaction() as t:
            for f in range(99):
                await t.create(f"{path}/a/s{d}/f{f}")
    renames = 100
    started = time.perf_counter()
    for k in range(renames):
        src, dst = (f"{path}/a", f"{path}/b") if k % 2 == 0 else (f"{path}/b", f"{path}/a")
        await client.rename(src, dst)
    rename_ms = (time.perf_counter() - started) / renames * 1000
    started = time.perf_counter()
    await remove_tree(client, f"{path}/a")
    return rename_ms, time.perf_counter() - started


async def lookup_rate(
    address: str, pick: Callable[[random.Random], str], conc: int, seconds: float, seed: int
) -> float:
    """Lookups of names `pick` draws per second, `conc` in flight over one client."""
    async with Client(address) as fs:

        async def worker(k: int, running: Callable[[], bool]) -> int:
            rng = random.Random(seed * 1000 + k)
            n = 0
            while running():
                await fs.stat(pick(rng))
                n += 1
            return n

        return (await timed(conc, seconds, worker)).per_second


def working_set(layout: Layout, size: int) -> list[str]:
    """`size` names drawn once uniformly from the whole namespace."""
    sample_rng = random.Random(12345)
    return [layout.random_path(sample_rng) for _ in range(size)]


async def look_up_each(address: str, names: list[str], conc: int = 64) -> None:
    """Every one of `names` looked up once (`conc` in flight)."""
    async with Client(address) as fs:

        async def worker(k: int) -> None:
            for name in names[k::conc]:
                await fs.stat(name)

        await asyncio.gather(*(worker(k) for k in range(conc)))


async def create_rate(address: str, conc: int, seconds: float, tag: str) -> float:
    """Empty files created and committed per second, one per transaction."""
    async with Client(address) as fs:
        for k in range(conc):
            await fs.mkdir(f"/create-{tag}-{k}")

        async def worker(k: int, running: Callable[[], bool]) -> int:
            n = 0
            while running():
                async with fs.transaction() as t:
                    await t.create(f"/create-{tag}-{k}/f{n}")
                n += 1
            return n

        return (await timed(conc, seconds, worker)).per_second


def memory_mib(pid: int) -> tuple[float, float]:
    """Resident memory now and at its peak (VmRSS, VmHWM), MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


@dataclass
class Step:
    """The figures at one size."""

    entries: int
    figures: dict[str, float] = field(default_factory=dict)


async def cold_start(cluster: BenchCluster, layout: Layout) -> float:
    """Restart the namenode; seconds from its process start to a first answered lookup."""
    stop_process(cluster.namenode_pid, "plasmafs.namenode")
    started = time.monotonic()
    cluster.namenode_pid, _, _ = start_namenode_process(
        cluster.workdir, cluster.dsn(), cluster.namenode_address, cluster.registry_address,
        extra_env=cluster.namenode_env,
    )  # fmt: skip
    async with Client(cluster.namenode_address, failover_timeout=120) as client:
        await client.stat(layout.random_path(random.Random(7)))
    return time.monotonic() - started


async def measure(
    cluster: BenchCluster, layout: Layout, seconds: float, warm: float, env: dict[str, str]
) -> Step:
    """Every figure at the current size (the namenode restarted first)."""
    step = Step(layout.entries)
    f = step.figures
    address = cluster.namenode_address
    f["cold_start_s"] = await cold_start(cluster, layout)
    await (await wait_live(address, 1)).close()
    tag = str(layout.entries)
    uniform = layout.random_path
    await lookup_rate(address, uniform, 64, warm, 99)  # the cache fills up to its bound
    for conc in (1, 64):
        f[f"lookup_{conc}_per_s"] = await lookup_rate(address, uniform, conc, seconds, conc)
    names = working_set(layout, WORKING_SET)
    await look_up_each(address, names)  # read once, cached from then on

    def hot(rng: random.Random) -> str:
        return rng.choice(names)

    for conc in (1, 64):
        f[f"hot_lookup_{conc}_per_s"] = await lookup_rate(address, hot, conc, seconds, conc)
    for conc in (1, 64):
        f[f"create_{conc}_per_s"] = await create_rate(address, conc, seconds, f"{tag}-{conc}")
    if layout.big:
        async with Client(address) as client:
            started = time.perf_counter()
            await client.readdir("/big")
            f["ls_first_page_ms"] = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            listed = 0
            async for _ in client.scandir("/big"):
                listed += 1
            f["ls_whole_s"] = time.perf_counter() - started
            assert listed == layout.big, listed
    async with Client(address) as client:
        f["rename_deep_ms"], f["rm_deep_s"] = await deep_ops(client, tag)
    metrics = scrape(cluster.metrics_address)
    f["replication_scan_s"] = metrics["pfs_replication_last_scan_seconds"]
    f["cache_mib"] = metrics["pfs_namenode_cache_bytes"] / 2**20
    f["fsck_s"] = pfs(env, "fsck", "/")
    f["rss_mib"], f["peak_rss_mib"] = memory_mib(cluster.namenode_pid)
    conn = await asyncpg.connect(cluster.dsn())
    try:
        f["postgres_mib"] = await conn.fetchval("SELECT pg_database_size('plasmafs')") / 2**20
    finally:
        await conn.close()
    return step


async def run(
    cluster: BenchCluster, sizes: list[int], seconds: float, warm: float, big: int = BIG
) -> list[Step]:
    """Grow through `sizes` (/big made with `big` files), measuring at each."""
    env = {**os.environ, **cluster.client_env, "PFS_CLIENT_NAMENODE": cluster.namenode_address}
    layout = Layout(big_size=big)
    async with Client(cluster.namenode_address) as client:
        await build_small(client)
    steps = []
    for size in sizes:
        if size > layout.entries:
            stop_process(cluster.namenode_pid, "plasmafs.namenode")
            started = time.monotonic()
            await grow(cluster.dsn(), layout, size, os.getuid())
            print(
                f"built {layout.entries:,} entries in {time.monotonic() - started:.0f} s",
                flush=True,
            )
            cluster.namenode_pid = 0
        step = await measure(cluster, layout, seconds, warm, env)
        print(json.dumps({"entries": step.entries, **step.figures}), flush=True)
        steps.append(step)
    return steps


ROWS: list[tuple[str, str]] = [  # key, label
    ("lookup_1_per_s", "lookups/s, 1 in flight, uniform over all names"),
    ("lookup_64_per_s", "lookups/s, 64 in flight, uniform over all names"),
    ("hot_lookup_1_per_s", "lookups/s, 1 in flight, working set of 100,000 names"),
    ("hot_lookup_64_per_s", "lookups/s, 64 in flight, working set of 100,000 names"),
    ("create_1_per_s", "create+commit/s, 1 in flight"),
    ("create_64_per_s", "create+commit/s, 64 in flight"),
    ("ls_first_page_ms", "ls of the {big}-entry directory, first page, ms"),
    ("ls_whole_s", "ls of the {big}-entry directory, whole, s"),
    ("rename_deep_ms", "rename 30 levels down, ms"),
    ("rm_deep_s", "rm -r of 1,000 entries 30 levels down, s"),
    ("cold_start_s", "namenode cold start to first lookup, s"),
    ("replication_scan_s", "replication scan, s"),
    ("fsck_s", "pfs fsck /, s"),
    ("cache_mib", "namenode cache, charged MiB"),
    ("rss_mib", "namenode RSS after the run, MiB"),
    ("peak_rss_mib", "namenode peak RSS, MiB"),
    ("postgres_mib", "PostgreSQL database, MiB"),
]


def report(steps: list[Step], warm: float, big_size: int = BIG) -> str:
    """The BENCHMARKS.md section."""
    big = "1M" if big_size == 1_000_000 else f"{big_size:,}"
    header = "| | " + " | ".join(f"{s.entries:,} entries" for s in steps) + " |"
    lines = [
        "## Namespace growth (`python -m loadtests.scale_bench`)",
        "",
        "The same measurements on namespaces of growing size (bulk-inserted into PostgreSQL "
        f"for the setup: /big with {big} empty files, then directories of 1,000), the "
        "namenode restarted cold before each column; in parentheses the ratio to the first "
        f"column (to the first with the {big}-entry directory for ls). Before the measured "
        f"rows, {warm:.0f} s of random lookups fill the cache up to its bound "
        "(cache_size, the default 512 MiB). Targets at 10M entries: lookups of a working "
        "set and create+commit >= 0.8x, cold start <= 10 s, RSS within the cache bound "
        "plus a base, fsck <= 5 minutes. Lookups uniform over every name of a namespace "
        "twenty times larger than the cache are mostly misses, each a PostgreSQL read "
        "(batched with the others in flight): their rate is that of PostgreSQL, and "
        "cache_size is the knob (about 1 KiB per cached file).",
        "",
        header,
        "|---|" + "---:|" * len(steps),
    ]
    for key, label in ROWS:
        having = [s for s in steps if key in s.figures]
        base = having[0].figures[key] if having else 0.0
        cells = []
        for s in steps:
            value = s.figures.get(key)
            if value is None:
                cells.append("")
                continue
            shown = f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
            if s is not having[0] and base:
                shown += f" ({value / base:.2f}x)"
            cells.append(shown)
        lines.append(f"| {label.format(big=big)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, run, print (and write the section)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1000000,10000000")
    parser.add_argument("--seconds", type=float, default=4.0, help="per measured rate")
    parser.add_argument(
        "--warm", type=float, default=20.0, help="seconds of random lookups before measuring"
    )
    parser.add_argument(
        "--big", type=int, default=BIG, help="entries of the one large directory (/big)"
    )
    parser.add_argument("--update", type=Path, help="write the section into this file")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    with bench_cluster(datanodes=1, capacity=256 * 1024 * 1024, metrics=True) as cluster:
        steps = asyncio.run(run(cluster, sizes, args.seconds, args.warm, args.big))
    text = report(steps, args.warm, args.big)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "scale", text)
    print(json.dumps([{"entries": s.entries, **s.figures} for s in steps]))


if __name__ == "__main__":
    main()
