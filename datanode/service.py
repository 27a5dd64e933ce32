"""The datanode's gRPC face: ticket-checked range reads and writes on its volume.

Reads stream the range in large messages, verifying every block's checksum. Writes
take a stream of bytes for one block range and answer only once the data is durable
(fdatasync, unless the volume's sync policy says otherwise). A copy fills a range
from another datanode's (or this one's) range, for a client's server-side copy of a
file: the data never passes through the client. Disk work runs on the
executor the servicer is given (a fixed number of threads) so the event loop keeps
serving other calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Executor
from typing import Any

import grpc

from plasmafs.core import data_framing as dataframes
from plasmafs.core import tickets
from plasmafs.core.data_framing import SERVICE
from plasmafs.core.errors import (
    InvalidArgumentError,
    PlasmaError,
    StorageError,
    UnavailableError,
)
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.rpc_status import abort_with
from plasmafs.datanode.copier import Copier, Source
from plasmafs.datanode.inflight import InflightWrites, in_thread, run_to_end, settle
from plasmafs.datanode.peers import Peers
from plasmafs.datanode.registration import Registration, authorize, authorize_peer_read
from plasmafs.datanode.volume import ReadAhead, Volume, whole_blocks

log = logging.getLogger(__name__)

READ_CHUNK_BLOCKS = 4  # messages of up to 4 blocks: fewer per-message costs, bounded memory


class DatanodeServicer:
    """Serves one volume; its disk work runs on `io`, its writes are registered in
    `inflight` while they run, and `copier` pulls the ranges of clients' copies."""

    def __init__(
        self,
        volume: Volume,
        registration: Registration,
        io: Executor,
        inflight: InflightWrites,
        copier: Copier,
        peers: Peers,
    ) -> None:
        self.volume = volume
        self.registration = registration
        self.io = io
        self.inflight = inflight
        self.copier = copier
        self.peers = peers
        self.bytes_read = 0
        self.bytes_written = 0

    def _check(self, ticket: dpb.Ticket, start: int, count: int, write: bool) -> None:
        authorize(self.registration, self.volume, ticket, start, count, write=write)

    async def ReadBlocks(
        self, request: dpb.ReadRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        """Stream bytes of a block range, as serialized ReadChunk messages."""
        try:
            self._check(request.ticket, request.block_start, request.block_count, write=False)
            bs = self.volume.info.blocksize
            total = request.block_count * bs
            if request.offset >= total or request.offset + request.length > total:
                raise InvalidArgumentError("offset/length outside the block range")
            length = request.length or total - request.offset
            pieces = _framed_pieces(
                self.volume, request.ticket, request.block_start, request.offset,
                request.offset + length,
            )  # fmt: skip
            loop = asyncio.get_running_loop()
            # A thread reads, checks and frames the next piece while this one is sent: the
            # event loop only hands finished messages to gRPC.
            ahead = loop.run_in_executor(self.io, next, pieces, None)
            try:
                while True:
                    piece = await ahead
                    if piece is None:
                        break
                    ahead = loop.run_in_executor(self.io, next, pieces, None)
                    framed, size = piece
                    self.bytes_read += size
                    yield framed
            finally:
                # A stream cancelled mid-way leaves one read running: let it finish quietly.
                ahead.add_done_callback(_ignore_outcome)
        except PlasmaError as exc:
            await abort_with(context, exc)
        except OSError as exc:
            log.exception("volume read failed")
            await abort_with(context, StorageError(f"volume read failed: {exc}"))

    async def WriteBlocks(
        self,
        request_iterator: AsyncIterator[dpb.WriteChunk | memoryview],
        context: grpc.aio.ServicerContext,
    ) -> dpb.WriteReply:
        """Fill a block range from a stream of bytes; answer when durable."""
        try:
            first = await anext(request_iterator, None)
            if not isinstance(first, dpb.WriteChunk):
                raise InvalidArgumentError("a write stream starts with its ticket and range")
            start, count = first.block_start, first.block_count
            self._check(first.ticket, start, count, write=True)
            # The scrub leaves the range alone until no thread writes it any more.
            with self.inflight.writing(start, count):
                written = await self._write(
                    request_iterator, first.ticket, start, count, first.data
                )
            self.bytes_written += written
            return dpb.WriteReply(bytes_written=written)
        except PlasmaError as exc:
            await abort_with(context, exc)
            raise AssertionError("unreachable") from None
        except OSError as exc:
            log.exception("volume write failed")
            await abort_with(context, StorageError(f"volume write failed: {exc}"))
            raise AssertionError("unreachable") from None

    async def _write(
        self,
        request_iterator: AsyncIterator[dpb.WriteChunk | memoryview],
        ticket: dpb.Ticket,
        start: int,
        count: int,
        first: bytes,
    ) -> int:
        bs = self.volume.info.blocksize
        volume = self.volume

        def write(block: int, data: bytes | bytearray | memoryview) -> None:
            volume.write_blocks(block, data, owner=tickets.owner_at(ticket, block))

        limit = count * bs
        written = 0
        pending = bytearray(first)
        # One disk write runs in a thread while the next data arrives; however this
        # ends, it ends only after that write (settle).
        disk: asyncio.Future[None] | None = None
        try:
            async for chunk in request_iterator:
                data = chunk.data if isinstance(chunk, dpb.WriteChunk) else chunk
                whole = whole_blocks(pending, data, bs)
                if not whole:
                    continue
                if written + len(whole) > limit:
                    raise InvalidArgumentError(f"more than {count} blocks of data")
                if disk is not None:
                    await asyncio.shield(disk)
                disk = in_thread(self.io, write, start + written // bs, whole)
                written += len(whole)
            if disk is not None:
                await asyncio.shield(disk)
            if written + len(pending) > limit:
                raise InvalidArgumentError(f"more than {count} blocks of data")
            if pending:
                await run_to_end(self.io, write, start + written // bs, pending)
                written += len(pending)
            await run_to_end(self.io, self.volume.flush)
            return written
        finally:
            await settle(disk)

    async def CopyBlocks(
        self, request: dpb.CopyRequest, context: grpc.aio.ServicerContext
    ) -> dpb.WriteReply:
        """Fill the write ticket's range from the source range; answer when durable."""
        try:
            self._check(request.ticket, request.block_start, request.block_count, write=True)
            peer = request.source_datanode_id
            authorize_peer_read(
                self.registration,
                request.source_ticket,
                peer,
                request.source_block_start,
                request.block_count,
            )
            address, plaintext = await self.peers.address(peer)
            source = Source(
                peer, address, plaintext, request.source_ticket, request.source_block_start
            )
            try:
                written = await self.copier.copy_for_client(request, source)
            except UnavailableError:
                self.peers.forget(peer)  # it may have registered elsewhere since
                raise
            return dpb.WriteReply(bytes_written=written)
        except PlasmaError as exc:
            await abort_with(context, exc)
            raise AssertionError("unreachable") from None
        except OSError as exc:
            log.exception("volume write failed")
            await abort_with(context, StorageError(f"volume write failed: {exc}"))
            raise AssertionError("unreachable") from None

    async def Info(
        self, request: dpb.InfoRequest, context: grpc.aio.ServicerContext
    ) -> dpb.InfoReply:
        """The volume's identity."""
        info = self.volume.info
        return dpb.InfoReply(
            identity=info.identity,
            datanode_id=self.registration.datanode_id,
            blocksize=info.blocksize,
            capacity_blocks=info.capacity_blocks,
        )


def add_to_server(servicer: DatanodeServicer, server: grpc.aio.Server) -> None:
    """Register the datanode service with the hand-framed data messages (dataframes.py)."""
    handlers = {
        "ReadBlocks": grpc.unary_stream_rpc_method_handler(
            servicer.ReadBlocks,
            request_deserializer=dpb.ReadRequest.FromString,
            response_serializer=dataframes.serialize_read_chunk,
        ),
        "WriteBlocks": grpc.stream_unary_rpc_method_handler(
            servicer.WriteBlocks,
            request_deserializer=dataframes.parse_write_chunk,
            response_serializer=dpb.WriteReply.SerializeToString,
        ),
        "CopyBlocks": grpc.unary_unary_rpc_method_handler(
            servicer.CopyBlocks,
            request_deserializer=dpb.CopyRequest.FromString,
            response_serializer=dpb.WriteReply.SerializeToString,
        ),
        "Info": grpc.unary_unary_rpc_method_handler(
            servicer.Info,
            request_deserializer=dpb.InfoRequest.FromString,
            response_serializer=dpb.InfoReply.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


def _framed_pieces(
    volume: Volume, ticket: dpb.Ticket, block_start: int, offset: int, end: int
) -> Iterator[tuple[bytes, int]]:
    """Bytes [offset, end) of the range starting at `block_start`, as serialized ReadChunk
    messages of up to READ_CHUNK_BLOCKS blocks, each with its data size. Whole blocks
    are read straight into their message; only a piece cut inside a block is copied."""
    bs = volume.info.blocksize
    block = block_start + offset // bs
    last = block_start + (end - 1) // bs  # inclusive
    ahead = ReadAhead(volume, block, last, at_least=READ_CHUNK_BLOCKS)
    while block <= last:
        ahead.before(block)
        n = min(READ_CHUNK_BLOCKS, last - block + 1)
        position = (block - block_start) * bs
        lo, hi = max(offset - position, 0), min(end - position, n * bs)
        owner = tickets.owner_at(ticket, block)
        if (lo, hi) == (0, n * bs):
            message, data = dataframes.new_read_chunk(n * bs)
            volume.read_into(block, n, data, owner)
        else:
            whole = volume.read_blocks(block, n, owner)
            message = dataframes.frame_read_chunk(memoryview(whole)[lo:hi])
        yield message, hi - lo
        block += n


def _ignore_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
