"""How fast `pfs admin dump` and `pfs admin load` move a namespace, next to PostgreSQL's
own pg_dump -Fc and pg_restore of the same database in the same run.

    python -m loadtests.dump_bench [--entries 1000000] [--update BENCHMARKS.md]

A local cluster (PostgreSQL, a namenode, two datanodes) gets a few real files
written through the client, then `--entries` directory entries bulk-inserted into
PostgreSQL while the namenode is stopped (a thousandth of them directories, the rest
empty files: the setup is not what is measured, so it goes around the namenode). Then,
each timed: `pfs admin dump FILE` (the CLI, as an operator runs it), pg_dump -Fc of
the same database, a second database with its own superuser, the namenode moved to
it (same addresses, so the same datanodes register), `pfs admin load FILE`, and
pg_restore into a third database. The whole tree is listed before and after (every
entry's name, kind, mode, owner, size, mtime, link count, target) and must be
identical, as must the real files' contents. Prints the figures and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

from loadtests.harness import BenchCluster, bench_cluster, update_benchmarks_md
from plasmafs.client import Client
from plasmafs.local.cluster import ensure_superuser, start_namenode_process, stop_process
from plasmafs.local.postgres import create_database, program_path

REAL_FILES = 20
REAL_SIZE = 256 * 1024
FIRST_BULK_INO = 1 << 40  # far above what the namenode hands out in this run


async def write_real_files(client: Client) -> dict[str, bytes]:
    """A few files with blocks on the datanodes: their contents by path."""
    await client.mkdir("/data")
    contents = {}
    for k in range(REAL_FILES):
        path = f"/data/f{k:02d}"
        contents[path] = os.urandom(REAL_SIZE + k)
        await client.write_file(path, contents[path], replication=1 + k % 2)
    return contents


async def bulk_insert(dsn: str, entries: int, uid: int) -> None:
    """`entries` entries straight into PostgreSQL (the namenode stopped): directories
    /bulk/dNNNN, a thousandth of them, holding empty files."""
    dirs = max(1, entries // 1000)
    files = entries - dirs - 1
    now = time.time_ns()
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            top = FIRST_BULK_INO
            await conn.execute(
                """INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns,
                                      nlink, replication, blocksize)
                   SELECT $1::bigint + i, CASE WHEN i <= $2::int THEN 2 ELSE 1 END,
                          CASE WHEN i <= $2::int THEN 493 ELSE 420 END, $5::bigint,
                          $5::bigint, 0, $4::bigint + i, $4::bigint + i,
                          CASE WHEN i = 0 THEN $2::int + 2 WHEN i <= $2::int THEN 2 ELSE 1 END,
                          1, 1048576
                   FROM generate_series(0, $2::int + $3::int) AS i""",
                top, dirs, files, now, uid,
            )  # fmt: skip
            await conn.execute(
                "INSERT INTO entries (parent, name, ino) VALUES (1, 'bulk', $1)", top
            )
            await conn.execute(
                """INSERT INTO entries (parent, name, ino)
                   SELECT $1::bigint, 'd' || lpad(i::text, 5, '0'), $1::bigint + i
                   FROM generate_series(1, $2::int) AS i""",
                top, dirs,
            )  # fmt: skip
            await conn.execute(
                """INSERT INTO entries (parent, name, ino)
                   SELECT $1::bigint + 1 + (i % $2::int), 'file-' || i,
                          $1::bigint + $2::int + 1 + i
                   FROM generate_series(0, $3::int - 1) AS i""",
                top, dirs, files,
            )  # fmt: skip
            await conn.execute("UPDATE inodes SET nlink = nlink + 1 WHERE ino = 1")
            await conn.execute("SELECT setval('inode_numbers', $1)", top + entries + 1024)
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def tree_digest(client: Client) -> tuple[int, str]:
    """How many entries the tree has and a digest of its whole listing."""
    digest = hashlib.sha256()
    count = 0
    async for e in client.walk("/"):
        a = e.attr
        line = (e.path, int(a.kind), a.mode, a.uid, a.gid, a.size, a.mtime_ns, a.nlink, e.target)
        digest.update(repr(line).encode())
        count += 1
    return count, digest.hexdigest()


def pfs(env: dict[str, str], *args: str) -> float:
    """Run `pfs ARGS`; its wall time."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "plasmafs.cli", *args], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"pfs {' '.join(args)} failed: {done.stderr.strip()}")
    return time.monotonic() - started


def timed(command: list[str]) -> float:
    """Run a program; its wall time."""
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed: {done.stderr.strip()}")
    return time.monotonic() - started


def move_namenode(cluster: BenchCluster, dsn: str, home: Path) -> None:
    """The namenode on another database, at the same addresses (the datanodes follow)."""
    stop_process(cluster.namenode_pid, "plasmafs.namenode")
    cluster.namenode_pid, _, _ = start_namenode_process(
        home, dsn, cluster.namenode_address, cluster.registry_address,
        extra_env=cluster.namenode_env,
    )  # fmt: skip


def restart_namenode(cluster: BenchCluster) -> None:
    """The namenode again on its database."""
    move_namenode(cluster, cluster.dsn(), cluster.workdir)


