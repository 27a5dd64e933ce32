"""The FUSE bindings' own ceilings: the mount benchmark's metadata rows and dd writes
on a file system that keeps everything in memory and answers every request at once.

    python -m loadtests.fuse_ceiling [--files 5000] [--dirs 1870] [--tree-files 28600]
        [--dd-mb 200] [--update BENCHMARKS.md]

A pyfuse3 file system in asyncio mode on uvloop, in a process of its own, run the way
`pfs mount` runs (`mount/process.py`, `mount/request_wait.py`), but with no namenode, no
network and no disk behind it (and, as there, no `default_permissions`, so the kernel
does not fetch a directory's attributes again after each change in it; a write-only
open writes around the kernel's page cache). What it
measures is the kernel's FUSE round trips plus pyfuse3's and Python's per-request
cost: an upper bound for any mount built on this binding on this machine. The same
dicts behind mfusepy, the binding weighed against it (`ceiling_mfusepy.py`), and the
same workloads on a local directory are measured in the same run.
"""

from __future__ import annotations

import argparse
import errno
import multiprocessing
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyfuse3
import uvloop

from loadtests import ceiling_mfusepy
from loadtests.harness import update_benchmarks_md
from loadtests.mount_bench import MB, dd_write, timed_command
from loadtests.tree_shapes import empty_files, tree_build
from plasmafs.mount import request_wait
from plasmafs.mount.operations import writes_around_page_cache

MOUNT_WAIT = 10.0  # s a memory file system may take to mount


class _Node:
    """An inode: its attributes, a file's bytes, a directory's names."""

    def __init__(self, ino: int, mode: int, parent: int) -> None:
        self.ino = ino
        self.mode = mode
        self.parent = parent
        self.data = bytearray()
        self.children: dict[bytes, int] = {}
        self.ns = time.time_ns()


