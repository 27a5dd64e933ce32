"""Local reads: a client on a datanode's host gets block data through shared memory.

The datanode listens on a Unix socket. Per connection it creates a shared-memory
segment (a memfd) and passes its descriptor to the client once, with SCM_RIGHTS; each
read request (with its ticket, checked as on the gRPC path) is answered by filling the
segment and telling where the bytes are. Nothing crosses a socket but a few dozen
bytes per request, and the segment only ever holds data this connection's tickets
allowed. When either side goes away the segment is freed with the last descriptor.
The connections are pooled here for local writes too (shm_write.py).

Whether to use it: the replica's datanode must name this host (its host identity,
`core/host_identity.py`: the host name and network namespace by default) and a socket
path that exists here, and PFS_LOCAL_READS must not be "0". Any failure of the local
path falls back to gRPC, a refusal too: a datanode serves a bounded number of
local-read connections and answers any more with UnavailableError.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import mmap
import os
import select
import socket
from collections.abc import AsyncGenerator

from plasmafs.core.attributes import Replica
from plasmafs.core.errors import PlasmaError, UnavailableError, error_from_wire
from plasmafs.core.host_identity import host_identity
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.shm_framing import body_length, frame, recv_exact, slot_size

READ_DEPTH = 2  # local read requests in flight per read_range, one connection each
MAX_IDLE = 8  # idle connections kept per datanode socket (each holds a segment there)


def local_reads_enabled() -> bool:
    """False when PFS_LOCAL_READS=0 turns the local path off."""
    return os.environ.get("PFS_LOCAL_READS", "1") != "0"


class LocalConnection:
    """One connection to a datanode's local data socket and the segment it shares.

    The first call waits in a thread (its reply carries the segment's descriptor, which
    asyncio cannot receive); later ones run on the event loop, with no thread hop.
    """

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        self.path = path
        self._timeout = timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except OSError:
            self._sock.close()
            raise
        self._segment: mmap.mmap | None = None
        self._on_loop = False  # non-blocking, for the event loop's sock_* calls
        self._head = bytearray(4)

    @property
    def has_segment(self) -> bool:
        """True once the datanode's segment is mapped here (after a first call)."""
        return self._segment is not None

    @property
    def segment(self) -> memoryview:
        """The shared segment (writable: local writes put their data here)."""
        if self._segment is None:
            raise UnavailableError("the datanode sent no shared-memory segment")
        return memoryview(self._segment)

    async def read(self, request: dpb.ReadRequest) -> memoryview:
        """The requested bytes, valid until the next read on this connection."""
        return self._view(await self.call(dpb.LocalRequest(read=request)))

    async def call(self, request: dpb.LocalRequest) -> dpb.LocalReply:
        """Send one request and wait for its reply (an error reply raises)."""
        if self._segment is None:
            return await asyncio.to_thread(self.call_blocking, request)
        async with asyncio.timeout(self._timeout):
            await self.send(request)
            return await self.receive()

    async def send(self, request: dpb.LocalRequest) -> None:
        """Send a request from the event loop; its reply comes, in order, from `receive`.
        Only once the segment is here (after a first `call`)."""
        if not self._on_loop:
            self._sock.setblocking(False)  # the loop's sock_* calls need it
            self._on_loop = True
        await asyncio.get_running_loop().sock_sendall(self._sock, frame(request))

    async def receive(self) -> dpb.LocalReply:
        """The reply to the oldest request sent and not yet answered (an error raises)."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self._timeout):
            await self._recv_into(loop, memoryview(self._head))
            body = bytearray(body_length(self._head))
            await self._recv_into(loop, memoryview(body))
        return _checked(dpb.LocalReply.FromString(bytes(body)))

    async def _recv_into(self, loop: asyncio.AbstractEventLoop, buffer: memoryview) -> None:
        while buffer:
            n = await loop.sock_recv_into(self._sock, buffer)
            if not n:
                raise ConnectionError("the peer closed the connection")
            buffer = buffer[n:]

    def read_blocking(self, request: dpb.ReadRequest) -> memoryview:
        """`read` without an event loop (from a thread)."""
        return self._view(self.call_blocking(dpb.LocalRequest(read=request)))

    def call_blocking(self, request: dpb.LocalRequest) -> dpb.LocalReply:
        """`call` without an event loop (from a thread); the first call takes the segment."""
        if self._on_loop:
            self._sock.settimeout(self._timeout)
            self._on_loop = False
        if self._segment is None:
            # A datanode at its cap on connections answers with a refusal and closes at
            # once, perhaps before the request is sent: the refusal is still there to read.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._sock.sendall(frame(request))
        else:
            self._sock.sendall(frame(request))
        if self._segment is None:
            head, fds, _, _ = socket.recv_fds(self._sock, 4, 1)
            if len(head) < 4:
                head += recv_exact(self._sock, 4 - len(head))
            if fds:
                try:
                    size = os.fstat(fds[0]).st_size
                    self._segment = mmap.mmap(fds[0], size)
                finally:
                    os.close(fds[0])
        else:
            head = recv_exact(self._sock, 4)
        return _checked(dpb.LocalReply.FromString(recv_exact(self._sock, body_length(head))))

    def _view(self, reply: dpb.LocalReply) -> memoryview:
        return self.segment[reply.data_offset : reply.data_offset + reply.length]

    def still_open(self) -> bool:
        """For an idle connection: True unless the datanode has closed it (it went away).
        Nothing is ever left to read on an idle connection, so readable means gone."""
        poller = select.poll()  # not select(): any descriptor number
        try:
            poller.register(self._sock, select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def shutdown(self) -> None:
        """End both directions: a call waiting on this connection fails at once."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Close the socket (waking a thread blocked on it) and unmap the segment."""
        self.shutdown()
        self._sock.close()
        if self._segment is not None:
            # A caller may still hold a view; then the mapping goes when it does.
            with contextlib.suppress(BufferError):
                self._segment.close()


