"""Local reads: a client on a datanode's host gets block data through shared memory.

The datanode listens on a Unix socket. Per connection it creates a shared-memory
segment (a memfd) and passes its descriptor to the client once, with SCM_RIGHTS; each
read request (with its ticket, checked as on the gRPC path) is answered by filling the
segment and telling where the bytes are. Nothing crosses a socket but a few dozen
bytes per request, and the segment only ever holds data this connection's tickets
allowed. When either side goes away the segment is freed with the last descriptor.

Whether to use it: the replica's datanode must name this host (its host identity,
default the hostname) and a socket path that exists here, and PFS_LOCAL_READS must not
be "0". Any failure of the local path falls back to gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import socket
import struct
from collections.abc import AsyncIterator

from plasmafs.client.attributes import Replica
from plasmafs.client.errors import UnavailableError, error_from_wire
from plasmafs.client.proto import datanode_pb2 as dpb

SLOT_BYTES = 8 * 1024 * 1024  # the segment size, at least one block (see slot_size)
_LEN = struct.Struct(">I")


def slot_size(blocksize: int) -> int:
    """The segment size for a volume's blocksize."""
    return max(SLOT_BYTES, blocksize)


def host_identity() -> str:
    """This host's identity, as datanodes on it register it."""
    return os.environ.get("PFS_HOST_IDENTITY") or socket.gethostname()


def local_reads_enabled() -> bool:
    """False when PFS_LOCAL_READS=0 turns the local path off."""
    return os.environ.get("PFS_LOCAL_READS", "1") != "0"


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes, or ConnectionError on a closed socket."""
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class LocalConnection:
    """One blocking connection to a datanode's local-read socket (use from a thread)."""

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except OSError:
            self._sock.close()
            raise
        self._segment: mmap.mmap | None = None

    def read(self, request: dpb.ReadRequest) -> memoryview:
        """The requested bytes, valid until the next read on this connection."""
        payload = request.SerializeToString()
        self._sock.sendall(_LEN.pack(len(payload)) + payload)
        if self._segment is None:
            head, fds, _, _ = socket.recv_fds(self._sock, 4, 1)
            if len(head) < 4:
                head += recv_exact(self._sock, 4 - len(head))
            if fds:
                try:
                    size = os.fstat(fds[0]).st_size
                    self._segment = mmap.mmap(fds[0], size, prot=mmap.PROT_READ)
                finally:
                    os.close(fds[0])
        else:
            head = recv_exact(self._sock, 4)
        reply = dpb.LocalReadReply.FromString(recv_exact(self._sock, _LEN.unpack(head)[0]))
        if reply.code:
            raise error_from_wire(reply.code, reply.message)
        if self._segment is None:
            raise UnavailableError("the datanode sent no shared-memory segment")
        return memoryview(self._segment)[reply.data_offset : reply.data_offset + reply.length]

    def close(self) -> None:
        """Close the socket and unmap the segment."""
        self._sock.close()
        if self._segment is not None:
            # A caller may still hold a view; then the mapping goes when it does.
            with contextlib.suppress(BufferError):
                self._segment.close()


class LocalReads:
    """Pools of local connections per datanode socket, and the read path over them."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = local_reads_enabled() if enabled is None else enabled
        self._host = host_identity()
        self._idle: dict[str, list[LocalConnection]] = {}
        self.reads = 0

    def usable(self, replica: Replica) -> bool:
        """True if `replica` can be read through shared memory from here."""
        return (
            self.enabled
            and bool(replica.local_socket)
            and replica.host == self._host
            and os.path.exists(replica.local_socket)
        )

    async def read_range(
        self,
        replica: Replica,
        blocksize: int,
        first_block: int,
        block_count: int,
        offset: int,
        length: int,
    ) -> AsyncIterator[memoryview]:
        """Like datapath.read_range; each piece is valid until the next is requested."""
        ticket = dpb.Ticket.FromString(replica.ticket)
        conn = await self._take(replica.local_socket)
        per_request = max(1, slot_size(blocksize) // blocksize)
        healthy = False
        try:
            block = first_block
            end_block = first_block + block_count
            skip, left = offset, length
            while left > 0 and block < end_block:
                n = min(per_request, end_block - block)
                want = min(left, n * blocksize - skip)
                request = dpb.ReadRequest(
                    ticket=ticket,
                    block_start=replica.block_start + block,
                    block_count=n,
                    offset=skip,
                    length=want,
                )
                view = await asyncio.to_thread(conn.read, request)
                self.reads += 1
                yield view
                left -= want
                skip = 0
                block += n
            healthy = True
        except (OSError, ConnectionError) as exc:
            raise UnavailableError(f"local read from {replica.local_socket} failed: {exc}") from exc
        finally:
            if healthy:
                self._idle.setdefault(replica.local_socket, []).append(conn)
            else:
                conn.close()

    async def _take(self, path: str) -> LocalConnection:
        idle = self._idle.get(path)
        if idle:
            return idle.pop()
        try:
            return await asyncio.to_thread(LocalConnection, path)
        except OSError as exc:
            raise UnavailableError(f"cannot connect to {path}: {exc}") from exc

    def close(self) -> None:
        """Close every pooled connection."""
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
