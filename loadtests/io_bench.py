"""Data-path benchmark: put, get, cat and random reads against floors in the same run.

    python -m loadtests.io_bench [--size 2G] [--update BENCHMARKS.md]

Starts PostgreSQL, a namenode and 2 datanodes (volumes on this disk, direct I/O on:
the datanode's default; `--sync fdatasync` runs them through the page cache),
makes a local file of random bytes and measures, with the `pfs` CLI as a user runs it:
put rep 1, put rep 2, get and cat over gRPC (--no-local-reads), cat over shared memory
(the datanodes are on this host), 4 parallel cats; in-process: 1 MiB random reads with
1 and 4 readers (and the namenode requests they caused after opening).
Floors, same run: `cp` of the file on the local disk (with and without a sync after it:
put is durable when acknowledged, get writes like cp), `cat` of it from the page cache,
and a bare gRPC stream of 1 MiB messages between two processes, run with the allocator
settings pfs and the datanodes use (the floor the ratios are against) and with glibc's
defaults. Peak memory of the CLI processes (each its own, through loadtests.peak) and of
the datanodes is reported, and so is the CPU per GiB of every command with the
datanodes it used, next to the stream's and to what touching fresh memory costs: on 2
shared cores, CPU per GiB is what bounds each rate. Streaming reads and their floors
are the best of ROUNDS interleaved runs (the machine is shared). The last line is one
JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mmap
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from loadtests.harness import (
    bench_cluster,
    cpu_seconds,
    peak_rss_mib,
    start_floor_server,
    update_benchmarks_md,
)
from plasmafs.client import Client, FileReader
from plasmafs.core.sizes import parse_size

MIB = 1024 * 1024
GIB = 1024 * MIB


def make_file(path: Path, size: int) -> None:
    """`size` random bytes (a 64 MiB random pattern repeated: random enough for a DFS that
    does not compress, and fast to make)."""
    pattern = os.urandom(min(size, 64 * MIB))
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, len(pattern))
            f.write(pattern[:n])
            left -= n


@dataclass
class Run:
    """One measured command: wall seconds, peak RSS of the process, and the CPU seconds
    of the process and of the servers it used (datanodes, or the floor's server)."""

    seconds: float
    peak_mib: float
    cpu: float

    def mb_s(self, size: int) -> float:
        """MB/s of moving `size` bytes."""
        return round(size / self.seconds / 1e6, 1)

    def cpu_per_gib(self, size: int) -> float:
        """CPU seconds per GiB of moving `size` bytes."""
        return round(self.cpu / (size / GIB), 2)


def timed_cli(env: dict[str, str], servers: list[int], *args: str) -> Run:
    """Run `pfs ARGS`; its time, peak memory, and the CPU used by it and by `servers`."""
    return _timed(["plasmafs.cli", *args], env, servers)[0]


def _timed(
    command: list[str], env: dict[str, str], servers: list[int], capture: bool = False
) -> tuple[Run, str]:
    """Run a Python module (`python -m MODULE ARGS`: `command` is MODULE and ARGS), its
    output to /dev/null unless captured, and measure it."""
    before = sum(cpu_seconds(pid) for pid in servers)
    with tempfile.TemporaryDirectory() as scratch:
        peak_file = Path(scratch) / "peak"
        err_file = Path(scratch) / "stderr"
        start = time.perf_counter()
        with open(err_file, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "loadtests.peak", str(peak_file), *command],
                env=env,
                stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                stderr=err,
            )
            out = proc.stdout.read().decode() if proc.stdout is not None else ""
            _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if status != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {err_file.read_text().strip()}")
        peak_mib = int(peak_file.read_text()) / 1024
    cpu = usage.ru_utime + usage.ru_stime + sum(cpu_seconds(pid) for pid in servers) - before
    return Run(seconds, peak_mib, cpu), out


def _cp(src: Path, workdir: Path, *, sync: bool, clean_start: bool = True) -> float:
    """Seconds to copy `src` on the local disk (and sync, if asked), from a clean start
    (nothing left to write back) unless told to take the disk as it is."""
    if clean_start:
        os.sync()
    start = time.perf_counter()
    shutil.copyfile(src, workdir / "copy.bin")
    if sync:
        os.sync()
    seconds = time.perf_counter() - start
    (workdir / "copy.bin").unlink()
    return seconds


