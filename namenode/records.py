"""The namenode's in-memory form of an inode: the client-visible attributes plus the
symbolic link target, which only readlink and path resolution need, and a small file's
content kept inline."""

from __future__ import annotations

from dataclasses import dataclass

from plasmafs.client.attributes import Attr, FileKind

ROOT_INO = 1


@dataclass(frozen=True, slots=True)
class Inode:
    """An inode row."""

    attr: Attr
    target: str | None = None
    # A small file's first bytes (the rest up to its size reads as zeros); such a file
    # has no blocks. None: the content is in blocks, or the file is empty.
    data: bytes | None = None

    @property
    def ino(self) -> int:
        """The inode number."""
        return self.attr.ino

    @property
    def kind(self) -> FileKind:
        """File, directory or symlink."""
        return self.attr.kind


@dataclass(frozen=True, slots=True)
class ExtentRow:
    """File blocks [file_index, file_index + block_count) of one replica, stored at
    blocks [block_start, block_start + block_count) of a datanode."""

    file_index: int
    block_count: int
    datanode_id: int
    block_start: int

    @property
    def key(self) -> tuple[int, int]:
        """(file_index, datanode): unique per file."""
        return (self.file_index, self.datanode_id)

    @property
    def file_end(self) -> int:
        """One past the last file block."""
        return self.file_index + self.block_count
