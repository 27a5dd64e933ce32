"""The FUSE binding's own ceiling: the mount benchmark's metadata rows on a file system
that keeps everything in memory and answers every request at once.

    python -m loadtests.fuse_ceiling [--files 5000] [--dirs 1870] [--tree-files 28600]

A pyfuse3 file system in asyncio mode on uvloop, in a process of its own, run the way
`pfs mount` runs (`mount/daemon.py`), but with no namenode, no network and no disk
behind it, so what it measures is the kernel's FUSE round trips plus pyfuse3's and
Python's per-request cost: an upper bound for any mount built on this binding on this
machine. The figures are printed next to the same workloads on a local directory, in
the same run.
"""

from __future__ import annotations

import argparse
import errno
import multiprocessing
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyfuse3
import pyfuse3.asyncio
import uvloop

from loadtests.mount_bench import empty_files, timed_command, tree_build


class _Node:
    """An inode: its attributes, a file's bytes, a directory's names."""

    def __init__(self, ino: int, mode: int, parent: int) -> None:
        self.ino = ino
        self.mode = mode
        self.parent = parent
        self.data = b""
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
            node.data = node.data[: attr.st_size].ljust(attr.st_size, b"\0")
        return self._entry(node)

    async def mkdir(self, parent_inode, name, mode, ctx):
        """A new directory."""
        self.calls["mkdir"] += 1
        return self._entry(self._new(parent_inode, name, stat.S_IFDIR | stat.S_IMODE(mode)))

    async def create(self, parent_inode, name, mode, flags, ctx):
        """A new file, open."""
        self.calls["create"] += 1
        node = self._new(parent_inode, name, stat.S_IFREG | stat.S_IMODE(mode))
        return pyfuse3.FileInfo(fh=node.ino), self._entry(node)

    async def open(self, inode, flags, ctx):
        """The handle is the inode number."""
        self.calls["open"] += 1
        return pyfuse3.FileInfo(fh=inode)

    async def read(self, fh, off, size):
        """Bytes of a file."""
        self.calls["read"] += 1
        return self.nodes[fh].data[off : off + size]

    async def write(self, fh, off, buf):
        """Bytes into a file."""
        self.calls["write"] += 1
        node = self.nodes[fh]
        node.data = node.data[:off].ljust(off, b"\0") + buf + node.data[off + len(buf) :]
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


def _serve(mountpoint: Path, ready: Any, counts: Any) -> None:
    """The memory file system's process: mount, answer until unmounted, send counts."""
    operations = MemoryOperations()

    async def main() -> None:
        pyfuse3.init(operations, str(mountpoint), {"fsname=ceiling", "default_permissions"})
        ready.set()
        try:
            await pyfuse3.main()
        finally:
            pyfuse3.close(unmount=False)

    pyfuse3.asyncio.enable()
    uvloop.run(main())
    counts.put(dict(operations.calls))


def measure(root: Path, files: int, dirs: int, tree_files: int) -> dict[str, float]:
    """The metadata rows of the mount benchmark under `root`."""
    return {
        "empty files/s, 1 process": empty_files(root, 1, files),
        "empty files/s, 4 processes": empty_files(root, 4, files),
        "tree build, s": tree_build(root, dirs, tree_files),
        "ls -lR, s": timed_command(["ls", "-lR", str(root / "tree")]),
        "du -sh, s": timed_command(["du", "-sh", str(root / "tree")]),
        "rm -rf, s": timed_command(["rm", "-rf", str(root / "tree")]),
    }


def main(argv: list[str] | None = None) -> int:
    """Mount the memory file system in a process of its own, run the rows there and locally."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--dirs", type=int, default=1870)
    parser.add_argument("--tree-files", type=int, default=28600)
    args = parser.parse_args(argv)
    # The file system runs in a process of its own, as `pfs mount` does: the workloads
    # (the tree build runs in this process) must not share its interpreter lock.
    spawn = multiprocessing.get_context("spawn")
    ready, counts = spawn.Event(), spawn.Queue()
    with tempfile.TemporaryDirectory(prefix="pfs-ceiling-") as scratch:
        mountpoint, local = Path(scratch) / "mnt", Path(scratch) / "local"
        mountpoint.mkdir()
        local.mkdir()
        server = spawn.Process(target=_serve, args=(mountpoint, ready, counts))
        server.start()
        if not ready.wait(10):
            server.kill()
            print("the memory file system did not mount", file=sys.stderr)
            return 1
        try:
            on_fuse = measure(mountpoint, args.files, args.dirs, args.tree_files)
        finally:
            subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
        calls: dict[str, int] = counts.get(timeout=30)
        server.join(10)
        on_disk = measure(local, args.files, args.dirs, args.tree_files)
    for row, value in on_fuse.items():
        print(f"{row:<28} {value:>10.2f}  local {on_disk[row]:>10.2f}")
    listed = ", ".join(f"{k} {v}" for k, v in Counter(calls).most_common())
    print(f"requests: {listed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
