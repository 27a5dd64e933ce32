"""The values the namespace hands out: file attributes, directory entries, statistics."""

from __future__ import annotations

import enum
import stat
from dataclasses import dataclass
from typing import NamedTuple

from plasmafs.core.proto import namenode_pb2 as pb


class FileKind(enum.IntEnum):
    """What an inode is; the values are the wire's FileKind."""

    FILE = pb.KIND_FILE
    DIRECTORY = pb.KIND_DIRECTORY
    SYMLINK = pb.KIND_SYMLINK
    # Special files: no content; the kernel of the host that opens one serves it.
    FIFO = pb.KIND_FIFO
    CHAR_DEVICE = pb.KIND_CHAR_DEVICE
    BLOCK_DEVICE = pb.KIND_BLOCK_DEVICE
    SOCKET = pb.KIND_SOCKET

    @property
    def type_bits(self) -> int:
        """The S_IFMT bits of this kind, for st_mode-style display."""
        return _TYPE_BITS[self]

    @property
    def special(self) -> bool:
        """True for a FIFO, a socket or a device."""
        return self in _SPECIAL

    @property
    def is_device(self) -> bool:
        """True for a character or block device (they have a device number)."""
        return self in (FileKind.CHAR_DEVICE, FileKind.BLOCK_DEVICE)

    @classmethod
    def of_mode(cls, mode: int) -> FileKind:
        """The kind an st_mode's type bits name; ValueError for none of them."""
        for kind, bits in _TYPE_BITS.items():
            if stat.S_IFMT(mode) == bits:
                return kind
        raise ValueError(f"no file kind has type bits {stat.S_IFMT(mode):o}")


_TYPE_BITS = {
    FileKind.FILE: stat.S_IFREG,
    FileKind.DIRECTORY: stat.S_IFDIR,
    FileKind.SYMLINK: stat.S_IFLNK,
    FileKind.FIFO: stat.S_IFIFO,
    FileKind.CHAR_DEVICE: stat.S_IFCHR,
    FileKind.BLOCK_DEVICE: stat.S_IFBLK,
    FileKind.SOCKET: stat.S_IFSOCK,
}
_SPECIAL = frozenset({FileKind.FIFO, FileKind.CHAR_DEVICE, FileKind.BLOCK_DEVICE, FileKind.SOCKET})


_KINDS = {int(kind): kind for kind in FileKind}  # a dict lookup costs less than the call


class ReplicaState(enum.IntEnum):
    """How the namenode accounts one replica; the values are the wire's ReplicaState.
    Only LIVE replicas count in a file's actual replication."""

    LIVE = pb.REPLICA_LIVE
    SUSPECT = pb.REPLICA_SUSPECT  # its datanode missed its heartbeats
    LOST = pb.REPLICA_LOST  # its datanode is dead longer than replica_lost_after
    CORRUPT = pb.REPLICA_CORRUPT  # a checksum failed on it
    DECOMMISSIONING = pb.REPLICA_DECOMMISSIONING  # its datanode is being drained

    @property
    def label(self) -> str:
        """The lower-case name reports print."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Attr:
    """An inode's attributes as committed (or as seen inside a transaction)."""

    ino: int
    kind: FileKind
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
    rdev: int = 0  # a device's number (st_rdev); 0 for every other kind
    has_xattrs: bool = False  # it has extended attributes

    @property
    def is_dir(self) -> bool:
        """True for a directory."""
        return self.kind is FileKind.DIRECTORY

    @property
    def st_mode(self) -> int:
        """Type and permission bits in one number, as os.stat() reports them."""
        return self.kind.type_bits | self.mode

    @classmethod
    def from_wire(cls, a: pb.Attr) -> Attr:
        """Build from the wire message."""
        return cls(
            a.ino,
            _KINDS.get(a.kind) or FileKind(a.kind),
            a.mode,
            a.uid,
            a.gid,
            a.size,
            a.mtime_ns,
            a.ctime_ns,
            a.nlink,
            a.replication,
            a.blocksize,
            a.version,
            a.rdev,
            a.has_xattrs,
        )

    def to_wire(self, out: pb.Attr) -> None:
        """Fill the wire message `out`."""
        out.ino = self.ino
        out.kind = int(self.kind)  # type: ignore[assignment]
        out.mode = self.mode
        out.uid = self.uid
        out.gid = self.gid
        out.size = self.size
        out.mtime_ns = self.mtime_ns
        out.ctime_ns = self.ctime_ns
        out.nlink = self.nlink
        out.replication = self.replication
        out.blocksize = self.blocksize
        out.version = self.version
        if self.rdev:
            out.rdev = self.rdev
        if self.has_xattrs:
            out.has_xattrs = True


@dataclass(frozen=True, slots=True)
class DirEntry:
    """One directory entry; `attr` is set when listed with attributes."""

    name: str
    ino: int
    kind: FileKind
    attr: Attr | None = None


