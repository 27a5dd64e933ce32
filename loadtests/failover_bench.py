"""Failover benchmark: how long writes stop when the active namenode's host dies or is
cut off, as clients see it, and whether any acknowledged write is lost.

    python -m loadtests.failover_bench [--trials 3] [--postgres-trials 2] [--clients 4]
        [--readers 4] [--files 20000] [--after 60] [--update BENCHMARKS.md]

A cluster on hosts of their own (`loadtests/hosts.py`: PostgreSQL on three hosts
under Patroni, two namenodes with the default lease, three datanodes), a namespace of
FILES existing files, and clients that know both namenodes: writers creating one file
per transaction, readers looking up existing files at random. Per trial the active
namenode's host, or PostgreSQL's primary's, is killed (SIGKILL of its processes: the
kernel closes its sockets) or cut off (its link down: nothing answers, nothing is
reset), then brought back (a standby, a replica) for the next trial. Printed per
fault: the time from the fault to the first create acknowledged by the new active
namenode (for PostgreSQL, the first create begun after the fault), as a ratio to the
lease too (the part a standby must wait); creates acknowledged and then missing (must
be 0); errors clients saw in the gap; and what the first minute costs (caches start
cold): the create and lookup rates in the first FIRST seconds after writes resume and
in the second half of AFTER seconds, over the rates in the BEFORE seconds before the
fault. Targets (the issue's): kill -9 of a namenode's host within 5 s, a cut-off one
within 10 s, PostgreSQL's primary's host lost within 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadtests.harness import update_benchmarks_md
from loadtests.hosts import HostCluster, host_cluster
from plasmafs.client import Client, PlasmaError

# The targets: a namenode's host lost, and PostgreSQL's primary's host lost
# (Patroni's ttl is 20 s at least).
TARGETS = {"kill -9": 5.0, "cut off": 10.0, "postgres kill -9": 30.0, "postgres cut off": 30.0}
BEFORE = 10.0  # seconds of steady load measured before the fault
FIRST = 5.0  # seconds measured right after the takeover
SPREAD = 100  # directories the existing files are spread over


@dataclass
class Writers:
    """Clients creating files, one per transaction, recording which namenode answered,
    and readers looking up existing files at random."""

    addresses: str
    clients: int
    readers: int
    files: int
    # time acknowledged, namenode, name, time begun
    acknowledged: list[tuple[float, str, str, float]] = field(default_factory=list)
    looked_up: list[float] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def populate(self) -> None:
        """Create the files the readers look up, 500 per transaction."""
        async with Client(self.addresses) as fs:
            for d in range(SPREAD):
                await fs.mkdir(f"/existing/d{d}", parents=True)
            names = [_existing(k) for k in range(self.files)]
            for start in range(0, len(names), 500):
                async with fs.transaction() as t:
                    for name in names[start : start + 500]:
                        await t.create(name)

    def start(self, trial: int) -> None:
        """Start the clients, each writer in a directory of its own."""
        self._stop.clear()
        self._tasks = [
            asyncio.create_task(self._write(f"/t{trial}c{k}")) for k in range(self.clients)
        ] + [asyncio.create_task(self._read()) for _ in range(self.readers)]

    def clear(self) -> None:
        """Forget the last trial's records."""
        self.acknowledged.clear()
        self.looked_up.clear()
        self.errors.clear()

    async def stop(self) -> None:
        """Stop the clients."""
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _write(self, directory: str) -> None:
        k = 0
        while not self._stop.is_set():
            try:
                async with Client(self.addresses, connect_timeout=2) as fs:
                    if k == 0:
                        await fs.mkdir(directory)
                    while not self._stop.is_set():
                        k += 1
                        name = f"{directory}/f{k}"
                        begun = time.monotonic()
                        await fs.create(name)
                        answered = (await fs.connection()).address
                        self.acknowledged.append((time.monotonic(), answered, name, begun))
            except PlasmaError:
                self.errors.append(time.monotonic())
                await asyncio.sleep(0.02)

    async def _read(self) -> None:
        while not self._stop.is_set():
            try:
                async with Client(self.addresses, connect_timeout=2) as fs:
                    while not self._stop.is_set():
                        await fs.stat(_existing(random.randrange(self.files)))
                        self.looked_up.append(time.monotonic())
            except PlasmaError:
                self.errors.append(time.monotonic())
                await asyncio.sleep(0.02)


def _existing(k: int) -> str:
    return f"/existing/d{k % SPREAD}/f{k}"


