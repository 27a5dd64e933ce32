"""Local writes: a client on a datanode's host hands block data over through shared memory.

The same connections and segments as local reads (localread.py), the other way round:
the client copies a range's bytes into the segment and tells the datanode which blocks
they fill; the datanode copies them out, checks the ticket, checksums and writes them,
and makes the range durable (fdatasync) after its last piece, as WriteBlocks does. No
byte of data crosses a socket, is encrypted or framed: for a 1 MiB file that was most
of the CPU both sides spent on it.

The segment is used as two halves where it holds two pieces of whole blocks: while the
datanode writes one, the client fills the other. Whether to use it: the replica's
datanode must be reachable locally (localread.LocalReads.reachable) and
PFS_LOCAL_WRITES must not be "0". A datanode that refuses the connection is written
over gRPC instead; a failure once data has been taken from the stream fails the
write, exactly as a broken gRPC stream does.
"""

from __future__ import annotations

import asyncio
import collections
import os

from plasmafs.client.shm_read import LocalConnection, LocalReads
from plasmafs.core.attributes import Replica
from plasmafs.core.errors import InvalidArgumentError, PlasmaError, UnavailableError
from plasmafs.core.proto import datanode_pb2 as dpb


def local_writes_enabled() -> bool:
    """False when PFS_LOCAL_WRITES=0 turns the local write path off."""
    return os.environ.get("PFS_LOCAL_WRITES", "1") != "0"


class LocalWrites:
    """Range writes through the shared-memory connections pooled by `pool`."""

    def __init__(self, pool: LocalReads, enabled: bool | None = None) -> None:
        self.enabled = local_writes_enabled() if enabled is None else enabled
        self._pool = pool
        self.pieces = 0  # pieces written this way (tests check the path was taken)

    def usable(self, replica: Replica) -> bool:
        """True if `replica` can be written through shared memory from here."""
        return self.enabled and self._pool.reachable(replica)

    async def connect(self, replica: Replica) -> LocalConnection:
        """A connection to the replica's datanode that holds its segment; raises
        UnavailableError when the datanode cannot be reached or refuses (then the caller
        writes over gRPC)."""
        conn = await self._pool.take(replica.local_socket)
        if conn.has_segment:
            return conn
        try:
            await conn.call(dpb.LocalRequest())  # asks for nothing but the segment
        except (PlasmaError, OSError, ConnectionError) as exc:
            conn.close()
            if isinstance(exc, UnavailableError):
                raise
            raise UnavailableError(f"local write to {replica.local_socket}: {exc}") from exc
        return conn

    async def write_range(
        self,
        conn: LocalConnection,
        replica: Replica,
        blocksize: int,
        first_block: int,
        block_count: int,
        chunks: asyncio.Queue[bytes | memoryview | None],
    ) -> int:
        """Like datapath.write_range, through `conn` (from `connect`), which goes back to
        the pool if the write ends well and is closed otherwise."""
        stream = _Stream(conn, replica, blocksize, first_block, block_count)
        healthy = False
        try:
            written = await stream.run(chunks)
            healthy = True
        except PlasmaError:
            raise
        except (OSError, ConnectionError, TimeoutError) as exc:
            raise UnavailableError(f"local write to {replica.local_socket} failed: {exc}") from exc
        finally:
            self.pieces += stream.sent
            if healthy:
                self._pool.keep(conn)
            else:
                conn.close()  # replies may still be on their way: never reuse it
        return written


class _Stream:
    """One range's bytes, copied into the segment's halves and sent piece by piece."""

    def __init__(
        self,
        conn: LocalConnection,
        replica: Replica,
        blocksize: int,
        first_block: int,
        block_count: int,
    ) -> None:
        self.conn = conn
        self.ticket = dpb.Ticket.FromString(replica.ticket)
        self.bs = blocksize
        self.next_block = replica.block_start + first_block  # where the next piece goes
        self.limit = block_count * blocksize  # bytes the range holds
        segment = len(conn.segment)
        half = segment // 2 - (segment // 2) % blocksize
        self.halves = [0, half] if half else [0]
        self.size = half or segment - segment % blocksize
        self.filled = 0  # bytes in the current half
        self.current = 0  # index into halves
        self.taken = 0  # bytes taken from the stream so far
        self.sent = 0
        self.unanswered: collections.deque[int] = collections.deque()  # lengths sent

    async def run(self, chunks: asyncio.Queue[bytes | memoryview | None]) -> int:
        written = 0
        while (chunk := await chunks.get()) is not None:
            view = memoryview(chunk).cast("B")
            self.taken += len(view)
            if self.taken > self.limit:
                raise InvalidArgumentError(f"more than {self.limit // self.bs} blocks of data")
            while view:
                # A full half goes out only now that more data follows: the last piece
                # of the range is always the one sent with sync.
                if self.filled == self.size:
                    written += await self._send(sync=False)
                take = min(self.size - self.filled, len(view))
                at = self.halves[self.current] + self.filled
                self.conn.segment[at : at + take] = view[:take]
                self.filled += take
                view = view[take:]
        if self.filled:
            written += await self._send(sync=True)
        while self.unanswered:
            written += await self._answer()
        return written

    async def _send(self, *, sync: bool) -> int:
        """Send the current half as a piece and move to the next half, waiting first for
        the answer of the piece that used it. Returns the bytes answered meanwhile."""
        length = self.filled
        piece = dpb.LocalWrite(
            ticket=self.ticket,
            block_start=self.next_block,
            data_offset=self.halves[self.current],
            length=length,
            sync=sync,
        )
        await self.conn.send(dpb.LocalRequest(write=piece))
        self.unanswered.append(length)
        self.sent += 1
        self.next_block += (length + self.bs - 1) // self.bs
        self.current = (self.current + 1) % len(self.halves)
        self.filled = 0
        answered = 0
        if len(self.unanswered) == len(self.halves):  # the next half is still in use
            answered += await self._answer()
        return answered

    async def _answer(self) -> int:
        reply = await self.conn.receive()
        expected = self.unanswered.popleft()
        if reply.length != expected:
            raise UnavailableError(f"the datanode wrote {reply.length} of {expected} bytes")
        return expected
