"""`pfs://` in the Python data stack against this machine's disk, in the same run.

On a throw-away cluster (two datanodes, TLS on): a parquet file of about `--size`
bytes (random numbers: it does not compress) written with pandas and read back with
pandas and with a pyarrow dataset scan, through `pfs://` and on local disk, caches
dropped before each read where this process may; `cat_ranges` of `--ranges` random
64 KiB ranges of it, counting the namenode requests it made; and listing a directory
of `--entries` entries with `ls` (details) through fsspec, next to fsspec's local
file system listing as many local files.

    python -m loadtests.fsspec_bench [--size 1G] [--ranges 1000] [--entries 100000]
        [--update BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pandas as pd
import pyarrow.dataset as ds
from pyarrow.fs import FSSpecHandler, PyFileSystem

from loadtests.harness import bench_cluster, update_benchmarks_md
from loadtests.mount_bench import drop_caches
from plasmafs.client import Client
from plasmafs.core.sizes import parse_size
from plasmafs.fsspec.filesystem import PlasmaFileSystem

RANGE = 64 * 1024
COLUMNS = 8
CREATES_PER_TRANSACTION = 1000


def frame_of(size: int) -> pd.DataFrame:
    """About `size` bytes of random float64 in COLUMNS columns."""
    rows = max(1, size // (8 * COLUMNS))
    rng = np.random.default_rng(7)
    return pd.DataFrame({f"c{k}": rng.random(rows) for k in range(COLUMNS)})


def _timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def parquet_rows(frame: pd.DataFrame, url: str, arrow_fs: Any, path: str) -> dict[str, float]:
    """MB/s of writing `frame` as parquet at `url`, and of reading it with pandas and
    with a pyarrow dataset scan (`path` on `arrow_fs`)."""
    nbytes = frame.memory_usage(index=False).sum()
    write = _timed(lambda: frame.to_parquet(url, index=False))
    drop_caches()
    read = _timed(lambda: pd.read_parquet(url))
    drop_caches()
    scan = _timed(lambda: ds.dataset(path, filesystem=arrow_fs, format="parquet").to_table())
    return {
        "parquet write": nbytes / write / 1e6,
        "parquet read (pandas)": nbytes / read / 1e6,
        "parquet scan (pyarrow dataset)": nbytes / scan / 1e6,
    }


def ranges_row(fs: PlasmaFileSystem, path: str, count: int, address: str) -> dict[str, Any]:
    """`count` random 64 KiB ranges of `path` in one cat_ranges: MB/s and the namenode
    requests it made."""
    size = fs.info(path)["size"]
    rng = random.Random(7)
    starts = [rng.randrange(0, max(1, size - RANGE)) for _ in range(count)]
    before = _namenode_requests(address)
    seconds = _timed(lambda: fs.cat_ranges([path] * count, starts, [s + RANGE for s in starts]))
    after = _namenode_requests(address)
    made = {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}
    return {"cat_ranges MB/s": count * RANGE / seconds / 1e6, "cat_ranges namenode requests": made}


def _namenode_requests(address: str) -> dict[str, int]:
    """The namenode's requests served so far, by operation."""

    async def count() -> dict[str, int]:
        async with Client(address) as fs:
            return await fs.request_counts()

    return asyncio.run(count())


async def _create_entries(address: str, directory: str, count: int) -> None:
    async with Client(address) as fs:
        await fs.mkdir(directory)
        for start in range(0, count, CREATES_PER_TRANSACTION):
            async with fs.transaction() as t:
                end = min(count, start + CREATES_PER_TRANSACTION)
                await asyncio.gather(*(t.create(f"{directory}/e{k:07}") for k in range(start, end)))


def listing_rows(fs: PlasmaFileSystem, address: str, local: Path, count: int) -> dict[str, float]:
    """Seconds to list `count` entries with details, through pfs:// and locally."""
    asyncio.run(_create_entries(address, "/listing", count))
    (local / "listing").mkdir()
    for k in range(count):
        (local / "listing" / f"e{k:07}").touch()
    local_fs = fsspec.filesystem("file")
    pfs_listed = _best(lambda: fs.ls("/listing", detail=True))
    local_listed = _best(lambda: local_fs.ls(str(local / "listing"), detail=True))
    return {"listing seconds": pfs_listed, "listing seconds (local)": local_listed}


