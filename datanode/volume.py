"""One preallocated volume: block i at offset i * blocksize of `volume.data`, its crc32c
at offset 4 * i of `volume.crc`, its owner stamp at offset 24 * i of `volume.stamp`,
and the volume's identity in `volume.json`.

Every block is written whole (a short last block is padded with zeros) together with
its checksum, and every read verifies the checksum of each block it touches: a
mismatch raises CorruptionError and no byte of that block is returned.

A block's owner (file, generation, file block index: `Owner`, from the ticket) is
part of its checksum: the crc32c runs over the owner's stamp, then the data. A read
names the owner it expects, so a block since written for another file or version
fails its checksum like a damaged one, with no extra I/O. The stamp is also kept on
its own (written before the data) for the scrub, which has no ticket, and for the
error message. Blocks without an owner (written before stamps, or by the datanode's
tests) have a checksum of the data alone.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import struct
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import crc32c

from plasmafs.core.errors import ConfigError, CorruptionError, InvalidArgumentError
from plasmafs.datanode.recently_read import RecentBlocks

log = logging.getLogger(__name__)

META = "volume.json"
DATA = "volume.data"
CRC = "volume.crc"
STAMP = "volume.stamp"
_CRC = struct.Struct("<I")
_STAMP = struct.Struct("<QQQ")  # inode, generation, file block index
Owner = tuple[int, int, int]  # (inode, generation, file block index of the first block)
READ_PIECE = 256 * 1024  # bytes read and checksummed at a time by read_into (fits in L2)
READ_AHEAD = 8 * 1024 * 1024  # bytes a streamed read asks the kernel for ahead of itself
DIRECT_BUFFER = 4 * 1024 * 1024  # a thread's aligned buffer for direct writes


@dataclass(frozen=True)
class VolumeInfo:
    """The persistent identity of a volume."""

    identity: str
    blocksize: int
    capacity_blocks: int


class Volume:
    """Block-granular access to one volume directory.

    Writes go through the page cache, or with `direct` straight to the device (O_DIRECT,
    from a page-aligned buffer per thread): no page-cache copy and no dirty-page
    throttling, at the price of the first read of those blocks coming from the device.
    With `direct`, a local client's reads into its shared segment go around the page
    cache too, unless the blocks were read recently (`RecentBlocks`): a block read once
    is copied once, from the device into the segment, and a host reading many files
    does not keep each in two caches (the mount's and this one); a block read again
    comes through the page cache, which serves the reads after it. Writes asked to go
    around the cache (re-replication copies, which this datanode is not expected to
    serve soon) do so whatever the policy, where the file system allows.
    `direct_required=False` falls back to the page cache where the file system refuses
    O_DIRECT (ramfs; tmpfs before Linux 6.6), with a warning.
    """

    def __init__(
        self,
        directory: Path,
        info: VolumeInfo,
        sync: bool,
        direct: bool,
        direct_required: bool = True,
    ) -> None:
        self.directory = directory
        self.info = info
        self.sync = sync
        self._data = os.open(directory / DATA, os.O_RDWR)
        self._crc = os.open(directory / CRC, os.O_RDWR)
        # Volumes made before stamps get theirs here: all zero (no owner), sparse.
        self._stamp = os.open(directory / STAMP, os.O_RDWR | os.O_CREAT, 0o600)
        if os.fstat(self._stamp).st_size < info.capacity_blocks * _STAMP.size:
            os.ftruncate(self._stamp, info.capacity_blocks * _STAMP.size)
        # The volume is one file holding every block: the kernel's own read-ahead,
        # which guesses from sequential reads (up to read_ahead_kb, often 8 MiB), would
        # read past a range into other files' blocks or never-written space. Reads say
        # exactly which blocks they want instead (will_read); mount_bench's readers
        # rows (BENCHMARKS.md) are what it was measured on.
        os.posix_fadvise(self._data, 0, 0, os.POSIX_FADV_RANDOM)
        self._direct: int | None = None
        self._direct_reads: int | None = None
        if direct:
            try:
                self._direct = os.open(directory / DATA, os.O_WRONLY | os.O_DIRECT)
                self._direct_reads = os.open(directory / DATA, os.O_RDONLY | os.O_DIRECT)
            except OSError as exc:
                if direct_required:
                    self.close()
                    raise ConfigError(
                        f"the file system of {directory} refuses direct I/O ({exc.strerror}): "
                        "use sync = fdatasync"
                    ) from exc
                log.warning(
                    "the file system of %s refuses direct I/O (%s): writing through the page cache",
                    directory,
                    exc.strerror,
                )
                self._close_direct()
        self._bounce = threading.local()
        self._opening = threading.Lock()
        self._direct_refused = False
        # Only a volume that reads around the page cache asks which blocks are hot.
        self._recent = (
            RecentBlocks.for_host(info.blocksize) if self._direct_reads is not None else None
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        blocksize: int,
        capacity: int,
        sync: bool = True,
        direct: bool = False,
        direct_required: bool = True,
    ) -> Volume:
        """Open the volume in `directory`, creating it (preallocated) if it does not exist.

        An existing volume keeps its identity and data; one made with another
        blocksize or capacity is refused rather than silently reinterpreted.
        """
        directory.mkdir(parents=True, exist_ok=True)
        meta = directory / META
        capacity_blocks = capacity // blocksize
        if capacity_blocks < 1:
            raise ConfigError(f"capacity {capacity} is smaller than one block of {blocksize}")
        if meta.exists():
            # Volumes made before the identity was private: it is the datanode's name.
            meta.chmod(0o600)
            try:
                info = VolumeInfo(**json.loads(meta.read_text()))
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{meta} is damaged: {exc}") from exc
            if info.blocksize != blocksize:
                raise ConfigError(
                    f"volume {directory} has blocksize {info.blocksize}, not {blocksize}"
                )
            if info.capacity_blocks != capacity_blocks:
                raise ConfigError(
                    f"volume {directory} has {info.capacity_blocks} blocks, "
                    f"the settings ask for {capacity_blocks}"
                )
            return cls(directory, info, sync, direct, direct_required)
        info = VolumeInfo(str(uuid.uuid4()), blocksize, capacity_blocks)
        for name, size in ((DATA, capacity_blocks * blocksize), (CRC, capacity_blocks * 4)):
            fd = os.open(directory / name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
                os.fsync(fd)
            except OSError as exc:
                os.close(fd)
                for leftover in (DATA, CRC):
                    (directory / leftover).unlink(missing_ok=True)
                raise ConfigError(
                    f"cannot preallocate {size} bytes for {directory / name}: {exc.strerror}"
                ) from exc
            os.close(fd)
        tmp = meta.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(info.__dict__) + "\n")
        os.replace(tmp, meta)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return cls(directory, info, sync, direct, direct_required)

    def close(self) -> None:
        """Close the files."""
        os.close(self._data)
        os.close(self._crc)
        os.close(self._stamp)
        self._close_direct()

    def _close_direct(self) -> None:
        for fd in (self._direct, self._direct_reads):
            if fd is not None:
                os.close(fd)
        self._direct = self._direct_reads = None

    def check_range(self, block_start: int, block_count: int) -> None:
        """Raise unless the range lies inside the volume."""
        if block_count < 1 or block_start + block_count > self.info.capacity_blocks:
            raise InvalidArgumentError(
                f"blocks {block_start}+{block_count} outside a volume of "
                f"{self.info.capacity_blocks} blocks"
            )

    def will_read(self, block_start: int, block_count: int) -> None:
        """Have the kernel start reading these blocks from disk (the read-ahead of a
        range, which the volume's file does not get by itself)."""
        bs = self.info.blocksize
        os.posix_fadvise(self._data, block_start * bs, block_count * bs, os.POSIX_FADV_WILLNEED)

    def read_blocks(self, block_start: int, block_count: int, owner: Owner | None = None) -> bytes:
        """Whole blocks, each verified against its checksum and `owner` (through the page
        cache, as `read_into`)."""
        self._note_cached_read(block_start, block_count)
        bs = self.info.blocksize
        data = os.pread(self._data, block_count * bs, block_start * bs)
        crcs = os.pread(self._crc, block_count * 4, block_start * 4)
        seeds = _seeds(_stamps(owner, block_count))
        view = memoryview(data)
        for i in range(block_count):
            crc = crc32c.crc32c(view[i * bs : (i + 1) * bs], seeds[i])
            self._check_block(block_start, i, crc, crcs, owner)
        return data

    def read_local(
        self,
        block_start: int,
        block_count: int,
        segment: memoryview,
        owner: Owner | None = None,
    ) -> bool:
        """Whole blocks into a local client's page-aligned `segment`, verified as by
        `read_into`: around the page cache (direct volumes) unless the blocks were read
        recently, else through it, read ahead as one range. True if around the cache."""
        recent, direct = self._recent, self._direct_reads
        if (
            recent is not None
            and direct is not None
            and not recent.read_again(block_start, block_count)
        ):
            self._read_verified_at_once(direct, block_start, block_count, segment, owner)
            return True
        self.will_read(block_start, block_count)
        self._read_verified(self._data, block_start, block_count, segment, owner)
        return False

    def read_into(
        self, block_start: int, block_count: int, buffer: memoryview, owner: Owner | None = None
    ) -> None:
        """Whole blocks into `buffer`, each verified against its checksum and `owner`,
        through the page cache (they count as read recently: a local read of them then
        finds them there)."""
        self._note_cached_read(block_start, block_count)
        self._read_verified(self._data, block_start, block_count, buffer, owner)

    def _note_cached_read(self, block_start: int, block_count: int) -> None:
        if self._recent is not None:
            self._recent.read_again(block_start, block_count)

    def _read_verified(
        self, fd: int, block_start: int, block_count: int, buffer: memoryview, owner: Owner | None
    ) -> None:
        crcs = self._crcs_for(block_start, block_count, buffer)
        seeds = _seeds(_stamps(owner, block_count))
        bs = self.info.blocksize
        # A piece is checked right after it is read, while it is still in the CPU cache:
        # one pass over memory instead of two.
        piece = min(bs, READ_PIECE)
        for i in range(block_count):
            crc = seeds[i]
            for at in range(i * bs, (i + 1) * bs, piece):
                got = os.preadv(fd, [buffer[at : at + piece]], block_start * bs + at)
                if got != piece:
                    raise CorruptionError(f"short read of block {block_start + i}")
                crc = crc32c.crc32c(buffer[at : at + piece], crc)
            self._check_block(block_start, i, crc, crcs, owner)

    def _read_verified_at_once(
        self, fd: int, block_start: int, block_count: int, buffer: memoryview, owner: Owner | None
    ) -> None:
        """`_read_verified` around the page cache, where nothing reads ahead: the range
        is one request to the disk (not one wait for the disk per piece), then checked."""
        crcs = self._crcs_for(block_start, block_count, buffer)
        seeds = _seeds(_stamps(owner, block_count))
        bs = self.info.blocksize
        done = 0
        while done < len(buffer):
            got = os.preadv(fd, [buffer[done:]], block_start * bs + done)
            if got <= 0:
                raise CorruptionError(f"short read of block {block_start + done // bs}")
            done += got
        for i in range(block_count):
            crc = crc32c.crc32c(buffer[i * bs : (i + 1) * bs], seeds[i])
            self._check_block(block_start, i, crc, crcs, owner)

    def _crcs_for(self, block_start: int, block_count: int, buffer: memoryview) -> bytes:
        """The stored checksums of the blocks `buffer` is to hold (it must fit them)."""
        if len(buffer) != block_count * self.info.blocksize:
            raise ValueError(f"a buffer of {len(buffer)} bytes for {block_count} blocks")
        return os.pread(self._crc, block_count * 4, block_start * 4)

    def _check_block(
        self, block_start: int, i: int, crc: int, crcs: bytes, owner: Owner | None
    ) -> None:
        if crc == _CRC.unpack_from(crcs, i * 4)[0]:
            return
        block = block_start + i
        where = f"block {block} of volume {self.info.identity}"
        stamp = self.stamp_of(block)
        if owner is not None and owner[1] and stamp[1] and stamp != owner_at(owner, i):
            raise CorruptionError(
                f"{where} holds block {stamp[2]} of inode {stamp[0]} (generation "
                f"{stamp[1]}), not block {owner[2] + i} of inode {owner[0]} (generation "
                f"{owner[1]}): it was reused since"
            )
        raise CorruptionError(f"{where} fails its checksum")

    def stamp_of(self, block: int) -> Owner:
        """The owner stamp kept for `block` ((0, 0, 0): none)."""
        raw = os.pread(self._stamp, _STAMP.size, block * _STAMP.size)
        return _STAMP.unpack(raw) if len(raw) == _STAMP.size else (0, 0, 0)

    def foreign_blocks(self, ranges: list[tuple[int, int, Owner]]) -> list[tuple[int, Owner]]:
        """The blocks of `ranges` (start, count, owner of the first block) whose stamp is
        not the one their owner gives them — written since for another file or version —
        each with the owner expected of it. Only stamps are read; an owner without a
        generation (a block written before stamps) matches any."""
        size = _STAMP.size
        foreign = []
        for start, count, owner in ranges:
            if not owner[1]:
                continue
            try:
                stamps = os.pread(self._stamp, count * size, start * size)
            except OSError:  # a stamp that cannot be read proves nothing: the data pass reads
                continue
            expected = _stamps(owner, count)
            for i in range(len(stamps) // size):
                if stamps[i * size : (i + 1) * size] != expected[i * size : (i + 1) * size]:
                    foreign.append((start + i, owner_at(owner, i)))
        return foreign

    def verify_blocks(self, block_start: int, block_count: int) -> list[int]:
        """The blocks of [block_start, +block_count) that fail their checksum (or cannot
        be read whole), read READ_PIECE bytes at a time into one reused buffer."""
        bs = self.info.blocksize
        piece = min(bs, READ_PIECE)
        buffer = memoryview(bytearray(piece))
        try:
            crcs = os.pread(self._crc, block_count * 4, block_start * 4)
            stamps = os.pread(self._stamp, block_count * _STAMP.size, block_start * _STAMP.size)
        except OSError:  # a checksum that cannot be read verifies nothing
            crcs = stamps = b""
        bad = []
        ahead = ReadAhead(self, block_start, block_start + block_count - 1)
        for i in range(block_count):
            ahead.before(block_start + i)
            if len(crcs) < (i + 1) * 4 or not self._block_matches(
                block_start + i, _CRC.unpack_from(crcs, i * 4)[0], buffer, _seed(stamps, i)
            ):
                bad.append(block_start + i)
        return bad

    def _block_matches(self, block: int, stored: int, buffer: memoryview, seed: int) -> bool:
        base = block * self.info.blocksize
        crc = seed
        try:
            for at in range(0, self.info.blocksize, len(buffer)):
                if os.preadv(self._data, [buffer], base + at) != len(buffer):
                    return False
                crc = crc32c.crc32c(buffer, crc)
        except OSError:  # the disk cannot read it back (EIO): as bad as a wrong checksum
            return False
        return crc == stored

    def write_blocks(
        self,
        block_start: int,
        data: bytes | bytearray | memoryview,
        *,
        around_cache: bool = False,
        changing: bool = False,
        owner: Owner | None = None,
    ) -> None:
        """Write whole blocks (a short tail is padded with zeros) of `owner`, their
        stamps and their checksums; `around_cache` writes them with O_DIRECT where the
        file system allows it. `changing` data (a client's shared memory) may change
        meanwhile: each block is copied once, and the copy is what is checksummed and
        written."""
        bs = self.info.blocksize
        count = (len(data) + bs - 1) // bs
        if len(data) % bs:
            data = bytes(data) + bytes(count * bs - len(data))
            changing = False  # a copy already
        # The stamps first: a block overwritten but not yet stamped would pass as the
        # old owner's in the scrub.
        stamps = _stamps(owner, count)
        _pwrite_all(self._stamp, memoryview(stamps), block_start * _STAMP.size)
        seeds = _seeds(stamps)
        view = memoryview(data)
        if self._direct is None and not (around_cache and self._open_direct()):
            if changing:
                view = memoryview(bytes(view))
            crcs = _checksums(view, bs, seeds)
            _pwrite_all(self._data, view, block_start * bs)
        else:
            crcs = self._write_direct(view, block_start * bs, seeds)
        _pwrite_all(self._crc, memoryview(crcs), block_start * 4)

    def _open_direct(self) -> bool:
        """The O_DIRECT descriptor, opened on first use (False where refused)."""
        if self._direct is not None:
            return True
        with self._opening:
            if self._direct is None and not self._direct_refused:
                try:
                    self._direct = os.open(self.directory / DATA, os.O_WRONLY | os.O_DIRECT)
                except OSError:
                    self._direct_refused = True  # e.g. tmpfs: through the page cache
        return self._direct is not None

    def _write_direct(self, view: memoryview, offset: int, seeds: list[int]) -> bytes:
        """Write whole blocks with O_DIRECT; their checksums, taken from the copy written."""
        # O_DIRECT wants an aligned buffer: whole blocks are copied through this thread's
        # page-aligned one (offsets and lengths are whole blocks, so aligned already).
        assert self._direct is not None
        bs = self.info.blocksize
        bounce: mmap.mmap | None = getattr(self._bounce, "buffer", None)
        if bounce is None:
            bounce = self._bounce.buffer = mmap.mmap(-1, max(DIRECT_BUFFER, bs))
        step = len(bounce) - len(bounce) % bs
        crcs = []
        with memoryview(bounce) as aligned:
            for at in range(0, len(view), step):
                piece = view[at : at + step]
                aligned[: len(piece)] = piece
                first = at // bs
                crcs.append(_checksums(aligned[: len(piece)], bs, seeds[first:]))
                _pwrite_all(self._direct, aligned[: len(piece)], offset + at)
        return b"".join(crcs)

    def flush(self) -> None:
        """Make written blocks durable (fdatasync), unless the sync policy is 'none'."""
        if self.sync:
            os.fdatasync(self._stamp)
            os.fdatasync(self._data)  # the file's, whichever descriptor (direct or not) wrote
            os.fdatasync(self._crc)


class ReadAhead:
    """Asks the kernel for the blocks of [first, last] (inclusive) a window ahead of a
    reader going through them in order: READ_AHEAD bytes, at least `at_least` blocks,
    asked again whenever less than half a window is left ahead."""

    def __init__(self, volume: Volume, first: int, last: int, at_least: int = 1) -> None:
        self._volume = volume
        self._last = last
        self._window = max(at_least, READ_AHEAD // volume.info.blocksize)
        self._asked = first  # blocks before this one were asked for

    def before(self, block: int) -> None:
        """Call before reading from `block` on."""
        if self._asked <= block + self._window // 2 and self._asked <= self._last:
            count = min(self._window, self._last + 1 - self._asked)
            self._volume.will_read(self._asked, count)
            self._asked += count


def whole_blocks(
    pending: bytearray, data: bytes | bytearray | memoryview, blocksize: int
) -> bytes | bytearray | memoryview:
    """The whole blocks that `pending` followed by `data` make, leaving the partial tail
    in `pending` (for writing a stream of chunks block by block). `data` itself comes
    back, with no copy, when nothing is pending and it is whole blocks."""
    if not pending and len(data) % blocksize == 0:
        return data
    pending += data
    cut = len(pending) - len(pending) % blocksize
    whole = bytes(pending[:cut])
    del pending[:cut]
    return whole


def _checksums(view: memoryview, blocksize: int, seeds: list[int]) -> bytes:
    """The crc32c of each whole block of `view` after its seed, packed as stored."""
    return b"".join(
        _CRC.pack(crc32c.crc32c(view[at : at + blocksize], seeds[at // blocksize]))
        for at in range(0, len(view), blocksize)
    )


def owner_at(owner: Owner | None, k: int) -> Owner:
    """The stamp of the k-th block of a range whose first block is `owner`'s."""
    if owner is None or not owner[1]:
        return (0, 0, 0)
    return (owner[0], owner[1], owner[2] + k)


def _stamps(owner: Owner | None, count: int) -> bytes:
    """The stamps of `count` blocks from `owner`'s first, packed as stored."""
    return b"".join(_STAMP.pack(*owner_at(owner, k)) for k in range(count))


def _seeds(stamps: bytes) -> list[int]:
    """What the checksum of each block starts from, by its stamp among `stamps`."""
    return [_seed(stamps, i) for i in range(len(stamps) // _STAMP.size)]


def _seed(stamps: bytes, i: int) -> int:
    """What the checksum of the block of the i-th of `stamps` starts from: the crc32c of
    its stamp (0, the checksum of the data alone, for a block without an owner or a
    stamp missing)."""
    if len(stamps) < (i + 1) * _STAMP.size:
        return 0
    stamp = _STAMP.unpack_from(stamps, i * _STAMP.size)
    return crc32c.crc32c(stamps[i * _STAMP.size : (i + 1) * _STAMP.size]) if stamp[1] else 0


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data = data[written:]
        offset += written
