"""Fair use: how much one user flooding the namenode cuts another user's lookups.

    python -m loadtests.fair_bench [--seconds 4] [--rounds 3] [--user-share S]
                                   [--update BENCHMARKS.md]

On a throw-away cluster (PostgreSQL, a namenode, TLS on, no datanode), two users
who are not the superuser, each in a process of its own (as two applications on two
hosts would be, here sharing the machine's cores with the namenode and PostgreSQL):

  victim   looks up files of its directory by path, one request at a time (a script
           stat-ing files), and in a second shape with 8 lookups in flight
  flooder  FLOOD_CONNECTIONS connections with FLOOD_DEPTH requests in flight each, in
           a closed loop: lookups of its own files, or create+commit of empty files

Each round measures the victim alone, then beside each flood; the figures are the
medians of the victim's lookups per second with a flood as a ratio to alone (target:
>= 0.8x), with the flooder's own rate beside them (it is held back, not refused).
All of it runs twice: with the namenode's fair use, then on a fresh cluster whose
users only take turns (user_share 1), the baseline of what holding floods back gives.
Prints the table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtests.harness import bench_cluster, timed, update_benchmarks_md
from plasmafs.client import Client
from plasmafs.client.accounts import accounts

FLOOD_CONNECTIONS = 4
FLOOD_DEPTH = 64
VICTIM_FILES = 32
TOKEN_ENV = "PFS_FAIR_BENCH_TOKEN"  # the worker's credential, handed over by the runner
SHAPES = ("alone", "lookups", "creates")
FLOODING = "flooding"  # the flooder's line once it is at full speed
WARMUP = 0.5  # seconds a victim process takes to start, connect and begin
TAIL = 1.0


async def victim(address: str, depth: int, seconds: float) -> float:
    """Lookups per second by path, `depth` in flight, of the victim's own files."""
    async with Client(address, token=os.environ[TOKEN_ENV]) as fs:
        paths = [f"/victim/f{k}" for k in range(VICTIM_FILES)]

        async def worker(k: int, running: Callable[[], bool]) -> int:
            n = 0
            while running():
                await fs.stat(paths[(n + k) % VICTIM_FILES])
                n += 1
            return n

        await fs.stat(paths[0])  # connected before the clock starts
        return (await timed(depth, seconds, worker)).per_second


async def flooder(address: str, kind: str, seconds: float) -> float:
    """Requests per second of a closed-loop flood of `kind` (lookups or creates), counted
    over `seconds` from WARMUP after it printed FLOODING (when the victim starts); it
    goes on for TAIL more, while the victim ends."""
    clients = [Client(address, token=os.environ[TOKEN_ENV]) for _ in range(FLOOD_CONNECTIONS)]
    tag = time.monotonic_ns()
    done = [0]
    stop = asyncio.Event()

    async def worker(k: int) -> None:
        fs = clients[k % FLOOD_CONNECTIONS]
        n = 0
        if kind == "creates":
            await fs.mkdir(f"/flood/{tag}-{k}")
        while not stop.is_set():
            if kind == "creates":
                async with fs.transaction() as t:
                    await t.create(f"/flood/{tag}-{k}/f{n}")
            else:
                await fs.stat(f"/flood/f{(n + k) % VICTIM_FILES}")
            n += 1
            done[0] += 1

    try:
        for fs in clients:
            await fs.stat("/flood")
        workers = [asyncio.create_task(worker(k)) for k in range(FLOOD_CONNECTIONS * FLOOD_DEPTH)]
        await asyncio.sleep(0.5)  # at full speed before the victim is started
        print(FLOODING, flush=True)
        await asyncio.sleep(WARMUP)
        first, started = done[0], time.perf_counter()
        await asyncio.sleep(seconds)
        rate = (done[0] - first) / (time.perf_counter() - started)
        await asyncio.sleep(TAIL)
        stop.set()
        await asyncio.gather(*workers)
        return rate
    finally:
        for fs in clients:
            await fs.close()


def _worker_main(args: argparse.Namespace) -> None:
    if args.worker == "victim":
        rate = asyncio.run(victim(args.address, args.depth, args.seconds))
    else:
        rate = asyncio.run(flooder(args.address, args.worker, args.seconds))
    print(json.dumps({"rate": rate}), flush=True)


def _spawn(role: str, address: str, token: str, seconds: float, depth: int = 1) -> Any:
    env = {**os.environ, TOKEN_ENV: token}
    command = [sys.executable, "-m", "loadtests.fair_bench", "--worker", role]
    command += ["--address", address, "--seconds", str(seconds), "--depth", str(depth)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE)


def _rate(proc: Any) -> float:
    out, _ = proc.communicate(timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"a benchmark worker failed (exit {proc.returncode})")
    return float(json.loads(out.decode().strip().splitlines()[-1])["rate"])


