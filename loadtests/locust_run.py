"""Locust load test of a plasmafs cluster, headless, at several user counts, then the report.

    python -m loadtests.locust_run [--seconds 10] [--users 1,4,16,64] [--processes N]
        [--files lookup,commit,namespace,data] [--namenode HOST:PORT|local]
        [--metrics HOST:PORT] [--out loadtests/results] [--update BENCHMARKS.md]

Without --namenode it starts its own cluster (embedded PostgreSQL, a namenode serving
metrics, 2 datanodes); `--namenode local` uses the `pfs local up` cluster of PFS_HOME;
any other HOST:PORT is used as is (with --metrics for the namenode's view).

Each point is one headless locust run of one locust file at one user count: a master and
`--processes` workers (default: one per core; 1 means a single local runner). Locust
writes its CSVs; while every user runs, this script samples the CPU time of locust, the
namenode and PostgreSQL (when they are local processes; the namenode's own CPU otherwise
comes from its metrics) and the namenode's Prometheus metrics, into `<point>_pfs.json`.
Then loadtests.locust_report turns the results into tables and PNG plots. Any failed
request or failed run makes the exit status non-zero.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtests import locust_report
from loadtests.harness import bench_cluster, cpu_seconds, postgres_cpu_seconds, scrape
from loadtests.locust_window import WINDOW_FILE_ENV, marks
from plasmafs.client.config import pfs_home
from plasmafs.local.cluster import load_state
from plasmafs.local.postgres import free_port

ROOT = Path(__file__).resolve().parent.parent
LOCUST_FILES = ("lookup", "commit", "namespace", "data")
DEFAULT_USERS = (1, 4, 16, 64)
SPAWN_SECONDS = 1  # locust's run time includes spawning (at `users` per second: ~1 s)
POINT_GRACE = 90.0  # seconds a point may take beyond its run time (start-up, shutdown)


@dataclass
class Target:
    """The cluster under test, and what of it this machine can observe."""

    address: str
    metrics: str = ""
    namenode_pid: int | None = None
    postgres_datadir: Path | None = None


@dataclass
class Sample:
    """CPU seconds used so far and the namenode's metrics, at one instant."""

    at: float
    cpu: dict[str, float]
    metrics: dict[str, float] = field(default_factory=dict)


class PointError(RuntimeError):
    """A locust run did not complete."""


def take_sample(target: Target, locust_pids: list[int]) -> Sample:
    """CPU of locust, the namenode and PostgreSQL, and the namenode's metrics, now."""
    cpu: dict[str, float] = {}
    if locust_pids:
        cpu["locust"] = sum(_cpu_or_zero(pid) for pid in locust_pids)
    metrics = scrape(target.metrics)
    if target.namenode_pid:
        cpu["namenode"] = cpu_seconds(target.namenode_pid)
    elif "process_cpu_seconds_total" in metrics:
        cpu["namenode"] = metrics["process_cpu_seconds_total"]
    if target.postgres_datadir:
        cpu["postgres"] = postgres_cpu_seconds(target.postgres_datadir)
    return Sample(time.time(), cpu, metrics)


def _cpu_or_zero(pid: int) -> float:
    # Only at the end of the window can a locust process be gone: the master waits for
    # every worker to report before it stops.
    try:
        return cpu_seconds(pid)
    except OSError:
        return 0.0


def namenode_view(before: Sample, after: Sample) -> dict[str, Any]:
    """What the namenode saw between two samples: requests and latency by operation,
    commits, group-commit size, cache hit ratio."""
    delta = {k: v - before.metrics.get(k, 0.0) for k, v in after.metrics.items()}
    if not delta:
        return {}
    ops: dict[str, Any] = {}
    for key, count in delta.items():
        if key.startswith("pfs_namenode_requests_total{") and count > 0:
            op = key.split('op="', 1)[1].split('"', 1)[0]
            buckets = sorted(
                (float(k.split('le="', 1)[1].split('"', 1)[0]), v)
                for k, v in delta.items()
                if k.startswith("pfs_namenode_request_seconds_bucket{") and f'op="{op}"' in k
            )
            ops[op] = {
                "requests": int(count),
                "p50_ms": _quantile_ms(buckets, 0.50),
                "p99_ms": _quantile_ms(buckets, 0.99),
            }
    commits = delta.get("pfs_namenode_commits_total", 0.0)
    groups = delta.get("pfs_namenode_commit_groups_total", 0.0)
    hits = sum(delta.get(f"pfs_namenode_cache_{k}_hits_total", 0.0) for k in ("inode", "entry"))
    misses = sum(delta.get(f"pfs_namenode_cache_{k}_misses_total", 0.0) for k in ("inode", "entry"))
    return {
        "ops": ops,
        "requests": sum(op["requests"] for op in ops.values()),
        "commits": int(commits),
        "mean_group_size": round(commits / groups, 1) if groups else None,
        "cache_hit_ratio": round(hits / (hits + misses), 4) if hits + misses else None,
    }


