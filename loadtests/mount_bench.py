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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtests.churn import run_churn
from loadtests.harness import bench_cluster, update_benchmarks_md

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


def mib_files_write(root: Path, workers: int, seconds: float) -> float:
    """Files/s of 1 MiB files written with dd and a sync after each, by `workers`."""
    script = (
        'i=0; while [ "$(date +%s%N)" -lt "$1" ]; do '
        'dd if=/dev/zero of="$2/f$i" bs=1M count=1 2>/dev/null && sync && i=$((i+1)); '
        "done; echo $i"
    )
    deadline = time.time_ns() + int(seconds * 1e9)
    dirs = [root / f"w{workers}-{k}" for k in range(workers)]
    for d in dirs:
        d.mkdir()
    started = time.perf_counter()
    procs = [
        subprocess.Popen(["sh", "-c", script, "sh", str(deadline), str(d)], stdout=subprocess.PIPE)
        for d in dirs
    ]
    written = sum(int(p.communicate()[0] or 0) for p in procs)
    return written / (time.perf_counter() - started)


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


def empty_files(root: Path, processes: int, count: int) -> float:
    """Files/s of `count` empty files created with O_EXCL by `processes` processes."""
    code = (
        "import os, sys\n"
        "d, n = sys.argv[1], int(sys.argv[2])\n"
        "for i in range(n):\n"
        "    os.close(os.open(f'{d}/e{i}', os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))\n"
    )
    dirs = [root / f"empty{processes}-{k}" for k in range(processes)]
    for d in dirs:
        d.mkdir()
    started = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(d), str(count // processes)])
        for d in dirs
    ]
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError("an empty-file creator failed")
    return (count // processes) * processes / (time.perf_counter() - started)


def tree_build(root: Path, dirs: int, files: int) -> float:
    """Seconds for one process to build `dirs` directories holding `files` files of
    100-700 bytes, about 15 per directory in a two-level tree."""
    rng = random.Random(7)
    tops = max(1, int(dirs**0.5))
    started = time.perf_counter()
    made: list[Path] = []
    for k in range(dirs):
        d = root / "tree" / f"top{k % tops}" / f"d{k}" if k >= tops else root / "tree" / f"top{k}"
        d.mkdir(parents=True)
        made.append(d)
    for k in range(files):
        (made[k % len(made)] / f"file{k}").write_bytes(rng.randbytes(rng.randint(100, 700)))
    return time.perf_counter() - started


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


def run_data_workloads(root: Path, scale: float, seconds: float) -> dict[str, Any]:
    """The workloads that move data (dd, 1 MiB files) on the directory `root`."""
    f: dict[str, Any] = {}
    total = max(MIB, int(200 * MB * scale))
    f["dd write 1 KiB"] = dd_write(root, "dd-1k", 1024, total)
    f["dd write 64 KiB"] = dd_write(root, "dd-64k", 65536, total)
    f["dd read 64 KiB, cold"] = dd_read(root, "dd-64k")
    for workers in (1, 8):
        f[f"1 MiB files, {workers} writers"] = mib_files_write(root, workers, seconds)
    for workers in (1, 8):
        f[f"1 MiB files, {workers} readers"] = mib_files_read(root, workers)
    return f


def run_workloads(root: Path, scale: float, seconds: float) -> dict[str, Any]:
    """Every workload on the directory `root`; figures by row name."""
    f = run_data_workloads(root, scale, seconds)
    count = max(8, int(5000 * scale))
    f["empty files, 1 process"] = empty_files(root, 1, count)
    f["empty files, 4 processes"] = empty_files(root, 4, count)
    dirs, files = max(2, int(1870 * scale)), max(4, int(28600 * scale))
    f["tree build"] = tree_build(root, dirs, files)
    f["ls -lR, cold"] = timed_command(["ls", "-lR", str(root / "tree")])
    f["du -sh, cold"] = timed_command(["du", "-sh", str(root / "tree")])
    f["rm -rf"] = timed_command(["rm", "-rf", str(root / "tree")])
    f["rm -rf: entries left"] = entries(root / "tree")
    (root / "churn").mkdir()
    churn = run_churn(root / "churn", seconds)
    f["3 writers + 10 readers: errors"] = len(churn["errors"]) + len(churn["broken"])
    f["3 writers + 10 readers: files written"] = churn["written"]
    f["3 writers + 10 readers: files read"] = churn["read"]
    return f


ROWS = (
    Row("dd write 1 KiB", "MB/s", True, ">= 100"),
    Row("dd write 64 KiB", "MB/s", True, ">= 500"),
    Row("dd read 64 KiB, cold", "MB/s", True, ">= 600"),
    Row("1 MiB files, 1 writers", "files/s", True, ""),
    Row("1 MiB files, 8 writers", "files/s", True, ">= 200"),
    Row("1 MiB files, 1 readers", "files/s", True, ""),
    Row("1 MiB files, 8 readers", "files/s", True, ">= 350"),
    Row("empty files, 1 process", "files/s", True, ">= 5,000"),
    Row("empty files, 4 processes", "files/s", True, ""),
    Row("tree build", "s", False, "<= 10"),
    Row("ls -lR, cold", "s", False, "<= 3"),
    Row("du -sh, cold", "s", False, "<= 1"),
    Row("rm -rf", "s", False, "<= 5"),
    Row("rm -rf: entries left", "", False, "0"),
    Row("3 writers + 10 readers: errors", "", False, "0"),
    Row("3 writers + 10 readers: files written", "", True, ""),
    Row("3 writers + 10 readers: files read", "", True, ""),
)
WRITEBACK = "writeback_cache"  # the mount option the data rows are also measured with


def run(scale: float, seconds: float) -> dict[str, Any]:
    """Mount a throw-away cluster and run every workload there and locally."""
    figures: dict[str, Any] = {"scale": scale, "seconds": seconds, "cpus": os.cpu_count()}
    local_root = Path(tempfile.mkdtemp(prefix="pfs-mount-bench-local-", dir=_disk_dir()))
    try:
        figures["local"] = run_workloads(local_root, scale, seconds)
    finally:
        shutil.rmtree(local_root, ignore_errors=True)
    # Every small file takes a block of its own, and replaced ones stay held a while:
    # 256 KiB blocks, and volumes (preallocated on this disk) of 12 GiB.
    capacity = max(2**30, int(12 * 2**30 * scale))
    with bench_cluster(datanodes=2, capacity=capacity, blocksize=BLOCKSIZE) as cluster:
        mountpoint = cluster.workdir / "mnt"
        mountpoint.mkdir()
        env = {**os.environ, "PFS_CLIENT_NAMENODE": cluster.namenode_address}
        env["PFS_HOME"] = str(cluster.workdir / "home")
        with _mounted(mountpoint, env, cluster.workdir):
            figures["mount"] = run_workloads(mountpoint, scale, seconds)
        # The data rows again, on a second mount whose kernel caches writes.
        cached = cluster.workdir / "mnt-writeback"
        cached.mkdir()
        with _mounted(cached, env, cluster.workdir, WRITEBACK):
            (cached / "writeback").mkdir()
            figures[WRITEBACK] = run_data_workloads(cached / "writeback", scale, seconds)
    for side in ("mount", WRITEBACK):
        figures[f"ratios, {side}"] = {
            row.name: _ratio(figures[side][row.name], figures["local"][row.name], row)
            for row in ROWS
            if row.unit and row.name in figures[side]
        }
    return figures


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
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)


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
    lines = [
        "## The mount (`loadtests/mount_bench.py`)",
        "",
        f"Command: `{command}` — a local cluster (PostgreSQL, a namenode, two datanodes, TLS",
        f"on, {BLOCKSIZE // 1024} KiB blocks) mounted with `pfs mount`, next to a directory "
        "of this machine's disk; "
        f"{f['cpus']} cores shared by all; scale {f['scale']:g}, timed rows {f['seconds']:g} s.",
        "Ratio: the mount's figure against local disk's (for times, local time / mount time:",
        "above 1 the mount is faster). Targets from the mount issue (GlusterFS and MooseFS",
        "on this machine kind fall short of them). The data rows are measured again on a",
        f"second mount of the same cluster with `-o {WRITEBACK}` (the kernel gathers writes",
        "in its page cache), after the first one's rows.",
        "",
        f"| workload | unit | local disk | mount | ratio | mount -o {WRITEBACK} | ratio | target |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ROWS:
        cells = [row.name, row.unit, _show(f["local"][row.name])]
        for side in ("mount", WRITEBACK):
            value = f[side].get(row.name)
            ratio = f[f"ratios, {side}"].get(row.name)
            cells += ["" if value is None else _show(value), "" if ratio is None else str(ratio)]
        lines.append("| " + " | ".join([*cells, row.target]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="sizes and counts (0 < s <= 1)")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of timed rows")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1:
        parser.error("--scale must be in (0, 1]")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    figures = run(args.scale, args.seconds)
    figures["date"] = time.strftime("%Y-%m-%d")
    command = f"python -m loadtests.mount_bench --scale {args.scale:g} --seconds {args.seconds:g}"
    text = markdown(figures, command)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "mount_bench", text)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