@dataclass
class Trial:
    """One fault's outcome."""

    fault: str
    gap: float  # seconds from the fault to the first create the new active acknowledged
    lost: int
    errors: int
    # Rates after the takeover over the rate in the BEFORE seconds before the fault:
    creates_first: float  # creates/s in the FIRST seconds
    creates_rest: float  # creates/s in the second half of the measured time
    lookups_first: float
    lookups_rest: float


def active_of(cluster: HostCluster) -> str:
    """The namenode host that holds the lease now (from the logs: the last to log it)."""
    latest, host = 0.0, cluster.namenodes[0]
    for name in cluster.namenodes:
        log = cluster.workdir / name / "namenode.log"
        for line in log.read_text(errors="replace").splitlines():
            if "namenode active (term" in line:
                term = int(line.split("(term ")[1].split(")")[0])
                if term > latest:
                    latest, host = term, name
    return host


async def run_trial(
    cluster: HostCluster, writers: Writers, fault: str, trial: int, after: float
) -> Trial:
    """Write and read, break the active namenode's host (or PostgreSQL's primary's),
    go on for `after` seconds once writes resume."""
    database = fault.startswith("postgres")
    patroni = cluster.patroni
    if database:
        assert patroni is not None
        leader = patroni.leader()
        assert leader is not None
        old, old_address = leader, ""
    else:
        old = active_of(cluster)
        old_address = cluster.address(old)
    stood_by = _standing_by(cluster, old) if not database else 0
    writers.start(trial)
    async with asyncio.timeout(60):  # a steady rate first, for the window before the fault
        while not writers.acknowledged or (
            time.monotonic() - writers.acknowledged[0][0] < BEFORE + 1
        ):
            await asyncio.sleep(0.05)
    errors_before = len(writers.errors)
    started = time.monotonic()
    if fault.endswith("kill -9"):
        cluster.network.host(old).kill()
    else:
        cluster.network.cut(old)

    def resumed(ack: tuple[float, str, str, float]) -> bool:
        # A new active's answer; for PostgreSQL, a create begun after the fault.
        t, nn, _, begun = ack
        return t > started and (begun > started if database else nn != old_address)

    async with asyncio.timeout(180):
        while not any(resumed(ack) for ack in writers.acknowledged):
            await asyncio.sleep(0.01)
    first = min(ack[0] for ack in writers.acknowledged if resumed(ack))
    await asyncio.sleep(after)  # writes and reads go on, on the new active's cold caches
    await writers.stop()
    errors = len([e for e in writers.errors[errors_before:] if e < first])
    lost = await _lost(cluster, writers, trial)
    if database:
        assert patroni is not None
        if fault.endswith("kill -9"):
            patroni.restart(old)
        else:
            cluster.network.restore(old)
        async with asyncio.timeout(180):  # back, as a replica: ready for the next trial
            while patroni.states().get(old) != "replica/running":
                await asyncio.sleep(0.5)
    else:
        if fault == "kill -9":
            cluster.start_namenode(old)
        else:
            cluster.network.restore(old)
        async with asyncio.timeout(120):  # back, as a standby: ready for the next trial
            while _standing_by(cluster, old) <= stood_by:
                await asyncio.sleep(0.1)
    creates = [ack[0] for ack in writers.acknowledged]
    lookups = writers.looked_up
    split, half, end = first + min(FIRST, after), first + after / 2, first + after
    return Trial(
        fault,
        first - started,
        lost,
        errors,
        creates_first=_ratio(creates, first, split, started),
        creates_rest=_ratio(creates, max(split, half), end, started),
        lookups_first=_ratio(lookups, first, split, started),
        lookups_rest=_ratio(lookups, max(split, half), end, started),
    )


def _ratio(times: list[float], start: float, end: float, fault: float) -> float:
    """Events per second between `start` and `end` over the rate in the BEFORE s before
    `fault` (all time.monotonic())."""
    before = _rate(times, fault - BEFORE, fault)
    return _rate(times, start, end) / before if before and end > start else float("nan")


def _rate(times: list[float], start: float, end: float) -> float:
    return sum(1 for t in times if start <= t < end) / (end - start)


async def _lost(cluster: HostCluster, writers: Writers, trial: int) -> int:
    names = {ack[2] for ack in writers.acknowledged if ack[2].startswith(f"/t{trial}c")}
    present: set[str] = set()
    async with Client(cluster.addresses) as fs:
        for k in range(writers.clients):
            directory = f"/t{trial}c{k}"
            present |= {f"{directory}/{n}" for n in await fs.listdir(directory)}
    return len(names - present)


def _standing_by(cluster: HostCluster, name: str) -> int:
    """How often namenode host `name` has logged that it stands by."""
    log = cluster.workdir / name / "namenode.log"
    return log.read_text(errors="replace").count("standing by")


