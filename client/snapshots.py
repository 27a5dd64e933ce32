"""Snapshots of directories: taking, deleting and listing them (the namenode's
Snapshots service), and what changed between two of them or between one and now.

A snapshot NAME of directory DIR reads at `DIR/.snapshot/NAME` like any directory
(read-only: changes fail with ReadOnlyError, EROFS on a mount).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plasmafs.client.unary_service import UnaryService
from plasmafs.core import paths
from plasmafs.core.attributes import Attr, TreeEntry
from plasmafs.core.errors import InvalidArgumentError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from plasmafs.client.connection import Connection

SNAPSHOT_DIR = ".snapshot"
# Taking or deleting a snapshot of a large tree copies or removes its rows: minutes at
# millions of entries.
CHANGE_TIMEOUT = 3600.0

Walk = Callable[[str], AsyncIterator[TreeEntry]]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One snapshot of a directory."""

    name: str
    root_ino: int  # the snapshot's copy of the directory
    created_ns: int
    inodes: int  # below its root

    def path(self, directory: str) -> str:
        """Where the snapshot of `directory` reads."""
        return snapshot_path(directory, self.name)


@dataclass(frozen=True, slots=True)
class SnapshotChange:
    """One difference between two images of a tree: "+" created, "-" deleted, "M"
    modified (content, attributes, or a directory's entries), at `path` below the
    directory. A rename shows as "-" of the old path and "+" of the new."""

    change: str
    path: str


def snapshot_path(directory: str, name: str) -> str:
    """`directory`/.snapshot/`name`."""
    return f"{directory.rstrip('/')}/{SNAPSHOT_DIR}/{name}"


class Snapshots(UnaryService):
    """The Snapshots service of the namenode behind one connection."""

    def __init__(self, conn: Connection, walk: Walk) -> None:
        super().__init__(conn, pb_grpc.SnapshotsStub, "Snapshots")
        self._walk = walk

    async def create(self, directory: str, name: str) -> Snapshot:
        """Take snapshot `name` of `directory` (its owner's or a superuser's right)."""
        request = pb.SnapshotRequest(path=paths.encode(directory), name=_checked(name))
        return _snapshot(await self._call(self._stub.CreateSnapshot, request, CHANGE_TIMEOUT))

    async def delete(self, directory: str, name: str) -> list[Snapshot]:
        """Delete snapshot `name` of `directory`; the snapshots left. Its blocks that no
        live file or other snapshot names are freed."""
        request = pb.SnapshotRequest(path=paths.encode(directory), name=_checked(name))
        reply = await self._call(self._stub.DeleteSnapshot, request, CHANGE_TIMEOUT)
        return [_snapshot(s) for s in reply.snapshots]

    async def list(self, directory: str) -> list[Snapshot]:
        """The snapshots of `directory`, oldest first."""
        request = pb.SnapshotRequest(path=paths.encode(directory))
        reply = await self._call(self._stub.ListSnapshots, request)
        return [_snapshot(s) for s in reply.snapshots]

    async def diff(
        self, directory: str, since: str, until: str | None = None
    ) -> AsyncIterator[SnapshotChange]:
        """What changed in `directory`'s tree from snapshot `since` to snapshot `until`
        (None: to the live tree now), in the walk's order."""
        old = self._walk(snapshot_path(directory, _checked(since)))
        new = self._walk(directory if until is None else snapshot_path(directory, _checked(until)))
        async for change in _differences(old, new):
            yield change


async def _differences(
    old: AsyncIterator[TreeEntry], new: AsyncIterator[TreeEntry]
) -> AsyncIterator[SnapshotChange]:
    """Merge two walks (depth first by name: ordered by path components)."""
    a = await anext(old, None)
    b = await anext(new, None)
    while a is not None or b is not None:
        ka = _key(a.path) if a is not None else None
        kb = _key(b.path) if b is not None else None
        if b is None or (a is not None and ka is not None and kb is not None and ka < kb):
            assert a is not None
            yield SnapshotChange("-", a.path)
            a = await anext(old, None)
        elif a is None or (kb is not None and ka is not None and kb < ka):
            yield SnapshotChange("+", b.path)
            b = await anext(new, None)
        else:
            if _changed(a, b):
                yield SnapshotChange("M", a.path)
            a = await anext(old, None)
            b = await anext(new, None)


def _key(path: str) -> tuple[str, ...]:
    return tuple(path.split("/")) if path else ()


def _changed(a: TreeEntry, b: TreeEntry) -> bool:
    x, y = a.attr, b.attr
    return _compared(x) != _compared(y) or a.target != b.target


def _compared(attr: Attr) -> tuple[object, ...]:
    return (attr.kind, attr.size, attr.mtime_ns, attr.ctime_ns, attr.mode, attr.uid, attr.gid)


def _checked(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise InvalidArgumentError(f"not a snapshot name: {name!r}")
    return name


def _snapshot(s: pb.SnapshotInfo) -> Snapshot:
    return Snapshot(s.name, s.root_ino, s.created_ns, s.inodes)
