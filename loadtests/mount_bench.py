"""Mount benchmark: the workloads of the GlusterFS/FhGFS reports, on `pfs mount` and on a
directory of this machine's disk, in the same run.

    python -m loadtests.mount_bench [--scale 1] [--seconds 30] [--update BENCHMARKS.md]

Starts PostgreSQL, a namenode and two datanodes (a throw-away local cluster, TLS on),
mounts it with `pfs mount`, and runs every workload on the mount and on a local
directory, printing each figure with its ratio to local. `--scale` shrinks the sizes
and counts (the table says which were used); `--seconds` is the length of the timed
rows. Cold caches: the kernel's page, dentry and inode caches are dropped
(/proc/sys/vm/drop_caches, as root), and what the mount read ahead is left to expire;
the namenode keeps its own caches. The last line printed
is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtests.as_user import run_as, setpriv
from loadtests.churn import run_churn
from loadtests.harness import bench_cluster, update_benchmarks_md
from loadtests.process_cpu import PROGRAMS, CpuMeter, pids_of
from loadtests.tree_shapes import empty_files, tree_build, tree_build_depth_first
from plasmafs.core import grpc_transport

MB = 1_000_000
MIB = 1 << 20
BLOCKSIZE = 256 * 1024  # the benchmark cluster's
COLD_WAIT = 1.5  # s: longer than the mount's default entry and attribute lifetimes


@dataclass(frozen=True)
class Row:
    """One workload: its name, its unit, whether more is better, the issue's target."""

    name: str
    unit: str
    higher_is_better: bool
    target: str