def plain_cat(path: Path) -> float:
    """Seconds for `cat FILE > /dev/null` (the file in the page cache)."""
    start = time.perf_counter()
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def parallel_cats(env: dict[str, str], path: str, n: int) -> float:
    """Seconds for `n` concurrent `pfs cat PATH > /dev/null`."""
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "plasmafs.cli", "cat", path],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError("a parallel cat failed")
    return time.perf_counter() - start


async def random_reads(address: str, path: str, readers: int, reads: int) -> dict[str, float]:
    """1 MiB reads at random block-aligned offsets; MB/s and namenode requests after open."""
    fs = Client(address)
    try:
        opened = []
        for _ in range(readers):
            r = await fs.open(path)
            assert isinstance(r, FileReader)
            opened.append(r)
        before = await fs.request_counts()
        blocks = opened[0].size // MIB

        async def one(reader: FileReader, seed: int) -> int:
            rng = random.Random(seed)
            n = 0
            for _ in range(reads):
                n += len(await reader.pread(rng.randrange(blocks) * MIB, MIB))
            return n

        start = time.perf_counter()
        total = sum(await asyncio.gather(*(one(r, i) for i, r in enumerate(opened))))
        seconds = time.perf_counter() - start
        after = await fs.request_counts()
        extra = sum(after.values()) - sum(before.values())
        return {"mb_s": round(total / seconds / 1e6, 1), "namenode_requests": extra}
    finally:
        await fs.close()


ROUNDS = 3


def stream_floor(workdir: Path, mib: int, tuned: bool) -> tuple[float, float]:
    """MB/s of the bare gRPC stream, server and client in their own processes, and the CPU
    seconds per GiB of both ends; `tuned` gives both the allocator settings of pfs."""
    flags = ["--tuned"] if tuned else []
    server, address = start_floor_server("loadtests.stream_server", workdir, *flags)
    try:
        command = ["loadtests.stream_server", "pull", address, str(mib), *flags]
        run, out = _timed(command, dict(os.environ), [server.pid], capture=True)
        return float(out.strip()), run.cpu_per_gib(mib * MIB)
    finally:
        server.terminate()
        server.wait()


