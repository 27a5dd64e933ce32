"""Reading a file straight from its datanodes.

A reader fetches the file's block list once; from then on reads go to datanodes
only, failing over to another replica when one is unreachable or returns corrupt
data. The blocks of the version it opened stay readable while its tickets live, even
if the file is overwritten meanwhile: a reader sees the old or the new content,
never a mix. Before its tickets expire it fetches new ones for the same blocks, as
long as the file is unchanged; once a changed file's old tickets expire, the reader
raises StaleFileError instead of reading blocks that may hold other data by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import os
import random
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from types import TracebackType

from plasmafs.client.datapath import DataChannels, read_range
from plasmafs.client.file_object import FileObject, check_regular
from plasmafs.client.transaction import CommittedReads
from plasmafs.core.attributes import Attr, BlockList, Extent, Replica, ReplicaState
from plasmafs.core.errors import (
    CorruptionError,
    InvalidArgumentError,
    PermissionDeniedError,
    PlasmaError,
    StaleFileError,
    UnavailableError,
)
from plasmafs.core.proto import datanode_pb2 as dpb

# A reader fetches new tickets this long before its tickets expire (at most a quarter of
# their lifetime), so that no read starts with a ticket about to lapse.
RENEW_MARGIN = 60.0


class FileReader(FileObject):
    """An open file being read (binary; random access)."""

    _capabilities = frozenset({"read", "seek"})

    def __init__(self, reads: CommittedReads, channels: DataChannels, path: str | int) -> None:
        self._reads = reads
        self._channels = channels
        self.path = path
        self.attr: Attr | None = None
        self.blocks: BlockList | None = None
        self._position = 0
        self._turn = random.randrange(1 << 30)  # readers of one file start apart
        self._renew_at = float("inf")  # when to fetch new tickets (time.time())
        self._renewing = asyncio.Lock()
        self._reports: set[asyncio.Future[None]] = set()
        self.closed = False

    async def open(self) -> FileReader:
        """Fetch the attributes and the whole block list (the only namenode requests while
        the tickets live); by inode number, one request (the block list carries them)."""
        if isinstance(self.path, int):
            blocks = await self._reads.blocks(self.path)
            attr = blocks.attr or await self._reads.getattr(self.path)
            check_regular(attr, self.path)
        else:
            attr = check_regular(await self._reads.stat(self.path), self.path)
            blocks = await self._reads.blocks(attr.ino)
        self._take(blocks)
        self.attr = attr
        return self

    def opened_with(self, blocks: BlockList) -> FileReader:
        """Open on a block list fetched before (with its attributes): no request."""
        assert blocks.attr is not None
        self._take(blocks)
        self.attr = check_regular(blocks.attr, self.path)
        return self

    def _take(self, blocks: BlockList) -> None:
        self.blocks = blocks
        expiries = [
            dpb.Ticket.FromString(r.ticket).expires_unix_ms / 1000
            for e in blocks.extents
            for r in e.replicas
        ]
        if expiries:
            now = time.time()
            expires = min(expiries)
            self._renew_at = expires - min(RENEW_MARGIN, (expires - now) / 4)

    async def _renew_tickets(self) -> None:
        """New tickets for the same blocks once the old ones are about to expire, as long
        as the file has not changed since it was opened (its version is the same);
        otherwise the version being read may be gone, and StaleFileError says so."""
        if time.time() < self._renew_at:
            return
        async with self._renewing:
            if time.time() < self._renew_at:
                return  # another read renewed them meanwhile
            assert self.attr is not None and self.blocks is not None
            # Blocks first, then the version: an unchanged version afterwards means no
            # commit touched the file before the blocks were read either.
            blocks = await self._reads.blocks(self.attr.ino)
            attr = await self._reads.getattr(self.attr.ino)
            if attr.version != self.attr.version or len(blocks.extents) != len(self.blocks.extents):
                raise StaleFileError(
                    f"{self.path} changed after it was opened and its tickets expired: "
                    "open it again to read the new version"
                )
            self._take(blocks)

    async def current_blocks(self) -> BlockList:
        """The block list of the version opened, with read tickets that live a while yet
        (renewed first when they are about to expire)."""
        self._check_open()
        await self._renew_tickets()
        assert self.blocks is not None
        return self.blocks

    @property
    def size(self) -> int:
        """The size of the version that was opened."""
        assert self.blocks is not None
        return self.blocks.size

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move the position, as io.RawIOBase.seek does; returns the new position."""
        self._check_open()
        offset = operator.index(offset)
        whence = operator.index(whence)
        if whence == os.SEEK_SET:
            base = 0
        elif whence == os.SEEK_CUR:
            base = self._position
        elif whence == os.SEEK_END:
            base = self.size
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        """The current position."""
        self._check_open()
        return self._position

    async def read(self, n: int | None = -1) -> bytes:
        """Up to `n` bytes from the position (all the rest with n < 0 or None)."""
        self._check_open()
        n = -1 if n is None else operator.index(n)
        end = self.size if n < 0 else min(self.size, self._position + n)
        data = await self.pread(self._position, max(end - self._position, 0))
        self._position += len(data)
        return data

    async def readinto(self, buffer: bytearray | memoryview) -> int:
        """Fill `buffer` from the position; returns the number of bytes read."""
        self._check_open()
        data = await self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)

    async def pread(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset+length) of the file, fewer at its end (holes read as
        zeros); the position does not move."""
        pieces: list[bytes] = []
        async for piece in self.stream(offset, length):
            pieces.append(bytes(piece))  # a piece is only valid until the next one comes
        # One piece (a read within one datanode request) is copied once, not twice.
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def stream(
        self, offset: int = 0, length: int | None = None
    ) -> AsyncGenerator[bytes | memoryview, None]:
        """The file's bytes from `offset`, as the datanodes send them."""
        self._check_open()
        offset = operator.index(offset)
        if offset < 0:
            raise InvalidArgumentError(f"negative offset {offset}")
        assert self.blocks is not None
        bs = self.blocks.blocksize
        end = self.size if length is None else min(self.size, offset + max(length, 0))
        position = offset
        inline = self.blocks.inline
        if inline is not None and position < min(end, len(inline)):  # kept by the namenode
            yield inline[position:end]
            position = min(end, len(inline))
        for index, extent in enumerate(self.blocks.extents):
            if position >= end:
                break
            ext_lo, ext_hi = extent.file_index * bs, extent.file_end * bs
            if ext_hi <= position:
                continue
            if ext_lo > position:  # a hole
                gap = min(ext_lo, end) - position
                yield bytes(gap)
                position += gap
                if position >= end:
                    break
            stop = min(ext_hi, end)
            renewed_in_vain = False
            while position < stop:
                await self._renew_tickets()
                renewed = self.blocks.extents[index]  # the same blocks, maybe new tickets
                pieces = self._extent_bytes(renewed, position - ext_lo, stop - position)
                before = position
                try:
                    async with contextlib.aclosing(pieces):
                        async for piece in pieces:
                            yield piece
                            position += len(piece)
                except PermissionDeniedError:
                    # Tickets that lapsed while this extent streamed (a slow consumer) are
                    # renewed and the read goes on; a refusal of fresh tickets, or of
                    # renewed ones with no progress since (clocks apart), is final.
                    if time.time() < self._renew_at or (renewed_in_vain and position == before):
                        raise
                    renewed_in_vain = position == before
        if position < end:
            yield bytes(end - position)

    async def _extent_bytes(
        self, extent: Extent, offset: int, length: int
    ) -> AsyncGenerator[bytes | memoryview, None]:
        assert self.blocks is not None
        bs = self.blocks.blocksize
        local = self._channels.local
        self._turn += 1
        order = read_order(extent.replicas, local.usable, self._turn)
        errors: list[PlasmaError] = []
        done = 0
        for replica in order:
            # Shared memory first when the datanode is on this host, then its gRPC
            # service; a replica that answers with an error gives way to the next one.
            for via_local in (True, False) if local.usable(replica) else (False,):
                first = (offset + done) // bs
                count = (offset + length - 1) // bs - first + 1
                skip = offset + done - first * bs
                pieces = (
                    local.read_range(replica, bs, first, count, skip, length - done)
                    if via_local
                    else read_range(self._channels, replica, first, count, skip, length - done)
                )
                try:
                    # aclosing: a caller that stops early ends the range's reads now, not
                    # whenever the generator is collected.
                    async with contextlib.aclosing(pieces):
                        async for piece in pieces:
                            done += len(piece)
                            yield piece
                    return
                except UnavailableError as exc:
                    errors.append(exc)  # the other path of this replica, then the next one
                except CorruptionError as exc:
                    errors.append(exc)
                    self._report_corrupt(replica, first, count, str(exc))
                    break
                except PlasmaError as exc:
                    errors.append(exc)
                    break
        if (
            errors
            and all(type(e) is type(errors[0]) for e in errors)
            and not isinstance(errors[0], UnavailableError)
        ):
            raise type(errors[0])("; ".join(str(e) for e in errors))
        raise UnavailableError("no replica answered: " + "; ".join(str(e) for e in errors))

    def _report_corrupt(self, replica: Replica, first: int, count: int, reason: str) -> None:
        """Tell the namenode in the background; the read goes on from another replica."""
        report = self._reads.report_corrupt(
            replica.datanode_id, replica.block_start + first, count, reason
        )
        task = asyncio.ensure_future(report)
        self._reports.add(task)
        task.add_done_callback(self._report_done)

    def _report_done(self, task: asyncio.Future[None]) -> None:
        self._reports.discard(task)
        if not task.cancelled():
            task.exception()  # a report that did not reach the namenode is only a hint

    async def close(self) -> None:
        """Nothing to release but the object."""
        self.closed = True

    async def __aenter__(self) -> FileReader:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def read_order(
    replicas: Sequence[Replica], near: Callable[[Replica], bool], turn: int
) -> list[Replica]:
    """The order to try an extent's replicas in: live ones on this host first (read
    through shared memory), then the other live ones, each group rotated by `turn`
    (a reader rotates per extent, and readers start at random, so that the readers of
    one file spread over its replicas); replicas not live last (a datanode that missed
    its heartbeats may still answer)."""
    live = [r for r in replicas if r.state is ReplicaState.LIVE]
    on_this_host = [near(r) for r in live]  # a look at the file system each
    here = [r for r, n in zip(live, on_this_host, strict=True) if n]
    away = [r for r, n in zip(live, on_this_host, strict=True) if not n]
    rest = [r for r in replicas if r.state is not ReplicaState.LIVE]
    return _rotated(here, turn) + _rotated(away, turn) + rest


def _rotated(items: list[Replica], turn: int) -> list[Replica]:
    if not items:
        return items
    start = turn % len(items)
    return items[start:] + items[:start]