def drop_caches() -> bool:
    """Flush and drop the kernel's caches; False if this process may not."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def dd_write(root: Path, name: str, block: int, total: int) -> float:
    """MB/s of `dd` writing `total` bytes in `block`-byte writes, with conv=fsync."""
    started = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={root / name}", f"bs={block}", f"count={total // block}",
         "conv=fsync"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return total / MB / (time.perf_counter() - started)


def dd_read(root: Path, name: str) -> float:
    """MB/s of `dd` reading a file in 64 KiB blocks with cold caches."""
    path = root / name
    size = path.stat().st_size
    drop_caches()
    started = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=64k"], check=True, capture_output=True)
    return size / MB / (time.perf_counter() - started)


WRITER_SCRIPT = (
    'i=0; while [ "$(date +%s%N)" -lt "$1" ]; do '
    'dd if=/dev/zero of="$2/f$i" bs=1M count=1 2>/dev/null && sync && i=$((i+1)); '
    "done; echo $i"
)
READER_SCRIPT = (
    'i=0; deadline=$1; shift; while [ "$(date +%s%N)" -lt "$deadline" ]; do '
    'for f in "$@"; do cp "$f" /dev/null || exit 1; i=$((i+1)); '
    '[ "$(date +%s%N)" -lt "$deadline" ] || break; done; done; echo $i'
)


def mib_files_write(root: Path, workers: int, seconds: float) -> float:
    """Files/s of 1 MiB files written with dd and a sync after each, by `workers`."""
    deadline = time.time_ns() + int(seconds * 1e9)
    dirs = [root / f"w{workers}-{k}" for k in range(workers)]
    for d in dirs:
        d.mkdir()
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["sh", "-c", WRITER_SCRIPT, "sh", str(deadline), str(d)], stdout=subprocess.PIPE
        )
        for d in dirs
    ]
    written = sum(int(p.communicate()[0] or 0) for p in procs)
    return written / (time.perf_counter() - started)


def mib_files_mixed(root: Path, writers: int, readers: int, seconds: float) -> tuple[float, float]:
    """Files/s written and files/s read by `writers` and `readers` at once: writers as
    in `mib_files_write` (new files), readers copying the 1 MiB files written before
    (cold at the start) to /dev/null with `cp`, each in its own random order."""
    files = sorted(str(p) for p in root.glob("w*/f*"))
    dirs = [root / f"mixed-{k}" for k in range(writers)]
    for d in dirs:
        d.mkdir()
    drop_caches()
    deadline = str(time.time_ns() + int(seconds * 1e9))
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            ["sh", "-c", WRITER_SCRIPT, "sh", deadline, str(d)], stdout=subprocess.PIPE
        )
        for d in dirs
    ]
    rng = random.Random(11)
    procs += [
        subprocess.Popen(
            ["sh", "-c", READER_SCRIPT, "sh", deadline, *rng.sample(files, len(files))],
            stdout=subprocess.PIPE,
        )
        for _ in range(readers)
    ]
    done = [int(p.communicate()[0] or 0) for p in procs]
    elapsed = time.perf_counter() - started
    return sum(done[:writers]) / elapsed, sum(done[writers:]) / elapsed


def mib_files_read(root: Path, workers: int) -> float:
    """Files/s of the 1 MiB files read back with `cp` to /dev/null by `workers`."""
    files = sorted(str(p) for p in root.glob("w*/f*"))
    drop_caches()
    chunks = [files[k::workers] for k in range(workers)]
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(_cp_all, chunks))
    return len(files) / (time.perf_counter() - started)


def _cp_all(files: list[str]) -> None:
    """`cp FILE /dev/null` for each file, from one shell."""
    script = 'for f in "$@"; do cp "$f" /dev/null || exit 1; done'
    subprocess.run(["sh", "-c", script, "sh", *files], check=True)


def du_after_ls(path: Path) -> float:
    """Seconds of `du -sh` run right after an `ls -lR` of the same tree, caches dropped
    before each and the mount's own left as the ls left them."""
    drop_caches()
    subprocess.run(["ls", "-lR", str(path)], check=True, stdout=subprocess.DEVNULL)
    drop_caches()
    started = time.perf_counter()
    subprocess.run(["du", "-sh", str(path)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def run_caller_workloads(root: Path, scale: float, uid: int) -> dict[str, Any]:
    """The create and lookup rows on a mount acting for its host's users, run by local
    user `uid` (not root: its permissions are checked) in a directory of its own (on a
    mount from `mounted_cluster`, which lets every user reach it)."""
    mine = root / "as-user"
    mine.mkdir()
    os.chown(mine, uid, uid)
    f: dict[str, Any] = {}
    count = max(8, int(5000 * scale))
    shapes = "loadtests.tree_shapes"  # run by the system's Python, as `uid`
    f["empty files, 1 process"] = run_as(uid, shapes, "empty_files", mine, 1, count)
    f["empty files, 4 processes"] = run_as(uid, shapes, "empty_files", mine, 4, count)
    dirs, files = max(2, int(1870 * scale)), max(4, int(28600 * scale))
    f["tree build"] = run_as(uid, shapes, "tree_build", mine, dirs, files)
    f["tree build, depth-first"] = run_as(uid, shapes, "tree_build_depth_first", mine, dirs, files)
    f["ls -lR, cold"] = timed_command([*setpriv(uid), "ls", "-lR", str(mine / "tree")])
    f["du -sh, cold"] = timed_command([*setpriv(uid), "du", "-sh", str(mine / "tree")])
    return f


def timed_command(command: list[str]) -> float:
    """Seconds of a command, with cold caches (the mount's read-ahead expired too)."""
    drop_caches()
    time.sleep(COLD_WAIT)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def entries(path: Path) -> int:
    """Entries left under `path` (0 if it is gone)."""
    if not path.exists():
        return 0
    return sum(len(d) + len(f) for _, d, f in os.walk(path))


def run_data_workloads(root: Path, scale: float, seconds: float, meter: CpuMeter) -> dict[str, Any]:
    """The workloads that move data (dd, 1 MiB files) on the directory `root`; for the
    1 MiB files, also the CPU each role used per file (`CPU_KEY`), in ms."""
    f: dict[str, Any] = {CPU_KEY: {}}
    total = max(MIB, int(200 * MB * scale))
    f["dd write 1 KiB"] = dd_write(root, "dd-1k", 1024, total)
    f["dd write 64 KiB"] = dd_write(root, "dd-64k", 65536, total)
    f["dd read 64 KiB, cold"] = dd_read(root, "dd-64k")

    def measured(row: str, run: Callable[..., Any], *args: Any) -> tuple[float, ...]:
        """`run(*args)`'s files/s (one figure, or a tuple); the CPU per file noted."""
        before, started = meter.read(), time.perf_counter()
        rates = run(*args)
        rates = rates if isinstance(rates, tuple) else (rates,)
        files = max(1.0, sum(rates) * (time.perf_counter() - started))
        f[CPU_KEY][row] = {role: 1000 * s / files for role, s in meter.since(before).items()}
        return rates

    for workers in (1, 8):
        row = f"1 MiB files, {workers} writers"
        (f[row],) = measured(row, mib_files_write, root, workers, seconds)
    for workers in (1, 8):
        row = f"1 MiB files, {workers} readers"
        (f[row],) = measured(row, mib_files_read, root, workers)
    f[MIXED_WRITERS], f[MIXED_READERS] = measured(MIXED, mib_files_mixed, root, 3, 10, seconds)
    return f


def run_workloads(root: Path, scale: float, seconds: float, meter: CpuMeter) -> dict[str, Any]:
    """Every workload on the directory `root`; figures by row name."""
    f = run_data_workloads(root, scale, seconds, meter)
    count = max(8, int(5000 * scale))
    f["empty files, 1 process"] = empty_files(root, 1, count)
    f["empty files, 4 processes"] = empty_files(root, 4, count)
    dirs, files = max(2, int(1870 * scale)), max(4, int(28600 * scale))
    f["tree build"] = tree_build(root, dirs, files)
    f["tree build, depth-first"] = tree_build_depth_first(root, dirs, files)
    f["ls -lR, cold"] = timed_command(["ls", "-lR", str(root / "tree")])
    f["du -sh, cold"] = timed_command(["du", "-sh", str(root / "tree")])
    f["du -sh right after ls -lR, cold"] = du_after_ls(root / "dtree")
    f["rm -rf"] = timed_command(["rm", "-rf", str(root / "tree")])
    f["rm -rf: entries left"] = entries(root / "tree")
    shutil.rmtree(root / "dtree")
    (root / "churn").mkdir()
    churn = run_churn(root / "churn", seconds)
    f["3 writers + 10 readers: errors"] = len(churn["errors"]) + len(churn["broken"])
    f["3 writers + 10 readers: files written"] = churn["written"]
    f["3 writers + 10 readers: files read"] = churn["read"]
    return f


CPU_KEY = "CPU ms per file"
MIXED = "1 MiB files, 3 writers + 10 readers at once"
MIXED_WRITERS = f"{MIXED}: writers"
MIXED_READERS = f"{MIXED}: readers"
ROWS = (
    Row("dd write 1 KiB", "MB/s", True, ">= 100"),
    Row("dd write 64 KiB", "MB/s", True, ">= 500"),
    Row("dd read 64 KiB, cold", "MB/s", True, ">= 600"),
    Row("1 MiB files, 1 writers", "files/s", True, ">= 0.75x"),
    Row("1 MiB files, 8 writers", "files/s", True, ">= 0.75x"),
    Row("1 MiB files, 1 readers", "files/s", True, ">= 0.75x"),
    Row("1 MiB files, 8 readers", "files/s", True, ">= 0.75x"),
    Row(MIXED_WRITERS, "files/s", True, ">= 0.6x"),
    Row(MIXED_READERS, "files/s", True, ">= 0.5x"),
    Row("empty files, 1 process", "files/s", True, ">= 5,000"),
    Row("empty files, 4 processes", "files/s", True, ""),
    Row("tree build", "s", False, "<= 10"),
    Row("tree build, depth-first", "s", False, "<= 10"),
    Row("ls -lR, cold", "s", False, "<= 3"),
    Row("du -sh, cold", "s", False, "<= 1"),
    Row("du -sh right after ls -lR, cold", "s", False, "<= 1"),
    Row("rm -rf", "s", False, "<= 5"),
    Row("rm -rf: entries left", "", False, "0"),
    Row("3 writers + 10 readers: errors", "", False, "0"),
    Row("3 writers + 10 readers: files written", "", True, ""),
    Row("3 writers + 10 readers: files read", "", True, ""),
)
WRITEBACK = "writeback_cache"  # the mount option the data rows are also measured with
CALLERS = "callers"  # the option the create and lookup rows are also measured with
CALLER_UID = 5000  # the local user they run as there
BASELINE = "baseline"  # the data rows on another installation (--baseline)
SIDES = ("mount", WRITEBACK, CALLERS, BASELINE)
SIDE_TITLES = {
    "mount": "mount",
    WRITEBACK: f"mount -o {WRITEBACK}",
    CALLERS: f"mount -o {CALLERS}, uid {CALLER_UID}",
    BASELINE: "baseline's mount",
}
CPU_ROLES = ("mount", "namenode", "datanodes", "PostgreSQL", PROGRAMS)
CPU_ROWS = (
    "1 MiB files, 1 writers",
    "1 MiB files, 8 writers",
    "1 MiB files, 1 readers",
    "1 MiB files, 8 readers",
    MIXED,
)


def run(
    scale: float, seconds: float, data_only: bool = False, baseline: str | None = None
) -> dict[str, Any]:
    """Mount a throw-away cluster and run every workload there and locally (the data
    rows only if `data_only`); with `baseline` (a Python interpreter of another
    installation of plasmafs), the data rows again on a cluster and mount of that one."""
    figures: dict[str, Any] = {"scale": scale, "seconds": seconds, "cpus": os.cpu_count()}
    workloads = run_data_workloads if data_only else run_workloads
    local_root = Path(tempfile.mkdtemp(prefix="pfs-mount-bench-local-", dir=_disk_dir()))
    try:
        figures["local"] = workloads(local_root, scale, seconds, CpuMeter({}))
    finally:
        shutil.rmtree(local_root, ignore_errors=True)
    with mounted_cluster(scale) as mount:
        with mount() as (mountpoint, meter):
            figures["mount"] = workloads(mountpoint, scale, seconds, meter)
        if not data_only:  # the data rows again, on a second mount whose kernel caches writes
            with mount(WRITEBACK) as (cached, meter):
                (cached / "writeback").mkdir()
                figures[WRITEBACK] = run_data_workloads(cached / "writeback", scale, seconds, meter)
            # The create and lookup rows again, on a mount acting for the host's users.
            with mount(CALLERS) as (shared, _):
                figures[CALLERS] = run_caller_workloads(shared, scale, CALLER_UID)
    if baseline:
        figures["baseline python"] = baseline
        figures["baseline commit"] = _commit_of(baseline)
        with (
            _interpreter(baseline),
            mounted_cluster(scale) as mount,
            mount() as (mountpoint, meter),
        ):
            figures[BASELINE] = run_data_workloads(mountpoint, scale, seconds, meter)
    for side in SIDES:
        if side in figures:
            figures[f"ratios, {side}"] = {
                row.name: _ratio(figures[side][row.name], figures["local"][row.name], row)
                for row in ROWS
                if row.unit and row.name in figures[side]
            }
    return figures


@contextmanager
def mounted_cluster(scale: float) -> Iterator[Callable[..., Any]]:
    """A throw-away cluster; what it gives mounts it with `pfs mount` and options, for
    a block that gets the mount point and a meter of every process of the cluster (a
    mount with -o callers is for every local user: they may pass the directory it is
    in)."""
    # Every small file takes a block of its own, and replaced ones stay held a while:
    # 256 KiB blocks, and volumes (preallocated on this disk) of 12 GiB.
    capacity = max(2**30, int(12 * 2**30 * scale))
    with bench_cluster(datanodes=2, capacity=capacity, blocksize=BLOCKSIZE) as cluster:
        env = {**os.environ, "PFS_CLIENT_NAMENODE": cluster.namenode_address}
        env["PFS_HOME"] = str(cluster.workdir / "home")

        @contextmanager
        def mount(*options: str) -> Iterator[tuple[Path, CpuMeter]]:
            mountpoint = cluster.workdir / ("mnt-" + "-".join(options) if options else "mnt")
            mountpoint.mkdir()
            if CALLERS in options:
                cluster.workdir.chmod(cluster.workdir.stat().st_mode | 0o011)
            with _mounted(mountpoint, env, cluster.workdir, *options):
                pids = {
                    "mount": pids_of("plasmafs.mount", str(mountpoint)),
                    "namenode": [cluster.namenode_pid],
                    "datanodes": cluster.datanode_pids,
                }
                yield mountpoint, CpuMeter(pids, cluster.pg.datadir)

        yield mount


def _commit_of(python: str) -> str:
    """The git commit of the plasmafs that `python` imports ("?" if not a checkout)."""
    code = "import pathlib, plasmafs.core as c; print(pathlib.Path(c.__file__).parents[1])"
    where = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    head = subprocess.run(
        ["git", "-C", where, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return head.stdout.strip() or "?"


@contextmanager
def _interpreter(python: str) -> Iterator[None]:
    """Start the cluster's daemons, the mount and the programs with `python` (each is
    started as `sys.executable -m ...`) for the block, with the gRPC transport that
    installation chooses itself (not the one this process chose and its children
    would inherit)."""
    saved, sys.executable = sys.executable, python
    experiments = os.environ.pop("GRPC_EXPERIMENTS", None) if grpc_transport.chosen_here else None
    try:
        yield
    finally:
        sys.executable = saved
        if experiments is not None:
            os.environ["GRPC_EXPERIMENTS"] = experiments


@contextmanager
def _mounted(mountpoint: Path, env: dict[str, str], workdir: Path, *options: str) -> Iterator[None]:
    """`pfs mount` (with `options`) at `mountpoint` for the block; unmounted whatever
    happens, with the tail of the mount's log printed if the block failed."""
    command = [sys.executable, "-m", "plasmafs.cli", "mount", str(mountpoint)]
    if options:
        command += ["-o", ",".join(options)]
    mounted = subprocess.run(command, env=env, capture_output=True, text=True)
    if mounted.returncode != 0:
        raise RuntimeError(f"pfs mount failed: {mounted.stderr.strip()}")
    try:
        yield
    except BaseException:
        for log in (workdir / "home" / "mounts").glob("*.log"):
            tail = log.read_text(errors="replace").splitlines()[-20:]
            print("\n".join([f"mount log {log.name}:", *tail]), file=sys.stderr)
        raise
    finally:
        unmounted = subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
        if unmounted.returncode != 0:
            # Busy (a program left inside it): detached now, so that removing the
            # cluster's directory does not walk into the live mount.
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)


def _disk_dir() -> str:
    """A directory on this machine's disk (not tmpfs) for the local side."""
    for candidate in ("/var/tmp", tempfile.gettempdir()):
        if os.access(candidate, os.W_OK):
            return candidate
    return tempfile.gettempdir()


def _ratio(mount: float, local: float, row: Row) -> float | None:
    if not mount or not local:
        return None
    return round(mount / local if row.higher_is_better else local / mount, 3)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def markdown(f: dict[str, Any], command: str) -> str:
    """The BENCHMARKS.md section for these figures."""
    sides = [side for side in SIDES if side in f]
    lines = [
        "## The mount (`loadtests/mount_bench.py`)",
        "",
        f"Command: `{command}` — a local cluster (PostgreSQL, a namenode, two datanodes, TLS",
        f"on, {BLOCKSIZE // 1024} KiB blocks) mounted with `pfs mount`, next to a directory "
        "of this machine's disk; "
        f"{f['cpus']} cores shared by all; scale {f['scale']:g}, timed rows {f['seconds']:g} s.",
        "Ratio: the mount's figure against local disk's (for times, local time / mount time:",
        "above 1 the mount is faster). Targets from the mount issue (GlusterFS and MooseFS",
        "on this machine kind fall short of them).",
        *(
            []
            if WRITEBACK not in f
            else [
                f"The data rows are measured again on a second mount of the same cluster with "
                f"`-o {WRITEBACK}`",
                "(the kernel gathers writes in its page cache), after the first one's rows.",
            ]
        ),
        *(
            []
            if CALLERS not in f
            else [
                f"The create and lookup rows are measured again on a third mount, with `-o "
                f"{CALLERS}`",
                f"(acting for the host's users), run as local user {CALLER_UID} in a directory "
                "of its own.",
            ]
        ),
        *(
            []
            if BASELINE not in f
            else [
                "The baseline's mount: the data rows on a cluster and mount of another",
                f"installation of plasmafs (`--baseline PYTHON`), at commit {f['baseline commit']},"
                " after the others.",
            ]
        ),
        "",
        "| workload | unit | local disk | "
        + "".join(f"{SIDE_TITLES[side]} | ratio | " for side in sides)
        + "target |",
        "|---|---|---:|" + "---:|---:|" * len(sides) + "---:|",
    ]
    for row in ROWS:
        if row.name not in f["local"]:
            continue
        cells = [row.name, row.unit, _show(f["local"][row.name])]
        for side in sides:
            value = f[side].get(row.name)
            ratio = f.get(f"ratios, {side}", {}).get(row.name)
            cells += ["" if value is None else _show(value), "" if ratio is None else str(ratio)]
        lines.append("| " + " | ".join([*cells, row.target]) + " |")
    return "\n".join(lines + cpu_markdown(f))


def cpu_markdown(f: dict[str, Any]) -> list[str]:
    """The table of CPU per 1 MiB file, by process, for every side measured."""
    sides = [s for s in ("local", *SIDES) if CPU_KEY in f.get(s, {})]
    lines = [
        "",
        "CPU per 1 MiB file written or read, in ms, by process: the mount's daemon, the",
        "namenode, both datanodes, PostgreSQL (every backend), and the programs (the shells,",
        "dd, sync, cp, and the kernel's work done in their system calls); cluster: all but",
        "the programs. Local disk has the programs only.",
        "",
        "| workload | side | " + " | ".join(CPU_ROLES) + " | cluster | all |",
        "|---|---|" + "---:|" * (len(CPU_ROLES) + 2),
    ]
    for row in CPU_ROWS:
        for side in sides:
            used = f[side][CPU_KEY].get(row)
            if used is None:
                continue
            cells = [f"{used[r]:.2f}" if r in used else "" for r in CPU_ROLES]
            cluster = sum(v for r, v in used.items() if r != PROGRAMS)
            totals = ["" if side == "local" else f"{cluster:.2f}", f"{sum(used.values()):.2f}"]
            lines.append(f"| {row} | {side} | " + " | ".join([*cells, *totals]) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="sizes and counts (0 < s <= 1)")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of timed rows")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    parser.add_argument("--data-only", action="store_true", help="the data rows only")
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="also run the data rows on a cluster of another installation of plasmafs "
        "(the Python interpreter of its environment: the CPU table compares them)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1:
        parser.error("--scale must be in (0, 1]")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    figures = run(args.scale, args.seconds, args.data_only, args.baseline)
    figures["date"] = time.strftime("%Y-%m-%d")
    command = f"python -m loadtests.mount_bench --scale {args.scale:g} --seconds {args.seconds:g}"
    if args.baseline:
        command += " --baseline PYTHON"
    print(json.dumps(figures), flush=True)  # first: the figures whatever happens next
    text = markdown(figures, command)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "mount_bench", text)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
