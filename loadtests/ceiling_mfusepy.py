"""The other FUSE binding weighed for the mount: an in-memory file system on mfusepy.

mfusepy (the maintained successor of fusepy) binds libfuse 3's high-level,
path-based API through ctypes, and libfuse calls it from its own threads. The
file system here keeps the same dicts as `fuse_ceiling.MemoryOperations`, so the
two bindings' ceilings are measured on the same workloads in the same run
(`python -m loadtests.fuse_ceiling`). As the mount does, a write-only open writes
around the kernel's page cache (libfuse passes the open's file info through, raw_fi).
"""

from __future__ import annotations

import errno
import stat
import threading
import time
from pathlib import Path
from typing import Any

import mfusepy

from plasmafs.mount.operations import writes_around_page_cache


class _Node:
    """An inode: its mode, a file's bytes, a directory's names."""

    def __init__(self, mode: int) -> None:
        self.mode = mode
        self.data = bytearray()
        self.children: dict[str, _Node] = {}
        self.ns = time.time_ns()


class MemoryPaths(mfusepy.Operations):
    """Every request answered from dicts by path, under one lock (libfuse's threads
    call in at once)."""

    use_ns = True

    def __init__(self) -> None:
        self.root = _Node(stat.S_IFDIR | 0o755)
        self.guard = threading.Lock()
        self.handles: dict[int, _Node] = {}
        self.next_fh = 1

    def _find(self, path: str) -> _Node:
        node = self.root
        for part in filter(None, path.split("/")):
            child = node.children.get(part)
            if child is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            node = child
        return node

    def _parent(self, path: str) -> tuple[_Node, str]:
        head, _, name = path.rpartition("/")
        return self._find(head), name

    def _new(self, path: str, mode: int) -> _Node:
        parent, name = self._parent(path)
        if name in parent.children:
            raise mfusepy.FuseOSError(errno.EEXIST)
        node = parent.children[name] = _Node(mode)
        return node

    def _open(self, node: _Node, fi: Any) -> int:
        fi.fh, self.next_fh = self.next_fh, self.next_fh + 1
        fi.direct_io = writes_around_page_cache(fi.flags, writeback=False)
        self.handles[fi.fh] = node
        return 0

    def getattr(self, path: str, fi: Any = None) -> dict[str, Any]:
        """Attributes of a path."""
        with self.guard:
            node = self._find(path)
            return {
                "st_mode": node.mode,
                "st_nlink": 1,
                "st_size": len(node.data),
                "st_atime": node.ns,
                "st_mtime": node.ns,
                "st_ctime": node.ns,
            }

    def readdir(self, path: str, fh: int) -> list[str]:
        """The names in a directory."""
        with self.guard:
            return [".", "..", *self._find(path).children]

    def mkdir(self, path: str, mode: int) -> int:
        """A new directory."""
        with self.guard:
            self._new(path, stat.S_IFDIR | stat.S_IMODE(mode))
        return 0

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        """A new file, open."""
        with self.guard:
            return self._open(self._new(path, stat.S_IFREG | stat.S_IMODE(mode)), fi)

    def open(self, path: str, fi: Any) -> int:
        """An existing file, open."""
        with self.guard:
            return self._open(self._find(path), fi)

    def read(self, path: str, size: int, offset: int, fi: Any) -> bytes:
        """Bytes of an open file."""
        with self.guard:
            return bytes(self.handles[fi.fh].data[offset : offset + size])

    def write(self, path: str, data: bytes, offset: int, fi: Any) -> int:
        """Bytes into an open file."""
        with self.guard:
            node = self.handles[fi.fh]
            if offset > len(node.data):
                node.data.extend(bytes(offset - len(node.data)))
            node.data[offset : offset + len(data)] = data
            return len(data)

    def truncate(self, path: str, length: int, fi: Any = None) -> int:
        """Cut or extend a file."""
        with self.guard:
            node = self.handles[fi.fh] if fi else self._find(path)
            del node.data[length:]
            node.data.extend(bytes(length - len(node.data)))
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        """Times are not kept apart from creation."""
        return 0

    def flush(self, path: str, fi: Any) -> int:
        """Nothing to make visible."""
        return 0

    def release(self, path: str, fi: Any) -> int:
        """Forget the handle."""
        with self.guard:
            self.handles.pop(fi.fh, None)
        return 0

    def unlink(self, path: str) -> int:
        """Remove a file."""
        with self.guard:
            parent, name = self._parent(path)
            if parent.children.pop(name, None) is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
        return 0

    def rmdir(self, path: str) -> int:
        """Remove an empty directory."""
        with self.guard:
            parent, name = self._parent(path)
            node = parent.children.get(name)
            if node is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            if node.children:
                raise mfusepy.FuseOSError(errno.ENOTEMPTY)
            del parent.children[name]
        return 0


def serve(mountpoint: Path) -> None:
    """Mount the memory file system at `mountpoint` and answer until unmounted."""
    mfusepy.FUSE(MemoryPaths(), str(mountpoint), foreground=True, raw_fi=True)
