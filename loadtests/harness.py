"""What the benchmarks share: a throw-away local cluster, timed loops, CPU accounting,
and the BENCHMARKS.md section writer."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from prometheus_client.parser import text_string_to_metric_families

from loadtests.peak import peak_kib
from plasmafs.core.secret_files import ensure_random_key
from plasmafs.local.cluster import (
    cluster_ca,
    daemon_tls_env,
    ensure_superuser,
    insecure_env,
    start_datanode_process,
    start_namenode_process,
    stop_process,
)
from plasmafs.local.postgres import (
    LocalPostgres,
    create_database,
    free_port,
    start_postgres,
    stop_postgres,
)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CLIENT_SETTINGS = ("PFS_CLIENT_CA", "PFS_TOKEN_FILE")  # how clients trust and are known


@dataclass
class BenchCluster:
    """PostgreSQL plus a namenode, started for one benchmark run."""

    workdir: Path
    pg: LocalPostgres
    namenode_pid: int
    namenode_address: str
    datanode_pids: list[int]
    metrics_address: str = ""
    client_env: dict[str, str] = field(default_factory=dict)  # how clients reach it
    registry_address: str = ""  # where the datanodes register
    namenode_env: dict[str, str] = field(default_factory=dict)  # its PFS_NAMENODE_* settings

    def dsn(self, database: str = "plasmafs") -> str:
        """DSN of a database on the run's PostgreSQL."""
        return self.pg.dsn(database)


@contextmanager
def bench_cluster(
    datanodes: int = 0,
    capacity: int = 0,
    blocksize: int = 1024 * 1024,
    workdir: Path | None = None,
    namenode_env: dict[str, str] | None = None,
    metrics: bool = False,
    datanode_env: dict[str, str] | None = None,
    secure: bool = True,
) -> Iterator[BenchCluster]:
    """Start PostgreSQL (embedded), a namenode and `datanodes` datanodes; `metrics` also
    serves the namenode's Prometheus metrics, `namenode_env` and `datanode_env` add
    PFS_NAMENODE_* and PFS_DATANODE_* settings. `secure` (the default, as for a local
    cluster) runs every daemon with TLS certificates of a CA made in `workdir` and makes
    a superuser; for the cluster's lifetime this process's clients (and the processes
    it starts) trust that CA and act as that superuser (PFS_CLIENT_CA, PFS_TOKEN_FILE:
    `client_env`). Otherwise the daemons run insecure, in plaintext, and clients are
    told nothing."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="pfs-bench-"))
    pg = start_postgres(workdir / "postgres")
    pid = 0
    cluster: BenchCluster | None = None
    dn_pids: list[int] = []

    def security(role: str, name: str) -> dict[str, str]:
        if secure:
            return daemon_tls_env(workdir, role, name)
        return insecure_env(role)

    saved = {k: os.environ.pop(k, None) for k in CLIENT_SETTINGS}
    client_env: dict[str, str] = {}
    env = {
        "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(blocksize),
        "PFS_NAMENODE_S3_SECRET_FILE": str(ensure_random_key(workdir / "s3-secret.key")),
        **security("namenode", "namenode"),
        **(namenode_env or {}),
    }
    metrics_address = f"127.0.0.1:{free_port()}" if metrics else ""
    if metrics_address:
        env["PFS_NAMENODE_METRICS_LISTEN"] = metrics_address
    try:
        asyncio.run(create_database(pg.dsn(), "plasmafs"))
        if secure:
            client_env = {
                "PFS_CLIENT_CA": str(cluster_ca(workdir)),
                "PFS_TOKEN_FILE": str(ensure_superuser(workdir, pg.dsn("plasmafs"))),
            }
            os.environ.update(client_env)
        pid, address, registry = start_namenode_process(
            workdir, pg.dsn("plasmafs"), "127.0.0.1:0", "127.0.0.1:0", extra_env=env
        )
        for k in range(datanodes):
            dn_pid, _ = start_datanode_process(
                workdir / f"datanode-{k + 1}",
                registry,
                capacity,
                blocksize,
                extra_env={**security("datanode", f"datanode-{k + 1}"), **(datanode_env or {})},
            )
            dn_pids.append(dn_pid)
        cluster = BenchCluster(
            workdir, pg, pid, address, dn_pids, metrics_address, client_env, registry, env
        )
        yield cluster
    finally:
        if cluster is not None:
            pid = cluster.namenode_pid  # a benchmark may have started another one, or failed

        for dn in dn_pids:
            stop_process(dn, "plasmafs.datanode")
        if pid:
            stop_process(pid, "plasmafs.namenode")
        stop_postgres(pg.datadir)
        shutil.rmtree(workdir, ignore_errors=True)
        for key, value in saved.items():
            os.environ.pop(key, None)
            if value is not None:
                os.environ[key] = value


def peak_rss_mib(pid: int) -> float:
    """The highest resident memory a running process has had (VmHWM), in MiB."""
    return peak_kib(pid) / 1024


def cpu_seconds(pid: int) -> float:
    """User+system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def postgres_cpu_seconds(datadir: Path) -> float:
    """CPU time used so far by a PostgreSQL server: the postmaster, its live children, and
    the children it has already reaped (backends of closed connections)."""
    postmaster = int((datadir / "postmaster.pid").read_text().splitlines()[0])
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(proc.name) == postmaster:
            total += sum(int(v) for v in fields[11:15]) / CLOCK_TICKS  # own + reaped children
        elif int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


