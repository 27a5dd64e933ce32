"""The datanode's local data path: shared-memory reads and writes for clients on this host.

A Unix socket, a thread per connection (blocking I/O; the volume is read and written
with pread/pwrite, which threads may share), and at most `max_connections` of them: a
connection over the cap is answered at once with an UNAVAILABLE refusal and closed, and
the client uses gRPC instead. Per connection one memfd segment, sealed against
resizing and passed to the client with the first answer; every request is
ticket-checked exactly as on the gRPC path. A read's blocks are read straight into the
segment and checksum-verified there; a write's bytes are copied out of the segment
first, and only that private copy is checksummed and written. The segment is freed when
the connection ends, whoever ends it: nothing is left in /dev/shm or elsewhere when a
client dies.

What this trusts: the kernel's file-descriptor passing and its seals. What it does not
trust: the client's requests, each of which needs a valid ticket for exactly its blocks,
nor the segment's content, which the client may change at any moment (a checksum is only
ever computed over the datanode's own copy), nor its size (the seals forbid shrinking
it, which would make the datanode's next access to it a SIGBUS).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import mmap
import os
import socket
import threading
from pathlib import Path

from plasmafs.core import tickets
from plasmafs.core.errors import (
    InvalidArgumentError,
    PlasmaError,
    StorageError,
    UnavailableError,
)
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.shm_framing import body_length, frame, recv_exact, slot_size
from plasmafs.datanode.inflight import InflightWrites
from plasmafs.datanode.registration import Registration, authorize
from plasmafs.datanode.volume import Volume

_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL

log = logging.getLogger(__name__)


class LocalDataServer:
    """Serves shared-memory reads and writes on a Unix socket, at most `max_connections`
    connections at once. Writes register their blocks in `inflight` while they run."""

    def __init__(
        self,
        path: Path,
        volume: Volume,
        registration: Registration,
        inflight: InflightWrites,
        max_connections: int,
    ) -> None:
        self.path = path
        self.volume = volume
        self.registration = registration
        self.inflight = inflight
        self.max_connections = max_connections
        self.refused = 0
        self.bytes_read = 0
        self.bytes_written = 0  # durable: counted when a stream's last piece is synced
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._slots = threading.BoundedSemaphore(max_connections)
        self._open: dict[socket.socket, threading.Thread] = {}
        self._lock = threading.Lock()

    @property
    def connections(self) -> int:
        """Connections being served now."""
        with self._lock:
            return len(self._open)

    def start(self) -> None:
        """Bind the socket (replacing a stale one) and accept in a background thread."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        self.path.chmod(0o666)  # any local user may ask; tickets decide what they get
        listener.listen(64)
        self._listener = listener
        self._accepting = threading.Thread(
            target=self._accept, args=(listener,), name="pfs-local-accept", daemon=True
        )
        self._accepting.start()

    def stop(self) -> None:
        """Stop accepting, end every connection, wait for their threads, remove the socket."""
        listener, self._listener = self._listener, None
        if listener is not None:
            # shutdown wakes the thread blocked in accept(); close alone does not.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._accepting is not None:
            self._accepting.join()
        with self._lock:
            serving = list(self._open.items())
        for conn, _ in serving:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # wakes its thread, which then ends
        for _, thread in serving:
            thread.join()  # no read may touch the volume once it is closed
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # stopped
            if not self._slots.acquire(blocking=False):
                self._refuse(conn)
                continue
            thread = threading.Thread(
                target=self._serve, args=(conn,), name="pfs-local-read", daemon=True
            )
            with self._lock:
                self._open[conn] = thread
            thread.start()

    def _refuse(self, conn: socket.socket) -> None:
        self.refused += 1
        if self.refused & (self.refused - 1) == 0:  # the 1st, 2nd, 4th...: a trend, no flood
            log.warning(
                "refused a local data connection: %d are open (refused so far: %d)",
                self.max_connections,
                self.refused,
            )
        reply = dpb.LocalReply(
            code=UnavailableError.code,
            message=f"the datanode serves at most {self.max_connections} local-read "
            "connections at once; use gRPC",
        )
        # Never blocks the accept thread: the reply fits an empty socket buffer, and a
        # client that cannot take it learns of the refusal from the closed connection.
        conn.setblocking(False)
        with conn, contextlib.suppress(OSError):
            conn.send(frame(reply))

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                self._serve_connection(conn)
        except Exception:
            log.exception("local data connection failed")
        finally:
            with self._lock:
                del self._open[conn]
            self._slots.release()

    def _serve_connection(self, conn: socket.socket) -> None:
        size = slot_size(self.volume.info.blocksize)
        fd = os.memfd_create("pfs-local-read", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            with mmap.mmap(fd, size) as segment:
                sent_segment = False
                unsynced = 0  # bytes written by this connection's stream since its last sync
                while True:
                    try:
                        head = recv_exact(conn, 4)
                    except (ConnectionError, OSError):
                        return
                    request = dpb.LocalRequest.FromString(recv_exact(conn, body_length(head)))
                    kind = request.WhichOneof("kind")
                    if kind == "read":
                        reply = self._read(request.read, segment)
                    elif kind == "write":
                        reply = self._write(request.write, segment)
                        if reply.code:
                            unsynced = 0
                        else:
                            unsynced += reply.length
                            if request.write.sync:
                                with self._lock:
                                    self.bytes_written += unsynced
                                unsynced = 0
                    else:
                        reply = dpb.LocalReply()
                    try:
                        if not sent_segment:
                            socket.send_fds(conn, [frame(reply)], [fd])
                            sent_segment = True
                        else:
                            conn.sendall(frame(reply))
                    except OSError:
                        return
        finally:
            os.close(fd)

    def _read(self, request: dpb.ReadRequest, segment: mmap.mmap) -> dpb.LocalReply:
        try:
            start, count = request.block_start, request.block_count
            authorize(self.registration, self.volume, request.ticket, start, count, write=False)
            bs = self.volume.info.blocksize
            if count * bs > len(segment):
                raise InvalidArgumentError(f"at most {len(segment) // bs} blocks per local read")
            total = count * bs
            length = request.length or total - request.offset
            if request.offset + length > total:
                raise InvalidArgumentError("offset/length outside the block range")
            owner = tickets.owner_at(request.ticket, start)
            self.volume.read_local(start, count, memoryview(segment)[:total], owner)
            with self._lock:
                self.bytes_read += length
            return dpb.LocalReply(data_offset=request.offset, length=length)
        except PlasmaError as exc:
            return dpb.LocalReply(code=exc.code, message=str(exc))
        except OSError as exc:
            return dpb.LocalReply(code=StorageError.code, message=f"volume read: {exc}")

    def _write(self, request: dpb.LocalWrite, segment: mmap.mmap) -> dpb.LocalReply:
        try:
            bs = self.volume.info.blocksize
            start, offset, length = request.block_start, request.data_offset, request.length
            if length == 0 or offset + length > len(segment):
                raise InvalidArgumentError("a local write's bytes lie outside the segment")
            if length % bs and not request.sync:
                raise InvalidArgumentError("only a stream's last piece may end inside a block")
            count = (length + bs - 1) // bs
            authorize(self.registration, self.volume, request.ticket, start, count, write=True)
            # The client can still change the segment: the volume checksums and writes a
            # copy of it.
            owner = tickets.owner_at(request.ticket, start)
            with memoryview(segment) as view, self.inflight.writing(start, count):
                piece = view[offset : offset + length]
                self.volume.write_blocks(start, piece, changing=True, owner=owner)
            if request.sync:
                self.volume.flush()
            return dpb.LocalReply(length=length)
        except PlasmaError as exc:
            return dpb.LocalReply(code=exc.code, message=str(exc))
        except OSError as exc:
            log.exception("local volume write failed")
            return dpb.LocalReply(code=StorageError.code, message=f"volume write failed: {exc}")
