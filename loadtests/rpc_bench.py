"""What one namenode request costs on each gRPC transport: the poll-based one plasmafs
chooses (`plasmafs.core.grpc_transport`) against gRPC's default EventEngine, on two
clusters running at once, measured in interleaved rounds.

    python -m loadtests.rpc_bench [--calls 3000] [--rounds 3] [--update BENCHMARKS.md]

Each round runs a client process per cluster (its transport is fixed when it loads
gRPC) that makes `calls` getattr requests and `calls` block-list requests of a 1 MiB
file one after another; figures are medians over the rounds: microseconds per request,
the client's CPU and the namenode's CPU per request.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import uvloop

from loadtests.harness import bench_cluster, cpu_seconds, update_benchmarks_md
from plasmafs.core.grpc_transport import POLL_TRANSPORT

TRANSPORTS = {"EventEngine (gRPC's default)": "", "poll (plasmafs's choice)": POLL_TRANSPORT}
OPS = ("getattr", "blocks")
WARM_CALLS = 200


async def _client(address: str, namenode_pid: int, calls: int) -> dict[str, list[float]]:
    """Per operation: microseconds per request, client CPU and namenode CPU per request."""
    from plasmafs.client import Client

    async with Client(address) as fs:
        if not await fs.exists("/f"):
            await fs.write_file("/f", bytes(1 << 20))
        ino = (await fs.stat("/f")).ino
        # The block-list request alone (Client.blocks resolves the path first: two).
        reads = await fs._reads()
        requests = {"getattr": lambda: fs.stat("/f"), "blocks": lambda: reads.blocks(ino)}
        figures: dict[str, list[float]] = {}
        for op in OPS:
            request = requests[op]
            for _ in range(WARM_CALLS):
                await request()
            namenode = cpu_seconds(namenode_pid)
            mine = time.process_time()
            started = time.perf_counter()
            for _ in range(calls):
                await request()
            elapsed = time.perf_counter() - started
            figures[op] = [
                1e6 * elapsed / calls,
                1e6 * (time.process_time() - mine) / calls,
                1e6 * (cpu_seconds(namenode_pid) - namenode) / calls,
            ]
        return figures


def _round(cluster: Any, experiments: str, calls: int) -> dict[str, list[float]]:
    env = {**os.environ, **cluster.client_env, "GRPC_EXPERIMENTS": experiments}
    command = [sys.executable, "-m", "loadtests.rpc_bench", "--client",
               cluster.namenode_address, str(cluster.namenode_pid), str(calls)]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"rpc_bench: the client failed: {done.stderr.strip()[-2000:]}")
    result: dict[str, list[float]] = json.loads(done.stdout.splitlines()[-1])
    return result


def measure(calls: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Median figures per transport and operation."""
    with ExitStack() as stack:
        clusters = {
            name: stack.enter_context(
                bench_cluster(
                    datanodes=1,
                    capacity=2**30,
                    blocksize=256 * 1024,
                    namenode_env={"GRPC_EXPERIMENTS": experiments},
                    datanode_env={"GRPC_EXPERIMENTS": experiments},
                )
            )
            for name, experiments in TRANSPORTS.items()
        }
        runs: dict[str, list[dict[str, list[float]]]] = {name: [] for name in TRANSPORTS}
        for _ in range(rounds):
            for name, experiments in TRANSPORTS.items():
                runs[name].append(_round(clusters[name], experiments, calls))
    return {
        name: {
            op: [statistics.median(run[op][k] for run in results) for k in range(3)] for op in OPS
        }
        for name, results in runs.items()
    }


def report(figures: dict[str, dict[str, list[float]]], calls: int, rounds: int) -> str:
    """The BENCHMARKS.md section for these figures."""
    default, chosen = list(TRANSPORTS)
    lines = [
        "## One namenode request, by gRPC transport (`loadtests/rpc_bench.py`)",
        "",
        f"Command: `python -m loadtests.rpc_bench --calls {calls} --rounds {rounds}` — two "
        "local clusters (PostgreSQL, a namenode, a datanode, TLS on) at once, one on each "
        "transport (the namenode, the datanode and the client all on it); a client "
        f"process per cluster makes {calls} requests of each kind one after another, in "
        f"{rounds} interleaved rounds; medians. Ratio: plasmafs's choice against gRPC's "
        "default (below 1: cheaper).",
        "",
        "| request | measure | " + " | ".join(TRANSPORTS) + " | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    for op in OPS:
        for k, measure_name in enumerate(("µs per request", "client CPU, µs", "namenode CPU, µs")):
            a, b = figures[default][op][k], figures[chosen][op][k]
            ratio = f"{b / a:.2f}" if a > 0 else ""  # a short run may see no CPU tick
            lines.append(f"| {op} | {measure_name} | {a:.0f} | {b:.0f} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and optionally update BENCHMARKS.md."""
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["--client"]:
        address, pid, calls = args_in[1], int(args_in[2]), int(args_in[3])
        print(json.dumps(uvloop.run(_client(address, pid, calls))))
        return 0
    parser = argparse.ArgumentParser(prog="python -m loadtests.rpc_bench")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args(args_in)
    figures = measure(args.calls, args.rounds)
    text = report(figures, args.calls, args.rounds)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "rpc_bench", text)
    print(json.dumps(figures))  # every figure, for scripts
    return 0


if __name__ == "__main__":
    sys.exit(main())