def fresh_memory_cpu(size: int = GIB) -> float:
    """CPU seconds a new process spends touching `size` bytes of newly mapped memory: what
    every page of page cache or buffer costs to get from the kernel. On a VM that hands
    freed memory back to its host (free page reporting) this is several times what the
    kernel's own zeroing costs, and it varies with what ran before."""
    out = subprocess.run(
        [sys.executable, "-m", "loadtests.io_bench", "--touch", str(size)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


def touch(size: int) -> float:
    """CPU seconds this process spends touching every page of `size` new bytes."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    with mmap.mmap(-1, size) as memory:
        for offset in range(0, size, mmap.PAGESIZE):
            memory[offset] = 1
    after = resource.getrusage(resource.RUSAGE_SELF)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def run(size: int, workdir: Path, sync: str = "direct") -> dict[str, Any]:
    """All measurements."""
    mb = size / 1e6
    src = workdir / "source.bin"
    make_file(src, size)
    figures: dict[str, Any] = {"size_bytes": size, "datanode_sync": sync}
    # `pfs get` writes like cp, without a sync at the end; a put is durable when
    # acknowledged, like cp followed by sync. The disk is shared and noisy: best of two.
    figures["cp_nosync_mb_s"] = round(mb / min(_cp(src, workdir, sync=False) for _ in "ab"), 1)
    figures["cp_mb_s"] = round(mb / min(_cp(src, workdir, sync=True) for _ in "ab"), 1)
    capacity = max(4 * size, 1024 * MIB)
    datanode_env = {"PFS_DATANODE_SYNC": sync}
    with bench_cluster(2, capacity, MIB, workdir / "cluster", datanode_env=datanode_env) as cluster:
        env = dict(os.environ, PFS_CLIENT_NAMENODE=cluster.namenode_address)
        datanodes = cluster.datanode_pids
        cpu: dict[str, float] = {}
        figures["fresh_memory_cpu_s_per_gib"] = round(fresh_memory_cpu(), 2)
        put1 = timed_cli(env, datanodes, "put", "-rep", "1", str(src), "/rep1")
        figures["put_rep1_mb_s"], cpu["put_rep1"] = put1.mb_s(size), put1.cpu_per_gib(size)
        figures["put_client_peak_mib"] = round(put1.peak_mib)
        put2 = timed_cli(env, datanodes, "put", "-rep", "2", str(src), "/rep2")
        figures["put_rep2_mb_s"], cpu["put_rep2"] = put2.mb_s(size), put2.cpu_per_gib(size)
        # The same copy as the floor, now, in the state the puts left the disk in: what a
        # local write can do at the moment of the get.
        seconds = _cp(src, workdir, sync=False, clean_start=False)
        figures["cp_before_get_mb_s"] = round(mb / seconds, 1)
        os.sync()
        got = workdir / "got.bin"
        get = timed_cli(env, datanodes, "--no-local-reads", "get", "/rep1", str(got))
        figures["get_mb_s"], figures["get_client_peak_mib"] = get.mb_s(size), round(get.peak_mib)
        cpu["get"] = get.cpu_per_gib(size)
        if not _same(src, got):
            raise RuntimeError("get returned different bytes")
        got.unlink()
        # The streaming reads and their floors, interleaved, best of ROUNDS each: on a
        # shared machine a single run of any of them can be off by half.
        best: dict[str, tuple[float, float | None]] = {}

        def keep(name: str, mb_s: float, cpu_per_gib: float | None = None) -> None:
            if mb_s > best.get(name, (0.0, None))[0]:
                best[name] = (mb_s, cpu_per_gib)

        for _ in range(ROUNDS):
            floor_mib = max(size // MIB, 256)
            keep("grpc_stream", *stream_floor(workdir, floor_mib, tuned=True))
            keep("grpc_stream_default_malloc", *stream_floor(workdir, floor_mib, tuned=False))
            cat = timed_cli(env, datanodes, "--no-local-reads", "cat", "/rep1")
            keep("cat", cat.mb_s(size), cat.cpu_per_gib(size))
            figures["cat_client_peak_mib"] = max(
                figures.get("cat_client_peak_mib", 0), round(cat.peak_mib)
            )
            # shared memory: the datanodes are on this host
            local = timed_cli(env, datanodes, "cat", "/rep1")
            keep("cat_local", local.mb_s(size), local.cpu_per_gib(size))
            figures["cat_local_peak_mib"] = max(
                figures.get("cat_local_peak_mib", 0), round(local.peak_mib)
            )
            keep("plain_cat", mb / plain_cat(src))
        for name, (mb_s, cpu_per_gib) in best.items():
            figures[f"{name}_mb_s"] = round(mb_s, 1)
            if cpu_per_gib is not None:
                cpu[name] = cpu_per_gib
        figures["cpu_s_per_gib"] = cpu
        s = parallel_cats(env, "/rep2", 4)
        figures["cat4_total_mb_s"] = round(4 * mb / s, 1)
        reads = max(16, min(256, size // MIB // 4))
        figures["random_1_reader"] = uvloop.run(
            random_reads(cluster.namenode_address, "/rep2", 1, reads)
        )
        figures["random_4_readers"] = uvloop.run(
            random_reads(cluster.namenode_address, "/rep2", 4, reads)
        )
        figures["datanode_peak_mib"] = round(max(peak_rss_mib(p) for p in cluster.datanode_pids))
    figures["plaintext_data"] = plaintext_data(src, size, workdir, datanode_env)
    floor = figures["grpc_stream_mb_s"]
    figures["ratios"] = {
        "default_malloc_stream_over_stream": round(
            figures["grpc_stream_default_malloc_mb_s"] / floor, 2
        ),
        "get_over_stream": round(figures["get_mb_s"] / floor, 2),
        "cat_over_stream": round(figures["cat_mb_s"] / floor, 2),
        "put_rep1_over_stream": round(figures["put_rep1_mb_s"] / floor, 2),
        "put_rep1_over_cp_sync": round(figures["put_rep1_mb_s"] / figures["cp_mb_s"], 2),
        "get_over_cp": round(figures["get_mb_s"] / figures["cp_before_get_mb_s"], 2),
        "put_rep2_over_rep1": round(figures["put_rep2_mb_s"] / figures["put_rep1_mb_s"], 2),
        "cat_local_over_grpc": round(figures["cat_local_mb_s"] / figures["cat_mb_s"], 2),
        "cat_local_over_plain_cat": round(figures["cat_local_mb_s"] / figures["plain_cat_mb_s"], 2),
    }
    return figures


def plaintext_data(
    src: Path, size: int, workdir: Path, datanode_env: dict[str, str]
) -> dict[str, tuple[float, float]]:
    """put rep 1, get and cat over gRPC on a cluster whose datanodes serve their data in
    plaintext (data_tls = false; the namenode and registration keep TLS): MB/s and CPU
    s/GiB, against which the main cluster's show what encrypting the data costs."""
    capacity = max(4 * size, 1024 * MIB)
    plain_env = {**datanode_env, "PFS_DATANODE_DATA_TLS": "false"}
    with bench_cluster(2, capacity, MIB, workdir / "plain", datanode_env=plain_env) as cluster:
        env = dict(os.environ, PFS_CLIENT_NAMENODE=cluster.namenode_address)
        datanodes = cluster.datanode_pids
        put = timed_cli(env, datanodes, "put", "-rep", "1", str(src), "/rep1")
        os.sync()
        got = workdir / "got-plain.bin"
        get = timed_cli(env, datanodes, "--no-local-reads", "get", "/rep1", str(got))
        if not _same(src, got):
            raise RuntimeError("get returned different bytes")
        got.unlink()
        cats = [timed_cli(env, datanodes, "--no-local-reads", "cat", "/rep1") for _ in "ab"]
        cat = max(cats, key=lambda run: run.mb_s(size))
        return {
            name: (run.mb_s(size), run.cpu_per_gib(size))
            for name, run in (("put_rep1", put), ("get", get), ("cat", cat))
        }


def _same(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(16 * MIB), fb.read(16 * MIB)
            if x != y:
                return False
            if not x:
                return True


def markdown(f: dict[str, Any], command: str) -> str:
    """The BENCHMARKS.md section."""
    r = f["ratios"]
    c = f["cpu_s_per_gib"]
    size = f["size_bytes"] / MIB
    sync = f["datanode_sync"]
    title = "" if sync == "direct" else f", datanodes with sync = {sync}"
    return "\n".join(
        [
            f"## Data path: put, get, cat, random reads (`loadtests/io_bench.py`{title})",
            "",
            f"Command: `{command}` — a {size:,.0f} MiB file, 2 datanodes with their volumes",
            f"on this machine's disk (sync = {sync}), everything on the same 2 cores; the",
            "`pfs` CLI as a user runs it. The gRPC stream, the cats and plain `cat` are the",
            f"best of {ROUNDS} interleaved runs, the `cp` floors the best of 2; the rest run once.",
            "",
            "| what | MB/s | vs. floor | CPU s/GiB |",
            "|---|---:|---:|---:|",
            "| floor: bare gRPC stream of 1 MiB messages (2 processes, pfs's malloc settings) | "
            f"{f['grpc_stream_mb_s']} | 1.00 | {c['grpc_stream']} |",
            "| the same stream with glibc's default malloc settings | "
            f"{f['grpc_stream_default_malloc_mb_s']} | "
            f"{r['default_malloc_stream_over_stream']} | {c['grpc_stream_default_malloc']} |",
            f"| floor: `cp` on the local disk, then sync | {f['cp_mb_s']} | | |",
            f"| floor: `cp` on the local disk, no sync | {f['cp_nosync_mb_s']} | | |",
            f"| `pfs put -rep 1` | {f['put_rep1_mb_s']} | {r['put_rep1_over_stream']}; "
            f"{r['put_rep1_over_cp_sync']} of `cp`+sync | {c['put_rep1']} |",
            f"| `pfs put -rep 2` | {f['put_rep2_mb_s']} | {r['put_rep2_over_rep1']} of rep 1 | "
            f"{c['put_rep2']} |",
            f"| floor: `cp` again, no sync, just before the get | {f['cp_before_get_mb_s']} | | |",
            f"| `pfs --no-local-reads get` (gRPC) | {f['get_mb_s']} | {r['get_over_stream']}; "
            f"{r['get_over_cp']} of that `cp` | {c['get']} |",
            f"| `pfs --no-local-reads cat > /dev/null` (gRPC) | {f['cat_mb_s']} | "
            f"{r['cat_over_stream']} | {c['cat']} |",
            f"| `pfs cat > /dev/null` (shared memory) | {f['cat_local_mb_s']} | "
            f"{r['cat_local_over_grpc']}x gRPC, {r['cat_local_over_plain_cat']} of `cat` | "
            f"{c['cat_local']} |",
            f"| floor: `cat FILE > /dev/null` from the page cache | {f['plain_cat_mb_s']} | | |",
            f"| 4 parallel `pfs cat` (total, shared memory) | {f['cat4_total_mb_s']} | | |",
            f"| 1 MiB random reads, 1 reader | {f['random_1_reader']['mb_s']} | | |",
            f"| 1 MiB random reads, 4 readers (total) | {f['random_4_readers']['mb_s']} | | |",
            "",
            "CPU s/GiB: the CPU seconds, per GiB moved, of the whole client process and of the",
            "datanodes (for the stream: both of its processes). All of it comes from the same 2",
            "cores, so a rate can only approach the stream's where its CPU per GiB does.",
            f"Touching 1 GiB of newly mapped memory cost {f['fresh_memory_cpu_s_per_gib']} CPU s",
            "just before the puts: every page of page cache a write or a read brings in pays",
            "this (on this VM, memory the guest freed is handed back to the host and faulted in",
            "again).",
            "",
            "Namenode requests made by the random readers after opening the file: "
            f"{f['random_1_reader']['namenode_requests']} (1 reader), "
            f"{f['random_4_readers']['namenode_requests']} (4 readers).",
            f"Peak memory: put {f['put_client_peak_mib']} MiB, get {f['get_client_peak_mib']} MiB, "
            f"cat {f['cat_client_peak_mib']} MiB (client processes); datanode "
            f"{f['datanode_peak_mib']} MiB — independent of the file size (no whole-file "
            "buffering).",
            "",
            "PlasmaFS (2011, gigabit network, 7,200 rpm disks): put rep 1 69 MB/s, rep 2 45 MB/s",
            "(0.65x), get 103 MB/s, cat within the cluster 91-141 MB/s.",
            "",
            *_encryption_table(f),
        ]
    )


def _encryption_table(f: dict[str, Any]) -> list[str]:
    """What TLS on the data streams costs: the same commands on a second cluster whose
    datanodes serve their data in plaintext (data_tls = false), in the same run."""
    plain, c = f["plaintext_data"], f["cpu_s_per_gib"]
    rows = [
        "### Encrypting the data streams",
        "",
        "The table above runs with TLS on every connection (the default). The same commands",
        "on a second cluster, in the same run, whose datanodes serve block data in plaintext",
        "(`data_tls = false`; the namenode and registration keep TLS, tickets still authorize",
        "every call):",
        "",
        "| command | MB/s, TLS | MB/s, plaintext | CPU s/GiB, TLS | CPU s/GiB, plaintext | "
        "encryption, CPU s/GiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, label in (
        ("put_rep1", "`pfs put -rep 1`"),
        ("get", "`pfs --no-local-reads get`"),
        ("cat", "`pfs --no-local-reads cat`"),
    ):
        mb_s, cpu = plain[name]
        rows.append(
            f"| {label} | {f[name + '_mb_s']} | {round(mb_s, 1)} | {c[name]} | {round(cpu, 2)} | "
            f"{round(c[name] - cpu, 2)} |"
        )
    rows += [
        "",
        "CPU s/GiB counts the client process and the datanodes. Local reads (shared memory)",
        "never encrypt: they stay on the host.",
    ]
    return rows


def main() -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="2G", help="file size (default 2G)")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    parser.add_argument(
        "--sync",
        choices=("fdatasync", "direct", "none"),
        default="direct",
        help="the datanodes' write policy (default direct, the datanode's default)",
    )
    parser.add_argument("--touch", type=int, help=argparse.SUPPRESS)  # fresh_memory_cpu's probe
    args = parser.parse_args()
    if args.touch:
        print(touch(args.touch))
        return 0
    size = parse_size(args.size)
    if size < MIB:
        parser.error("--size must be at least 1M")
    workdir = Path(tempfile.mkdtemp(prefix="pfs-io-bench-"))
    try:
        figures = run(size, workdir, args.sync)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    default = args.sync == "direct"
    command = f"python -m loadtests.io_bench --size {args.size}" + (
        "" if default else f" --sync {args.sync}"
    )
    text = markdown(figures, command)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "io_bench" if default else f"io_bench_{args.sync}", text)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