class MemoryOperations(pyfuse3.Operations):
    """Every request answered from dicts, with a count of each request kind."""

    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self) -> None:
        super().__init__()
        self.nodes = {pyfuse3.ROOT_INODE: _Node(pyfuse3.ROOT_INODE, stat.S_IFDIR | 0o755, 1)}
        self.next_ino = pyfuse3.ROOT_INODE + 1
        self.calls: Counter[str] = Counter()

    def _entry(self, node: _Node) -> pyfuse3.EntryAttributes:
        out = pyfuse3.EntryAttributes()
        out.st_ino = node.ino
        out.st_mode = node.mode
        out.st_nlink = 1
        out.st_size = len(node.data)
        out.st_blksize = 4096
        out.st_blocks = (len(node.data) + 511) // 512
        out.st_atime_ns = out.st_mtime_ns = out.st_ctime_ns = node.ns
        out.attr_timeout = out.entry_timeout = 1.0
        out.generation = 0
        return out

    def _new(self, parent: int, name: bytes, mode: int) -> _Node:
        directory = self.nodes[parent]
        if name in directory.children:
            raise pyfuse3.FUSEError(errno.EEXIST)
        node = _Node(self.next_ino, mode, parent)
        self.next_ino += 1
        self.nodes[node.ino] = node
        directory.children[name] = node.ino
        return node

    async def lookup(self, parent_inode, name, ctx):
        """A name in a directory."""
        self.calls["lookup"] += 1
        ino = self.nodes[parent_inode].children.get(name)
        if ino is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._entry(self.nodes[ino])

    async def getattr(self, inode, ctx):
        """Attributes of an inode."""
        self.calls["getattr"] += 1
        return self._entry(self.nodes[inode])

    async def setattr(self, inode, attr, fields, fh, ctx):
        """Only truncation changes anything here."""
        self.calls["setattr"] += 1
        node = self.nodes[inode]
        if fields.update_size:
            del node.data[attr.st_size :]
            node.data.extend(bytes(attr.st_size - len(node.data)))
        return self._entry(node)

    async def mkdir(self, parent_inode, name, mode, ctx):
        """A new directory."""
        self.calls["mkdir"] += 1
        return self._entry(self._new(parent_inode, name, stat.S_IFDIR | stat.S_IMODE(mode)))

    async def create(self, parent_inode, name, mode, flags, ctx):
        """A new file, open."""
        self.calls["create"] += 1
        node = self._new(parent_inode, name, stat.S_IFREG | stat.S_IMODE(mode))
        return _opened(node.ino, flags), self._entry(node)

    async def open(self, inode, flags, ctx):
        """The handle is the inode number."""
        self.calls["open"] += 1
        return _opened(inode, flags)

    async def read(self, fh, off, size):
        """Bytes of a file."""
        self.calls["read"] += 1
        return bytes(self.nodes[fh].data[off : off + size])

    async def write(self, fh, off, buf):
        """Bytes into a file."""
        self.calls["write"] += 1
        node = self.nodes[fh]
        if off > len(node.data):
            node.data.extend(bytes(off - len(node.data)))
        node.data[off : off + len(buf)] = buf
        return len(buf)

    async def flush(self, fh):
        """Nothing to make visible."""
        self.calls["flush"] += 1

    async def release(self, fh):
        """Nothing to close."""
        self.calls["release"] += 1

    async def opendir(self, inode, ctx):
        """The handle is the inode number."""
        self.calls["opendir"] += 1
        return inode

    async def readdir(self, fh, start_id, token):
        """Entries with attributes from position `start_id`."""
        self.calls["readdir"] += 1
        names = list(self.nodes[fh].children.items())
        for position, (name, ino) in enumerate(names[start_id:], start_id + 1):
            if not pyfuse3.readdir_reply(token, name, self._entry(self.nodes[ino]), position):
                return

    async def releasedir(self, fh):
        """Nothing to close."""

    async def unlink(self, parent_inode, name, ctx):
        """Remove a file."""
        self.calls["unlink"] += 1
        del self.nodes[self.nodes[parent_inode].children.pop(name)]

    async def rmdir(self, parent_inode, name, ctx):
        """Remove an empty directory."""
        self.calls["rmdir"] += 1
        directory = self.nodes[parent_inode]
        if self.nodes[directory.children[name]].children:
            raise pyfuse3.FUSEError(errno.ENOTEMPTY)
        del self.nodes[directory.children.pop(name)]


def _opened(fh: int, flags: int) -> pyfuse3.FileInfo:
    """An open as the mount answers it: write-only opens around the page cache."""
    return pyfuse3.FileInfo(fh=fh, direct_io=writes_around_page_cache(flags, writeback=False))


def _serve(mountpoint: Path, ready: Any, counts: Any) -> None:
    """The memory file system's process: mount, answer until unmounted, send counts."""
    operations = MemoryOperations()

    async def main() -> None:
        pyfuse3.init(operations, str(mountpoint), {"fsname=ceiling"})
        ready.set()
        try:
            await pyfuse3.main()
        finally:
            pyfuse3.close(unmount=False)

    request_wait.enable()
    uvloop.run(main())
    counts.put(dict(operations.calls))


def measure(root: Path, args: argparse.Namespace) -> dict[str, float]:
    """The metadata rows of the mount benchmark under `root`, and its small writes."""
    return {
        "dd write 1 KiB, MB/s": dd_write(root, "dd-1k", 1024, args.dd_mb * MB),
        "dd write 64 KiB, MB/s": dd_write(root, "dd-64k", 65536, args.dd_mb * MB),
        "empty files/s, 1 process": empty_files(root, 1, args.files),
        "empty files/s, 4 processes": empty_files(root, 4, args.files),
        "tree build, s": tree_build(root, args.dirs, args.tree_files),
        "ls -lR, s": timed_command(["ls", "-lR", str(root / "tree")]),
        "du -sh, s": timed_command(["du", "-sh", str(root / "tree")]),
        "rm -rf, s": timed_command(["rm", "-rf", str(root / "tree")]),
    }