def _best(work: Callable[[], Any], runs: int = 3) -> float:
    return min(_timed(work) for _ in range(runs))


def run(size: int, ranges: int, entries: int) -> dict[str, Any]:
    """Every row, on a throw-away cluster and on a local directory."""
    frame = frame_of(size)
    figures: dict[str, Any] = {"bytes": int(frame.memory_usage(index=False).sum())}
    figures["caches dropped"] = drop_caches()
    local = Path(tempfile.mkdtemp(prefix="pfs-fsspec-bench-", dir="/var/tmp"))
    try:
        local_file = str(local / "bench.parquet")
        local_fs = PyFileSystem(FSSpecHandler(fsspec.filesystem("file")))
        figures["local"] = parquet_rows(frame, local_file, local_fs, local_file)
        capacity = max(2**30, 4 * size)
        with bench_cluster(datanodes=2, capacity=capacity) as cluster:
            address = cluster.namenode_address
            fs = PlasmaFileSystem(address, skip_instance_cache=True)
            try:
                arrow_fs = PyFileSystem(FSSpecHandler(fs))
                url = f"pfs://{address}/bench.parquet"
                rows: dict[str, Any] = {**parquet_rows(frame, url, arrow_fs, "/bench.parquet")}
                figures["pfs"] = rows
                rows.update(ranges_row(fs, "/bench.parquet", ranges, address))
                rows.update(listing_rows(fs, address, local, entries))
            finally:
                fs.close()
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return figures


def markdown(f: dict[str, Any], command: str, entries: int, ranges: int) -> str:
    """The BENCHMARKS.md section for these figures."""
    p, loc = f["pfs"], f["local"]
    lines = [
        "## fsspec: `pfs://` for pandas and pyarrow (`loadtests/fsspec_bench.py`)",
        "",
        f"Command: `{command}` — a parquet file of {f['bytes'] / 2**20:,.0f} MiB of random "
        "float64 (it does not compress) through `pfs://` (a local cluster: PostgreSQL, a "
        "namenode, two datanodes, TLS on, the file at the default replication) and on this "
        "machine's disk, in the same run; caches "
        f"{'dropped' if f['caches dropped'] else 'not dropped (not root)'} before each read.",
        "",
        "| workload | pfs:// | local disk | ratio | target |",
        "|---|---:|---:|---:|---|",
    ]
    for row, target in (
        ("parquet write", ">= 0.4x"),
        ("parquet read (pandas)", ">= 0.5x"),
        ("parquet scan (pyarrow dataset)", ">= 0.5x"),
    ):
        lines.append(
            f"| {row}, MB/s | {p[row]:,.0f} | {loc[row]:,.0f} | {p[row] / loc[row]:.2f}x "
            f"| {target} |"
        )
    lines += [
        f"| listing {entries:,} entries with details, s | {p['listing seconds']:.2f} | "
        f"{p['listing seconds (local)']:.2f} | "
        f"{p['listing seconds (local)'] / p['listing seconds']:.2f}x | |",
        "",
        f"`cat_ranges` of {ranges:,} random 64 KiB ranges: {p['cat_ranges MB/s']:,.0f} MB/s; "
        f"namenode requests by operation: {_shown(p['cat_ranges namenode requests'])} "
        "(opening the file: its attributes, its block list; target: none after the first).",
    ]
    return "\n".join(lines)


def _shown(counts: dict[str, int]) -> str:
    return ", ".join(f"{op} {n}" for op, n in sorted(counts.items())) or "none"


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G", help="parquet data size (default 1G)")
    parser.add_argument("--ranges", type=int, default=1000, help="ranges for cat_ranges")
    parser.add_argument("--entries", type=int, default=100_000, help="entries to list")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args(argv)
    try:
        size = parse_size(args.size)
    except ValueError as exc:
        parser.error(str(exc))
    if size < 1 or args.ranges < 1 or args.entries < 1:
        parser.error("--size, --ranges and --entries must be positive")
    figures = run(size, args.ranges, args.entries)
    figures["date"] = time.strftime("%Y-%m-%d")
    command = (
        f"python -m loadtests.fsspec_bench --size {args.size} --ranges {args.ranges} "
        f"--entries {args.entries}"
    )
    text = markdown(figures, command, args.entries, args.ranges)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "fsspec_bench", text)
    print(json.dumps(figures, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
