"""The datanode's local-read service: shared-memory reads for clients on this host.

A Unix socket, a thread per connection (blocking I/O; the volume is read with pread,
which threads may share), and at most `max_connections` of them: a connection over the
cap is answered at once with an UNAVAILABLE refusal and closed, and the client reads
over gRPC instead. Per connection one memfd segment, passed to the client with
the first answer; every request is ticket-checked exactly as on the gRPC path, and its
blocks are read straight into the segment and checksum-verified there. The segment is
freed when the connection ends, whoever ends it: nothing is left in /dev/shm or
elsewhere when a client dies.

What this trusts: the kernel's file-descriptor passing and that the client cannot
write into the segment (it is passed as read-only data the datanode alone fills, and
its content is data the connection's tickets allowed anyway). What it does not trust:
the client's requests, each of which needs a valid ticket for exactly its blocks.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import socket
import threading
from pathlib import Path

from plasmafs.client.errors import (
    InvalidArgumentError,
    PlasmaError,
    StorageError,
    UnavailableError,
)
from plasmafs.client.localframes import body_length, frame, recv_exact, slot_size
from plasmafs.client.proto import datanode_pb2 as dpb
from plasmafs.datanode.registration import Registration, authorize
from plasmafs.datanode.volume import Volume

log = logging.getLogger(__name__)


class LocalReadServer:
    """Serves shared-memory reads on a Unix socket, at most `max_connections` at once."""

    def __init__(
        self, path: Path, volume: Volume, registration: Registration, max_connections: int
    ) -> None:
        self.path = path
        self.volume = volume
        self.registration = registration
        self.max_connections = max_connections
        self.refused = 0
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
                "refused a local-read connection: %d are open (refused so far: %d)",
                self.max_connections,
                self.refused,
            )
        reply = dpb.LocalReadReply(
            code=UnavailableError.code,
            message=f"the datanode serves at most {self.max_connections} local-read "
            "connections at once; read over gRPC",
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
            log.exception("local read connection failed")
        finally:
            with self._lock:
                del self._open[conn]
            self._slots.release()

    def _serve_connection(self, conn: socket.socket) -> None:
        size = slot_size(self.volume.info.blocksize)
        fd = os.memfd_create("pfs-local-read", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            with mmap.mmap(fd, size) as segment:
                sent_segment = False
                while True:
                    try:
                        head = recv_exact(conn, 4)
                    except (ConnectionError, OSError):
                        return
                    request = dpb.ReadRequest.FromString(recv_exact(conn, body_length(head)))
                    reply = frame(self._read(request, segment))
                    try:
                        if not sent_segment:
                            socket.send_fds(conn, [reply], [fd])
                            sent_segment = True
                        else:
                            conn.sendall(reply)
                    except OSError:
                        return
        finally:
            os.close(fd)

    def _read(self, request: dpb.ReadRequest, segment: mmap.mmap) -> dpb.LocalReadReply:
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
            self.volume.read_into(start, count, memoryview(segment)[:total])
            return dpb.LocalReadReply(data_offset=request.offset, length=length)
        except PlasmaError as exc:
            return dpb.LocalReadReply(code=exc.code, message=str(exc))
        except OSError as exc:
            return dpb.LocalReadReply(code=StorageError.code, message=f"volume read: {exc}")