def _checked(reply: dpb.LocalReply) -> dpb.LocalReply:
    if reply.code:
        raise error_from_wire(reply.code, reply.message)
    return reply


class LocalReads:
    """Pools of local connections per datanode socket, and the read path over them."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = local_reads_enabled() if enabled is None else enabled
        self._host = host_identity()
        self._idle: dict[str, list[LocalConnection]] = {}
        self.reads = 0
        # Blocks per request; 0: as many as a segment holds. Smaller only to test the
        # pipelining on small files.
        self.request_blocks = 0

    def usable(self, replica: Replica) -> bool:
        """True if `replica` can be read through shared memory from here."""
        return self.enabled and self.reachable(replica)

    def reachable(self, replica: Replica) -> bool:
        """True if `replica`'s datanode is on this host and serves a local socket here."""
        return (
            bool(replica.local_socket)
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
    ) -> AsyncGenerator[memoryview, None]:
        """Like datapath.read_range; each piece is valid until the next is requested.

        Up to READ_DEPTH requests are in flight, each on its own connection (and segment):
        the datanode serves each connection in its own thread, so while the caller uses
        one piece the next ones are being copied, on another core.
        """
        ticket = dpb.Ticket.FromString(replica.ticket)
        per_request = self.request_blocks or max(1, slot_size(blocksize) // blocksize)
        requests = _requests(
            ticket, replica.block_start, blocksize, per_request, first_block, block_count,
            offset, length,
        )  # fmt: skip
        if not requests:
            return
        conns = [await self.take(replica.local_socket)]
        inflight: collections.deque[tuple[LocalConnection, asyncio.Future[memoryview]]] = (
            collections.deque()
        )
        launched = 0
        healthy = False

        def launch(conn: LocalConnection) -> None:
            nonlocal launched
            future = asyncio.ensure_future(conn.read(requests[launched]))
            inflight.append((conn, future))
            launched += 1

        try:
            launch(conns[0])
            while len(conns) < READ_DEPTH and launched < len(requests):
                conns.append(await self.take(replica.local_socket))
                launch(conns[-1])
            while inflight:
                conn, future = inflight.popleft()
                view = await future
                self.reads += 1
                yield view
                if launched < len(requests):
                    launch(conn)  # the caller is done with `view`: this segment is free
            healthy = True
        except PlasmaError:
            raise  # the datanode's answer (a refused ticket is also an OSError)
        except (OSError, ConnectionError) as exc:
            raise UnavailableError(f"local read from {replica.local_socket} failed: {exc}") from exc
        finally:
            if healthy:
                for conn in conns:
                    self.keep(conn)
            else:
                # Reads left in flight by an error or a caller that stopped: end them (a
                # shut-down socket fails them, even in a thread) before the sockets close.
                for conn in conns:
                    conn.shutdown()
                for _, future in inflight:
                    future.cancel()
                await asyncio.gather(*(f for _, f in inflight), return_exceptions=True)
                for conn in conns:
                    conn.close()

    async def take(self, path: str) -> LocalConnection:
        """An idle connection to the socket at `path`, or a new one."""
        idle = self._idle.get(path)
        while idle:
            conn = idle.pop()
            if conn.still_open():
                return conn
            conn.close()  # its datanode restarted or went away
        try:
            return await asyncio.to_thread(LocalConnection, path)
        except OSError as exc:
            raise UnavailableError(f"cannot connect to {path}: {exc}") from exc

    def keep(self, conn: LocalConnection) -> None:
        """Give back a connection that is in a clean state (no call left unanswered)."""
        idle = self._idle.setdefault(conn.path, [])
        if len(idle) < MAX_IDLE:
            idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        """Close every pooled connection."""
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


def _requests(
    ticket: dpb.Ticket,
    volume_start: int,
    blocksize: int,
    per_request: int,
    first_block: int,
    block_count: int,
    offset: int,
    length: int,
) -> list[dpb.ReadRequest]:
    """The requests, one segment each, reading `length` bytes from `offset` into file
    blocks [first_block, first_block + block_count) of a replica that starts at block
    `volume_start` of its volume, at most `per_request` blocks per request."""
    requests = []
    block, end_block = first_block, first_block + block_count
    skip, left = offset, length
    while left > 0 and block < end_block:
        n = min(per_request, end_block - block)
        want = min(left, n * blocksize - skip)
        requests.append(
            dpb.ReadRequest(
                ticket=ticket,
                block_start=volume_start + block,
                block_count=n,
                offset=skip,
                length=want,
            )
        )
        left -= want
        skip = 0
        block += n
    return requests
