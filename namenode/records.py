"""The namenode's in-memory form of an inode: the client-visible attributes plus the
symbolic link target, which only readlink and path resolution need."""

from __future__ import annotations

from dataclasses import dataclass

from plasmafs.client.attributes import Attr, FileKind

ROOT_INO = 1


@dataclass(frozen=True, slots=True)
class Inode:
    """An inode row."""

    attr: Attr
    target: str | None = None

    @property
    def ino(self) -> int:
        """The inode number."""
        return self.attr.ino

    @property
    def kind(self) -> FileKind:
        """File, directory or symlink."""
        return self.attr.kind