def _quantile_ms(cumulative: list[tuple[float, float]], q: float) -> float | None:
    """Prometheus's histogram_quantile over cumulative (upper bound, count) buckets."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in cumulative:
        if count >= rank:
            if bound == float("inf"):
                return round(lower * 1000, 3)
            share = (rank - below) / (count - below) if count > below else 1.0
            return round((lower + (bound - lower) * share) * 1000, 3)
        lower, below = bound, count
    return None


def run_point(
    name: str, users: int, args: argparse.Namespace, target: Target, run_id: str
) -> dict[str, Any]:
    """One headless locust run; returns the point's record (also written as JSON)."""
    prefix = args.out / f"{name}-u{users}"
    window = Path(f"{prefix}_window.txt")
    window.unlink(missing_ok=True)
    locustfile = ROOT / "loadtests" / f"locust_{name}.py"
    env = {
        **os.environ,
        "LOCUST_SKIP_MONKEY_PATCH": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop(WINDOW_FILE_ENV, None)
    pfs_options = [
        "--pfs-namenode", target.address,
        "--pfs-root", f"/locust/{run_id}/{name}-u{users}",
        "--pfs-connections", str(args.connections),
        "--pfs-replication", str(args.replication),
        "--pfs-warmup", f"{args.warmup:g}",
    ]  # fmt: skip
    run_time = math.ceil(args.seconds + args.warmup) + SPAWN_SECONDS
    master = [
        sys.executable, "-m", "locust", "-f", str(locustfile), "--headless",
        "--users", str(users), "--spawn-rate", str(users),
        "--run-time", f"{run_time}s", "--stop-timeout", "10",
        "--csv", str(prefix), "--only-summary", "--loglevel", "WARNING",
        "--exit-code-on-error", "0", *pfs_options,
    ]  # fmt: skip
    workers: list[list[str]] = []
    if args.processes > 1:
        port = free_port()
        master += ["--master", "--expect-workers", str(args.processes)]
        master += ["--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)]
        worker = [
            sys.executable, "-m", "locust", "-f", str(locustfile), "--worker",
            "--master-host", "127.0.0.1", "--master-port", str(port),
            "--loglevel", "WARNING", *pfs_options,
        ]  # fmt: skip
        workers = [worker] * args.processes
    log = open(f"{prefix}_locust.log", "wb")  # noqa: SIM115 - closed in finally
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            subprocess.Popen(
                master, cwd=ROOT, env={**env, WINDOW_FILE_ENV: str(window)}, stdout=log, stderr=log
            )
        )
        procs += [subprocess.Popen(w, cwd=ROOT, env=env, stdout=log, stderr=log) for w in workers]
        start, stop = _watch(procs, window, target, args.seconds + args.warmup + POINT_GRACE)
        codes = [p.returncode for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        log.close()
    if codes[0] != 0 or start is None or stop is None or not Path(f"{prefix}_stats.csv").exists():
        tail = Path(f"{prefix}_locust.log").read_text(errors="replace")[-2000:]
        raise PointError(f"locust {name} at {users} users exited with {codes}:\n{tail}")
    user_errors = _user_errors(Path(f"{prefix}_exceptions.csv"))
    if user_errors:  # a user whose on_start failed is dead: the point ran short of users
        raise PointError(f"locust {name} at {users} users: user errors:\n{user_errors}")
    if not locust_report.read_stats(Path(f"{prefix}_stats.csv")):
        raise PointError(
            f"locust {name} at {users} users: no request was made in the measured window "
            f"(are the users still starting? the log: {prefix}_locust.log)"
        )
    seconds = max(stop.at - start.at, 1e-9)
    record: dict[str, Any] = {
        "file": name,
        "users": users,
        "command": args.command,
        "processes": args.processes,
        "connections_per_process": args.connections,
        "window_seconds": round(seconds, 3),
        "cpu_seconds": {
            k: round(stop.cpu[k] - start.cpu[k], 3) for k in stop.cpu if k in start.cpu
        },
        "namenode": namenode_view(start, stop),
    }
    record["cores"] = {k: round(v / seconds, 2) for k, v in record["cpu_seconds"].items()}
    Path(f"{prefix}_pfs.json").write_text(json.dumps(record, indent=2) + "\n")
    window.unlink(missing_ok=True)
    return record


def _watch(
    procs: list[subprocess.Popen[bytes]], window: Path, target: Target, timeout: float
) -> tuple[Sample | None, Sample | None]:
    """Wait for the master to exit; sample when every user runs and when the test stops."""
    pids = [p.pid for p in procs]
    deadline = time.monotonic() + timeout
    start: Sample | None = None
    stop: Sample | None = None
    while procs[0].poll() is None:
        if time.monotonic() > deadline:
            raise PointError(f"locust did not finish within {timeout:g} s")
        quit_early = [p.pid for p in procs[1:] if p.poll() is not None]
        if quit_early and stop is None:
            raise PointError(f"locust worker(s) {quit_early} exited before the test ended")
        seen = marks(window)
        if start is None and "start" in seen:
            start = take_sample(target, pids)
        if start is not None and stop is None and "stop" in seen:
            stop = take_sample(target, pids)
        time.sleep(0.02)
    for p in procs[1:]:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return start, stop


def _user_errors(path: Path) -> str:
    """The exceptions locust users died of (its `_exceptions.csv`), one line each."""
    if not path.exists():
        return ""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return "\n".join(f"{r.get('Count', '?')} x {r.get('Message', '?')}" for r in rows)


@contextlib.contextmanager
def target_cluster(args: argparse.Namespace) -> Iterator[Target]:
    """The cluster to load: the one named on the command line, or a fresh local one."""
    if args.namenode == "local":
        state = load_state(pfs_home())
        if state is None:
            raise SystemExit("locust_run: no local cluster; run `pfs local up` first")
        datadir = pfs_home() / "postgres" if state.embedded_postgres else None
        yield Target(state.namenode_address, state.metrics_address, state.namenode_pid, datadir)
    elif args.namenode:
        yield Target(args.namenode, args.metrics)
    else:
        datanodes = 2 if "data" in args.files else 0
        # Replaced blocks wait out the ticket lifetime before reuse; a short one keeps
        # the data user's footprint small across the points.
        env = {"PFS_NAMENODE_TICKET_TTL": "30"}
        with bench_cluster(
            datanodes, 2 * 1024**3, 64 * 1024, namenode_env=env, metrics=True
        ) as cluster:
            yield Target(
                cluster.namenode_address,
                cluster.metrics_address,
                cluster.namenode_pid,
                cluster.pg.datadir,
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, validated."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time per point")
    parser.add_argument(
        "--warmup", type=float, default=2.0, help="seconds before the window (users set up)"
    )
    parser.add_argument("--users", default=",".join(map(str, DEFAULT_USERS)))
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--connections", type=int, default=1, help="per locust process")
    parser.add_argument("--replication", type=int, default=1, help="of the data user's files")
    parser.add_argument("--files", default=",".join(LOCUST_FILES))
    parser.add_argument("--namenode", default="", help="HOST:PORT or `local`")
    parser.add_argument("--metrics", default="", help="the namenode's metrics HOST:PORT")
    parser.add_argument("--out", type=Path, default=ROOT / "loadtests" / "results")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args(argv)
    try:
        args.users = sorted({int(u) for u in args.users.split(",")})
    except ValueError:
        parser.error(f"--users must be comma-separated integers, got {args.users!r}")
    if not args.users or args.users[0] < 1:
        parser.error("--users must be positive")
    args.files = [f for f in args.files.split(",") if f]
    unknown = set(args.files) - set(LOCUST_FILES)
    if unknown or not args.files:
        parser.error(f"--files must name some of {', '.join(LOCUST_FILES)}")
    if args.warmup <= 0:
        parser.error("--warmup must be positive (users make their files in it)")
    if args.seconds <= 0 or args.processes < 1 or args.connections < 1 or args.replication < 1:
        parser.error("--seconds, --processes, --connections and --replication must be positive")
    if args.metrics and not args.namenode:
        parser.error("--metrics goes with --namenode")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run every point, write the report, print it and one JSON line."""
    args = parse_args(argv)
    args.command = " ".join(
        ["python -m loadtests.locust_run", *(argv if argv is not None else sys.argv[1:])]
    )
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.files:  # other locust files keep their last results
        for stale in args.out.glob(f"{name}-u*_*"):
            stale.unlink()
    run_id = time.strftime("%Y%m%d-%H%M%S")
    records = []
    try:
        with target_cluster(args) as target:
            for name in args.files:
                for users in args.users:
                    record = run_point(name, users, args, target, run_id)
                    records.append(record)
                    print(f"{name} at {users} users: cores {record['cores']}", flush=True)
    except PointError as exc:
        print(f"locust_run: {exc}", file=sys.stderr)
        return 1
    report = locust_report.build(args.out)
    text = locust_report.markdown(report)
    print(text)
    if args.update:
        locust_report.update(args.update, text)
    print(json.dumps({"points": records, "failures": report.failures}))
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