async def _users(address: str) -> dict[str, str]:
    """The victim and the flooder, each owning its directory and files; their tokens."""
    tokens = {}
    async with Client(address) as admin:
        acc = await accounts(admin)
        for name in ("victim", "flooder"):
            info, tokens[name] = await acc.add_user(name)
            home = "/flood" if name == "flooder" else "/victim"
            await admin.mkdir(home)
            for k in range(VICTIM_FILES):
                await admin.create(f"{home}/f{k}")
            await admin.chown(home, info.uid, info.gid)
    return tokens


def measure(
    address: str, tokens: dict[str, str], shape: str, depth: int, seconds: float
) -> dict[str, float]:
    """The victim's rate at `depth` in flight with the flood `shape` (or alone)."""
    flood = None
    if shape != "alone":
        flood = _spawn(shape, address, tokens["flooder"], seconds)
        if flood.stdout.readline().decode().strip() != FLOODING:
            raise RuntimeError("the flooder did not start")
    victim_rate = _rate(_spawn("victim", address, tokens["victim"], seconds, depth))
    figures = {"victim": victim_rate}
    if flood is not None:
        figures["flood"] = _rate(flood)
    return figures


def run(seconds: float, rounds: int, user_share: float | None = None) -> dict[str, Any]:
    """Every figure: on a cluster with the namenode's fair use (its default share, or
    `user_share`), then on one whose users only take turns (user_share 1)."""
    figures: dict[str, Any] = {"seconds": seconds, "rounds": rounds}
    for mode, share in (("fair", user_share), ("turns", 1.0)):
        env = {"PFS_NAMENODE_USER_SHARE": str(share)} if share is not None else None
        samples: dict[str, list[float]] = {}
        with bench_cluster(datanodes=0, namenode_env=env) as cluster:
            address = cluster.namenode_address
            tokens = asyncio.run(_users(address))
            for _ in range(rounds):
                for depth in (1, 8):
                    for shape in SHAPES:
                        got = measure(address, tokens, shape, depth, seconds)
                        for what, value in got.items():
                            samples.setdefault(f"{mode}_{what}_{shape}_{depth}", []).append(value)
        figures.update({k: round(statistics.median(v)) for k, v in samples.items()})
        for depth in (1, 8):
            alone = figures[f"{mode}_victim_alone_{depth}"]
            for shape in SHAPES[1:]:
                victim = figures[f"{mode}_victim_{shape}_{depth}"]
                figures[f"{mode}_ratio_{shape}_{depth}"] = round(victim / alone, 3)
    figures["user_share"] = user_share
    return figures


def report(f: dict[str, Any]) -> str:
    """The BENCHMARKS.md section."""
    share = f"--user-share {f['user_share']:g} " if f["user_share"] is not None else ""
    lines = [
        "## Fair use: one user flooding, another looking up (`loadtests/fair_bench.py`)",
        "",
        f"Command: `python -m loadtests.fair_bench {share}--seconds {f['seconds']:g} "
        f"--rounds {f['rounds']}` — a cluster (PostgreSQL, a namenode, TLS on) with the "
        "namenode's fair use, then one whose users' requests only take turns (user_share "
        "1: nobody held back); each ratio is to the victim alone on the same cluster. The "
        "victim and the flooder are two users, each a process of its own sharing the 2 "
        f"cores with the namenode and PostgreSQL. The flooder keeps {FLOOD_CONNECTIONS} "
        f"connections x {FLOOD_DEPTH} requests in flight; the victim looks up its files "
        "by path. Medians of the rounds.",
        "",
        "| victim in flight | flood | victim lookups/s | alone | ratio | flooder requests/s "
        "| turns only: ratio | flooder requests/s | target |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for depth in (1, 8):
        for shape in SHAPES[1:]:
            lines.append(
                f"| {depth} | {shape} | {f[f'fair_victim_{shape}_{depth}']:,} | "
                f"{f[f'fair_victim_alone_{depth}']:,} | "
                f"**{f[f'fair_ratio_{shape}_{depth}']:.2f}x** | "
                f"{f[f'fair_flood_{shape}_{depth}']:,} | "
                f"{f[f'turns_ratio_{shape}_{depth}']:.2f}x | "
                f"{f[f'turns_flood_{shape}_{depth}']:,} | >= 0.8x |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    parser.add_argument(
        "--user-share", type=float, help="the namenode's user_share (default: its own)"
    )
    parser.add_argument(
        "--worker", choices=("victim", "lookups", "creates"), help=argparse.SUPPRESS
    )
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--depth", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker_main(args)
        return
    figures = run(args.seconds, args.rounds, args.user_share)
    text = report(figures)
    print(text)
    print(json.dumps(figures))
    if args.update:
        update_benchmarks_md(args.update, "fair_bench", text)


if __name__ == "__main__":
    main()