async def bench(cluster: HostCluster, args: argparse.Namespace) -> list[Trial]:
    """Every trial of both faults on `cluster`."""
    results: list[Trial] = []
    writers = Writers(cluster.addresses, args.clients, args.readers, args.files)
    await writers.populate()
    number = 0
    for fault in TARGETS:
        trials = args.postgres_trials if fault.startswith("postgres") else args.trials
        for _ in range(trials):
            number += 1
            writers.clear()
            trial = await run_trial(cluster, writers, fault, number, args.after)
            print(f"{fault}: {trial.gap:.2f} s, lost {trial.lost}, errors {trial.errors}",
                  file=sys.stderr)  # fmt: skip
            results.append(trial)
    return results


def report(results: list[Trial], lease: float, ttl: float, args: argparse.Namespace) -> str:
    """The figures as a BENCHMARKS.md section (`ttl`: Patroni's, the least a PostgreSQL
    failover waits, as the lease is for a namenode's)."""
    rest = f"{max(FIRST, args.after / 2):g}-{args.after:g} s"
    lines = [
        f"Command: `python -m loadtests.failover_bench {_options(args)}` — PostgreSQL on "
        f"three hosts under Patroni (synchronous replication, ttl {ttl:g} s; "
        "`loadtests/pg_ha.py`), "
        f"two namenodes (lease {lease:g} s) and three datanodes on hosts of their own "
        "(network namespaces on a bridge, `loadtests/hosts.py`), "
        f"{args.files:,} existing files; {args.clients} clients knowing both namenodes "
        f"create one file per transaction while {args.readers} look up existing files "
        "at random. Gap: from the fault to the first create the new active namenode "
        "acknowledged, as clients saw it (for PostgreSQL's primary, the first create "
        "begun after the fault); its ratio to what a standby must wait at least (the "
        "namenode's lease; Patroni's ttl for PostgreSQL's primary). Lost: creates "
        "acknowledged and missing afterwards. After the "
        "takeover: rates in the first seconds and in the second half of the first minute "
        "on the new active, over the rates in the "
        f"{BEFORE:g} s before the fault (medians of the trials).",
        "",
        "| fault | trials | gap, median | gap, max | max / lease or ttl | lost | client errors "
        f"in the gap | creates 0-{FIRST:g} s | creates {rest} | lookups 0-{FIRST:g} s "
        f"| lookups {rest} | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for fault, target in TARGETS.items():
        mine = [r for r in results if r.fault == fault]
        if not mine:
            continue
        gaps = [r.gap for r in mine]
        wait = ttl if fault.startswith("postgres") else lease
        ratios = [
            statistics.median(getattr(r, column) for r in mine)
            for column in ("creates_first", "creates_rest", "lookups_first", "lookups_rest")
        ]
        lines.append(
            f"| {fault} | {len(mine)} | {statistics.median(gaps):.2f} s | {max(gaps):.2f} s "
            f"| {max(gaps) / wait:.2f} | {sum(r.lost for r in mine)} "
            f"| {sum(r.errors for r in mine)} | "
            + " | ".join(f"{ratio:.2f}" for ratio in ratios)
            + f" | <= {target:g} s, 0 lost |"
        )
    return "\n".join(lines) + "\n"


def _options(args: argparse.Namespace) -> str:
    return (
        f"--trials {args.trials} --clients {args.clients} --readers {args.readers} "
        f"--files {args.files} --after {args.after:g} --postgres-trials {args.postgres_trials}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the trials and print (or write) the table."""
    parser = argparse.ArgumentParser(prog="python -m loadtests.failover_bench")
    parser.add_argument("--trials", type=int, default=3, help="trials per namenode fault")
    parser.add_argument(
        "--postgres-trials", type=int, default=2, help="trials per PostgreSQL fault"
    )
    parser.add_argument("--clients", type=int, default=4, help="clients creating at once")
    parser.add_argument("--readers", type=int, default=4, help="clients looking up at once")
    parser.add_argument("--files", type=int, default=20000, help="existing files to look up")
    parser.add_argument(
        "--after", type=float, default=60.0, help="seconds measured after each takeover"
    )
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args(argv)
    with host_cluster(namenodes=2, datanodes=3, databases=3) as cluster:
        # Clients of this process trust the cluster's CA, with its superuser's token.
        os.environ.update(cluster.client_env())
        results = asyncio.run(bench(cluster, args))
    ttl = cluster.patroni.ttl if cluster.patroni is not None else 0.0
    text = report(results, cluster.lease_ttl, ttl, args)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "failover_bench", text)
    return 0 if all(r.lost == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
