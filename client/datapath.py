"""Talking to datanodes: one channel per datanode address, range reads as streams, range
writes fed from a bounded queue so that no more than a few chunks are in memory; a
datanode on this host gets range writes through shared memory instead (localwrite.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

import grpc

from plasmafs.client.shm_read import LocalReads
from plasmafs.client.shm_write import LocalWrites
from plasmafs.core import channel_options as channels
from plasmafs.core import data_framing as dataframes
from plasmafs.core.attributes import Replica
from plasmafs.core.data_framing import DatanodeStub
from plasmafs.core.errors import PlasmaError, UnavailableError
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.rpc_status import ERRNO_METADATA_KEY, error_from_rpc
from plasmafs.core.tls import ChannelTLS, open_channel


class DataChannels:
    """gRPC channels to datanodes, opened on first use and kept, and the shared-memory
    connections to datanodes on this host (for reads, and for writes)."""

    def __init__(
        self,
        local_reads: bool | None = None,
        tls: ChannelTLS | None = None,
        local_writes: bool | None = None,
    ) -> None:
        self.tls = tls
        self._stubs: dict[tuple[str, bool], DatanodeStub] = {}
        self._channels: list[grpc.aio.Channel] = []
        self.local = LocalReads(local_reads)
        self.local_writes = LocalWrites(self.local, local_writes)

    def stub(self, replica: Replica) -> DatanodeStub:
        """The stub for a replica's datanode: over TLS unless the namenode says that
        datanode serves its data in plaintext (tickets still authorize every call)."""
        key = (replica.address, replica.plaintext)
        stub = self._stubs.get(key)
        if stub is None:
            tls = None if replica.plaintext else self.tls
            channel = open_channel(replica.address, channels.DATA_CHANNEL, tls)
            self._channels.append(channel)
            stub = self._stubs[key] = DatanodeStub(channel)
        return stub

    async def close(self) -> None:
        """Close every channel."""
        self.local.close()
        for channel in self._channels:
            await channel.close()
        self._channels.clear()
        self._stubs.clear()


def _ticket(replica: Replica) -> dpb.Ticket:
    return dpb.Ticket.FromString(replica.ticket)


def data_error(exc: grpc.RpcError, replica: Replica) -> PlasmaError:
    """A datanode failure as a plasmafs error naming the datanode."""
    where = f"datanode {replica.datanode_id} at {replica.address}"
    answered = any(key == ERRNO_METADATA_KEY for key, _ in exc.trailing_metadata() or ())
    if not answered:
        # No plasmafs error code: the call broke in transport (the datanode died or
        # vanished mid-stream; gRPC reports that as UNAVAILABLE, CANCELLED or INTERNAL).
        return UnavailableError(f"{where} unavailable: {exc.code()}: {exc.details()}")
    error = error_from_rpc(exc)
    return type(error)(f"{where}: {error}")


async def read_range(
    channels: DataChannels,
    replica: Replica,
    first_block: int,
    block_count: int,
    offset: int,
    length: int,
) -> AsyncGenerator[memoryview, None]:
    """Bytes [offset, offset+length) of `block_count` blocks starting `first_block` blocks
    into the replica's extent."""
    request = dpb.ReadRequest(
        ticket=_ticket(replica),
        block_start=replica.block_start + first_block,
        block_count=block_count,
        offset=offset,
        length=length,
    )
    call = channels.stub(replica).ReadBlocks(request)
    try:
        async for chunk in call:
            yield chunk
    except grpc.RpcError as exc:
        raise data_error(exc, replica) from exc
    finally:
        call.cancel()


async def write_range(
    channels: DataChannels,
    replica: Replica,
    blocksize: int,
    first_block: int,
    block_count: int,
    chunks: asyncio.Queue[bytes | memoryview | None],
) -> int:
    """Write the chunks from `chunks` (None ends them) to the replica's blocks; returns the
    bytes the datanode made durable. Through shared memory when the datanode is on this
    host and takes the connection, else over gRPC."""
    local = channels.local_writes
    if local.usable(replica):
        try:
            conn = await local.connect(replica)
        except UnavailableError:
            pass  # refused or gone: gRPC below
        else:
            return await local.write_range(
                conn, replica, blocksize, first_block, block_count, chunks
            )
    head = dpb.WriteChunk(
        ticket=_ticket(replica),
        block_start=replica.block_start + first_block,
        block_count=block_count,
    )

    async def requests() -> AsyncIterator[dpb.WriteChunk | bytes]:
        first = True
        while True:
            data = await chunks.get()
            if data is None:
                if first:
                    yield head
                return
            if first:
                head.data = bytes(data)  # protobuf wants bytes; once per range
                yield head
                first = False
            else:
                yield dataframes.frame_write_data(data)

    try:
        reply = await channels.stub(replica).WriteBlocks(requests())
    except grpc.RpcError as exc:
        raise data_error(exc, replica) from exc
    return int(reply.bytes_written)


async def copy_range(
    channels: DataChannels,
    target: Replica,
    first_block: int,
    block_count: int,
    source: Replica,
    source_first_block: int,
    content_bytes: int = 0,
) -> int:
    """Have the target replica's datanode fill `block_count` blocks from `first_block`
    blocks into its extent with the blocks of the source replica from
    `source_first_block` on (server-side: no byte passes through this client); returns
    the bytes the target made durable. With `content_bytes`, the target's blocks hold
    zeros past that many bytes."""
    request = dpb.CopyRequest(
        ticket=_ticket(target),
        block_start=target.block_start + first_block,
        block_count=block_count,
        source_ticket=_ticket(source),
        source_datanode_id=source.datanode_id,
        source_block_start=source.block_start + source_first_block,
        content_bytes=content_bytes,
    )
    try:
        reply = await channels.stub(target).CopyBlocks(request)
    except grpc.RpcError as exc:
        raise data_error(exc, target) from exc
    return int(reply.bytes_written)