def _on_pyfuse3(mountpoint: Path, args: argparse.Namespace) -> tuple[dict[str, float], str]:
    """The rows on the pyfuse3 memory file system, and the requests it answered."""
    spawn = multiprocessing.get_context("spawn")
    ready, counts = spawn.Event(), spawn.Queue()
    server = spawn.Process(target=_serve, args=(mountpoint, ready, counts))
    server.start()
    if not ready.wait(MOUNT_WAIT):
        server.kill()
        raise RuntimeError("the pyfuse3 memory file system did not mount")
    try:
        figures = measure(mountpoint, args)
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
    calls: dict[str, int] = counts.get(timeout=30)
    server.join(10)
    return figures, ", ".join(f"{k} {v}" for k, v in Counter(calls).most_common())


def _on_mfusepy(mountpoint: Path, args: argparse.Namespace) -> dict[str, float]:
    """The rows on the mfusepy memory file system."""
    server = multiprocessing.get_context("spawn").Process(
        target=ceiling_mfusepy.serve, args=(mountpoint,)
    )
    server.start()
    deadline = time.monotonic() + MOUNT_WAIT
    while not os.path.ismount(mountpoint):
        if time.monotonic() > deadline or not server.is_alive():
            server.kill()
            raise RuntimeError("the mfusepy memory file system did not mount")
        time.sleep(0.05)
    try:
        return measure(mountpoint, args)
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
        server.join(10)


def _figure(value: float) -> str:
    """Two decimals, or three significant digits below 1 (a small run's times)."""
    return f"{value:,.2f}" if value >= 1 else f"{value:.3g}"


def markdown(rows: dict[str, dict[str, float]], calls: str, command: str) -> str:
    """The BENCHMARKS.md section for these figures."""
    lines = [
        "## The FUSE bindings' ceilings (`loadtests/fuse_ceiling.py`)",
        "",
        f"Command: `{command}` — the mount benchmark's small writes and metadata rows on a",
        "file system that keeps everything in memory (no namenode, no network, no disk), on",
        "pyfuse3 in asyncio mode on uvloop (as `pfs mount` runs) and on mfusepy (libfuse's",
        "high-level path API through ctypes, libfuse's threads), each in a process of its",
        "own, next to a directory of this machine's disk in the same run. No mount built on",
        "a binding can beat its column; the mount's own figures are in the mount section.",
        "",
        "| workload | pyfuse3 | mfusepy | local disk | pyfuse3 / mfusepy |",
        "|---|---:|---:|---:|---:|",
    ]
    for row, value in rows["pyfuse3"].items():
        other = rows["mfusepy"][row]
        ratio = other / value if row.endswith(", s") else value / other  # above 1: faster
        figures = " | ".join(_figure(v) for v in (value, other, rows["local"][row]))
        lines.append(f"| {row} | {figures} | {ratio:.2f} |")
    lines += ["", f"Requests pyfuse3 answered: {calls}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Mount each memory file system in a process of its own (as `pfs mount` runs: the
    workloads, the tree build in this process, must not share its interpreter lock),
    run the rows there and locally, print the table (and write it into BENCHMARKS.md
    with --update)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--dirs", type=int, default=1870)
    parser.add_argument("--tree-files", type=int, default=28600)
    parser.add_argument("--dd-mb", type=int, default=200, help="MB each dd row writes")
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args(argv)
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="pfs-ceiling-") as scratch:
        paths = {name: Path(scratch) / name for name in ("pyfuse3", "mfusepy", "local")}
        for path in paths.values():
            path.mkdir()
        try:
            rows["pyfuse3"], calls = _on_pyfuse3(paths["pyfuse3"], args)
            rows["mfusepy"] = _on_mfusepy(paths["mfusepy"], args)
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        rows["local"] = measure(paths["local"], args)
    command = (
        f"python -m loadtests.fuse_ceiling --files {args.files} --dirs {args.dirs} "
        f"--tree-files {args.tree_files} --dd-mb {args.dd_mb}"
    )
    text = markdown(rows, calls, command)
    print(text)
    if args.update:
        update_benchmarks_md(args.update, "fuse_ceiling", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