@dataclass
class Rate:
    """Operations per second, and the namenode CPU each cost (if measured)."""

    ops: int
    seconds: float
    server_cpu: float | None = None
    postgres_cpu: float | None = None

    @property
    def per_second(self) -> float:
        """Throughput."""
        return self.ops / self.seconds if self.seconds else 0.0

    @property
    def server_us_per_op(self) -> float | None:
        """Namenode CPU microseconds per operation."""
        if self.server_cpu is None or not self.ops:
            return None
        return self.server_cpu / self.ops * 1e6

    @property
    def postgres_us_per_op(self) -> float | None:
        """PostgreSQL CPU microseconds per operation."""
        if self.postgres_cpu is None or not self.ops:
            return None
        return self.postgres_cpu / self.ops * 1e6


async def timed(
    concurrency: int,
    seconds: float,
    worker: Callable[[int, Callable[[], bool]], Awaitable[int]],
    server_pid: int | None = None,
    pg_datadir: Path | None = None,
) -> Rate:
    """Run `concurrency` workers until `seconds` pass; each returns how many ops it did."""
    deadline = time.perf_counter() + seconds
    cpu0 = cpu_seconds(server_pid) if server_pid else None
    pg0 = postgres_cpu_seconds(pg_datadir) if pg_datadir else None
    start = time.perf_counter()
    counts = await asyncio.gather(
        *(worker(i, lambda: time.perf_counter() < deadline) for i in range(concurrency))
    )
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(server_pid) - cpu0 if server_pid and cpu0 is not None else None
    pg = postgres_cpu_seconds(pg_datadir) - pg0 if pg_datadir and pg0 is not None else None
    return Rate(sum(counts), elapsed, cpu, pg)


def start_floor_server(
    module: str, workdir: Path, *args: str
) -> tuple[subprocess.Popen[bytes], str]:
    """A floor's server (`python -m MODULE READY_FILE ARGS`) in its own process, and its
    address."""
    ready = workdir / f"{module.rpartition('.')[2]}.ready"
    ready.unlink(missing_ok=True)  # left by an earlier server in the same directory
    proc = subprocess.Popen([sys.executable, "-m", module, str(ready), *args])
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{module} did not start")
        time.sleep(0.02)
    return proc, ready.read_text().strip()


async def serve_floor(
    handler: grpc.GenericRpcHandler, ready: Path, options: list[tuple[str, int]] | None = None
) -> None:
    """Serve a floor's generic handler on 127.0.0.1, write its address to `ready`, and run
    until SIGTERM."""
    server = grpc.aio.server(options=options)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    ready.write_text(f"127.0.0.1:{port}\n")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(0)


def scrape(metrics: str) -> dict[str, float]:
    """The namenode's metrics as {'name{label="v",...}': value}."""
    if not metrics:
        return {}
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            values[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return values


def update_benchmarks_md(path: Path, section: str, body: str) -> None:
    """Replace the section between `<!-- section:begin -->` and `<!-- section:end -->`."""
    begin, end = f"<!-- {section}:begin -->", f"<!-- {section}:end -->"
    text = path.read_text() if path.exists() else "# plasmafs benchmarks\n"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _: block, text) if pattern.search(text) else text + "\n" + block + "\n"
    )
    path.write_text(text)