async def wait_live(address: str, datanodes: int) -> Client:
    """A client once every datanode is live."""
    client = Client(address, failover_timeout=60)
    async with asyncio.timeout(120):
        while (await client.fsstat()).live_datanodes < datanodes:
            await asyncio.sleep(0.1)
    return client


async def run(cluster: BenchCluster, entries: int) -> dict[str, float]:
    """Build, dump, load, compare on `cluster` (two datanodes); the figures."""
    env = {**os.environ, **cluster.client_env, "PFS_CLIENT_NAMENODE": cluster.namenode_address}
    async with Client(cluster.namenode_address) as client:
        contents = await write_real_files(client)
    stop_process(cluster.namenode_pid, "plasmafs.namenode")
    started = time.monotonic()
    await bulk_insert(cluster.dsn(), entries, os.getuid())
    build_s = time.monotonic() - started
    restart_namenode(cluster)
    client = await wait_live(cluster.namenode_address, 2)
    count, before = await tree_digest(client)
    await client.close()

    saved = cluster.workdir / "namespace.dump"
    dump_s = pfs(env, "admin", "dump", str(saved))
    pg_saved = cluster.workdir / "pg_dump.custom"
    pg = cluster.pg
    connection = ["-h", pg.host, "-p", str(pg.port), "-U", "postgres"]
    pg_dump_s = timed(
        [str(program_path("pg_dump")), *connection, "-Fc", "-f", str(pg_saved), "plasmafs"]
    )

    # A new cluster on a second database, with a superuser of its own.
    await create_database(pg.dsn(), "plasmafs2")
    home = cluster.workdir / "second"
    home.mkdir()
    token = ensure_superuser(home, pg.dsn("plasmafs2"))
    move_namenode(cluster, pg.dsn("plasmafs2"), home)
    env2 = {**env, "PFS_TOKEN_FILE": str(token)}
    os.environ["PFS_TOKEN_FILE"] = str(token)
    await (await wait_live(cluster.namenode_address, 2)).close()
    load_s = pfs(env2, "admin", "load", str(saved))
    for line in (home / "namenode.log").read_text().splitlines():
        if "namespace_dump" in line:
            print(line.partition("namespace_dump: ")[2], file=sys.stderr)  # where it went
    client = await wait_live(cluster.namenode_address, 2)
    count_after, after = await tree_digest(client)
    for path, data in contents.items():
        if await client.read_file(path) != data:
            raise SystemExit(f"{path} differs after the load")
    await client.close()
    if (count_after, after) != (count, before):
        raise SystemExit(f"the tree differs after the load ({count} -> {count_after})")

    await create_database(pg.dsn(), "plasmafs3", template="template0")
    pg_restore_s = timed(
        [str(program_path("pg_restore")), *connection, "-d", "plasmafs3", str(pg_saved)]
    )
    return {
        "entries": count - 1,
        "build_s": build_s,
        "dump_s": dump_s,
        "dump_entries_per_s": (count - 1) / dump_s,
        "dump_bytes": saved.stat().st_size,
        "load_s": load_s,
        "load_entries_per_s": (count - 1) / load_s,
        "pg_dump_s": pg_dump_s,
        "pg_dump_bytes": pg_saved.stat().st_size,
        "pg_restore_s": pg_restore_s,
        "dump_vs_pg_dump": pg_dump_s / dump_s,
        "load_vs_pg_restore": pg_restore_s / load_s,
    }


def report(f: dict[str, float]) -> str:
    """The BENCHMARKS.md section."""
    mib = 1024 * 1024
    return "\n".join(
        [
            "## Namespace dump and load (`python -m loadtests.dump_bench`)",
            "",
            f"{f['entries']:,.0f} directory entries (a thousandth directories, the rest empty "
            f"files, plus {REAL_FILES} files with data on two datanodes), bulk-inserted into "
            "PostgreSQL for the setup. Each command timed as an operator runs it (the CLI, "
            "to a file); the baseline is PostgreSQL's pg_dump -Fc / pg_restore of the same "
            "database in the same run. After the load the whole listing and the files' "
            "contents are identical (checked).",
            "",
            "| | seconds | entries/s | file MiB | vs pg_dump / pg_restore |",
            "|---|---:|---:|---:|---:|",
            f"| `pfs admin dump` | {f['dump_s']:.1f} | {f['dump_entries_per_s']:,.0f} | "
            f"{f['dump_bytes'] / mib:.0f} | {f['dump_vs_pg_dump']:.2f}x as fast |",
            f"| `pfs admin load` (into a new cluster) | {f['load_s']:.1f} | "
            f"{f['load_entries_per_s']:,.0f} | | {f['load_vs_pg_restore']:.2f}x as fast |",
            f"| pg_dump -Fc | {f['pg_dump_s']:.1f} | | {f['pg_dump_bytes'] / mib:.0f} | 1 |",
            f"| pg_restore | {f['pg_restore_s']:.1f} | | | 1 |",
        ]
    )


def main() -> None:
    """Parse arguments, run, print (and write the section)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--update", type=Path, help="write the section into this file")
    args = parser.parse_args()
    with bench_cluster(datanodes=2, capacity=256 * 1024 * 1024) as cluster:
        figures = asyncio.run(run(cluster, args.entries))
    text = report(figures)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "dump", text)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
