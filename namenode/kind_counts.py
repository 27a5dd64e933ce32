"""How many files, directories and symbolic links the namespace holds: counted once at
start, then kept current by every commit (fsstat answers from memory)."""

from __future__ import annotations

from typing import Protocol

from plasmafs.core.attributes import FileKind
from plasmafs.namenode.changeset import ChangeSet


class KindSource(Protocol):
    """Where the counts start from (the store)."""

    async def count_kinds(self) -> dict[FileKind, int]:
        """How many inodes of each kind exist."""
        ...


class KindCounts:
    """Committed inodes by kind."""

    def __init__(self) -> None:
        self._counts: dict[FileKind, int] = {}

    async def load(self, source: KindSource) -> None:
        """Start from the committed counts."""
        self._counts = await source.count_kinds()

    def get(self, kind: FileKind) -> int:
        """Committed inodes of `kind`."""
        return self._counts.get(kind, 0)

    def committed(self, cs: ChangeSet) -> None:
        """Count what a committed change set created and deleted."""
        counts = self._counts
        for ino in cs.created:
            inode = cs.inodes.get(ino)
            if inode is not None:
                counts[inode.kind] = counts.get(inode.kind, 0) + 1
        for kind in cs.deleted_kinds.values():
            counts[kind] = counts.get(kind, 0) - 1