@dataclass(frozen=True, slots=True)
class Quota:
    """A directory's quota (None: no limit of that kind) and what its tree uses of it:
    entries (the directory itself and every name below it, a file with several names
    counted at each) and space (bytes with replication)."""

    max_entries: int | None
    max_space: int | None
    entries: int
    space: int

    @property
    def remaining_entries(self) -> int | None:
        """Entries the tree may still take (negative: over a limit set below its
        usage); None without a limit."""
        return None if self.max_entries is None else self.max_entries - self.entries

    @property
    def remaining_space(self) -> int | None:
        """Space the tree may still take; None without a limit."""
        return None if self.max_space is None else self.max_space - self.space


@dataclass(frozen=True, slots=True)
class Summary:
    """The totals of a subtree, as `du` and `count` print them."""

    files: int
    directories: int  # the root included when it is one
    symlinks: int
    bytes: int  # the files' sizes
    space: int  # with replication; a small file kept in the namespace counts once
    unreadable: int = 0  # directories not entered: no read and search permission
    quota: Quota | None = None  # the root's, when it has one

    @property
    def entries(self) -> int:
        """Files, directories and symbolic links."""
        return self.files + self.directories + self.symlinks


class TreeEntry(NamedTuple):
    """One entry of a walk: its path below the walk's root ("" for the root itself),
    its attributes, a symbolic link's target, whether it is a directory the walk could
    not enter (no read and search permission), and whether it is a small file whose
    content the namespace keeps. (A tuple: a walk makes thousands a page.)"""

    path: str
    attr: Attr
    target: str | None = None
    unreadable: bool = False
    inline: bool = False  # a small file whose content the namespace keeps

    @property
    def space(self) -> int:
        """Bytes of storage a file takes with replication (as `Summary.space`)."""
        a = self.attr
        if a.kind is not FileKind.FILE:
            return 0
        return a.size if self.inline else a.size * a.replication

    @property
    def name(self) -> str:
        """The last name of the path ("" for the root)."""
        return self.path.rpartition("/")[2]


@dataclass(frozen=True, slots=True)
class FsStat:
    """Namespace counts and cluster space."""

    files: int
    directories: int
    symlinks: int
    capacity_bytes: int
    used_bytes: int
    live_datanodes: int
    blocksize: int
    held_bytes: int = 0  # released but still readable with live tickets; part of used
    # File blocks (each once, whatever its replication) with fewer live replicas than
    # requested, with no live replica, and with a corrupt replica.
    under_replicated_blocks: int = 0
    missing_blocks: int = 0
    corrupt_blocks: int = 0


@dataclass(frozen=True, slots=True)
class Replica:
    """One copy of a file range: blocks [block_start, block_start + count) of a datanode,
    with the ticket that lets the client read or write them."""

    datanode_id: int
    address: str
    block_start: int
    ticket: bytes  # a serialized datanode Ticket
    host: str = ""
    local_socket: str = ""
    state: ReplicaState = ReplicaState.LIVE
    plaintext: bool = False  # the datanode serves its data port without TLS


@dataclass(frozen=True, slots=True)
class Extent:
    """File blocks [file_index, file_index + block_count) and their replicas."""

    file_index: int
    block_count: int
    replicas: tuple[Replica, ...]

    @property
    def file_end(self) -> int:
        """One past the last file block."""
        return self.file_index + self.block_count

    @property
    def live_replicas(self) -> int:
        """How many replicas count in the actual replication."""
        return sum(1 for r in self.replicas if r.state is ReplicaState.LIVE)


@dataclass(frozen=True, slots=True)
class BlockList:
    """A file's extents (or some of them) with its size, blocksize and replication."""

    extents: tuple[Extent, ...]
    blocksize: int
    size: int
    replication: int
    # A small file's content kept by the namenode (then there are no extents): its
    # first bytes, the rest up to size reading as zeros. None: the content is in blocks.
    inline: bytes | None = None
    attr: Attr | None = None  # the file's attributes (None from an older namenode)
    locked_elsewhere: bool = False  # another session holds a file lock on it

    @classmethod
    def from_wire(cls, b: pb.BlockList) -> BlockList:
        """Build from the wire message."""
        return cls(
            tuple(
                Extent(
                    e.file_index,
                    e.block_count,
                    tuple(
                        Replica(
                            r.datanode_id,
                            r.address,
                            r.block_start,
                            r.ticket.SerializeToString(),
                            r.host,
                            r.local_socket,
                            ReplicaState(r.state),
                            r.plaintext,
                        )
                        for r in e.replicas
                    ),
                )
                for e in b.extents
            ),
            b.blocksize,
            b.size,
            b.replication,
            b.inline if b.HasField("inline") else None,
            Attr.from_wire(b.attr) if b.HasField("attr") else None,
            b.locked_elsewhere,
        )
