"""The namenode's in-memory form of an inode: the client-visible attributes plus the
symbolic link target, which only readlink and path resolution need, a small file's
content kept inline and the extended attributes; the lighter form walks list; extent
rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from plasmafs.core.attributes import Attr, FileKind

ROOT_INO = 1
# Inodes of snapshots are numbered from here (their own sequence): read-only by number.
SNAPSHOT_INO_BASE = 1 << 62
SNAPSHOT_DIR_NAME = ".snapshot"  # DIR/.snapshot/NAME: snapshot NAME of DIR


def in_snapshot(ino: int) -> bool:
    """True for an inode of a snapshot (read-only: namenode/snapshots.py)."""
    return ino >= SNAPSHOT_INO_BASE


@dataclass(frozen=True, slots=True)
class Inode:
    """An inode row."""

    attr: Attr
    target: str | None = None
    # A small file's first bytes (the rest up to its size reads as zeros); such a file
    # has no blocks. None: the content is in blocks, or the file is empty.
    data: bytes | None = None
    # The extended attributes, encoded (core/xattrs.py); None: none. A listing's inode
    # carries b"" for "some, not read" (its attributes say has_xattrs).
    xattrs: bytes | None = None

    @property
    def ino(self) -> int:
        """The inode number."""
        return self.attr.ino

    @property
    def kind(self) -> FileKind:
        """File, directory or symlink."""
        return self.attr.kind


class Listed(NamedTuple):
    """An inode as a walk lists it: the numbers of its `Attr` in their order (the kind
    as a number), a symbolic link's target, whether its content is inline, then its
    device number and whether it has extended attributes. A walk
    lists thousands per page; this costs a fraction of building an `Attr` each."""

    ino: int
    kind: int
    mode: int
    uid: int
    gid: int
    size: int
    mtime_ns: int
    ctime_ns: int
    nlink: int
    replication: int
    blocksize: int
    version: int
    target: str | None
    inline: bool  # a small file whose content the namespace keeps
    rdev: int  # a device's number; 0 for every other kind
    has_xattrs: bool

    @classmethod
    def of(cls, inode: Inode) -> Listed:
        """The listed form of an inode."""
        a = inode.attr
        return cls(
            a.ino, int(a.kind), a.mode, a.uid, a.gid, a.size, a.mtime_ns, a.ctime_ns,
            a.nlink, a.replication, a.blocksize, a.version, inode.target, inode.data is not None,
            a.rdev, a.has_xattrs,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ExtentRow:
    """File blocks [file_index, file_index + block_count) of one replica, stored at
    blocks [block_start, block_start + block_count) of a datanode, allocated in
    `generation` (its blocks' owner stamp on the datanode: see sql/0012; 0: none).
    Blocks moved here from another file keep that file's stamp: `stamp_ino` (0: this
    file) and `stamp_shift` (added to a file index gives the stamped one; sql/0018)."""

    file_index: int
    block_count: int
    datanode_id: int
    block_start: int
    generation: int = 0
    stamp_ino: int = 0
    stamp_shift: int = 0

    def owner(self, ino: int) -> tuple[int, int, int]:
        """The owner stamp of this extent's first block, as a row of file `ino`:
        (file, generation, file block index)."""
        return (self.stamp_ino or ino, self.generation, self.file_index + self.stamp_shift)

    @property
    def key(self) -> tuple[int, int]:
        """(file_index, datanode): unique per file."""
        return (self.file_index, self.datanode_id)

    @property
    def file_end(self) -> int:
        """One past the last file block."""
        return self.file_index + self.block_count
