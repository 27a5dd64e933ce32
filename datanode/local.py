"""The datanode's local-read service: shared-memory reads for clients on this host.

A Unix socket, a thread per connection (blocking I/O; the volume is read with pread,
which threads may share). Per connection one memfd segment, passed to the client with
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

from plasmafs.client import tickets
from plasmafs.client.errors import InvalidArgumentError, PlasmaError, StorageError
from plasmafs.client.localread import body_length, frame, recv_exact, slot_size
from plasmafs.client.proto import datanode_pb2 as dpb
from plasmafs.datanode.service import Registration
from plasmafs.datanode.volume import Volume

log = logging.getLogger(__name__)


class LocalReadServer:
    """Serves shared-memory reads on a Unix socket."""

    def __init__(self, path: Path, volume: Volume, registration: Registration) -> None:
        self.path = path
        self.volume = volume
        self.registration = registration
        self._listener: socket.socket | None = None
        self._threads: set[threading.Thread] = set()
        self.connections = 0

    def start(self) -> None:
        """Bind the socket (replacing a stale one) and accept in a background thread."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        self.path.chmod(0o666)  # any local user may ask; tickets decide what they get
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, name="pfs-local-accept", daemon=True).start()

    def stop(self) -> None:
        """Stop accepting and remove the socket file."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _accept(self) -> None:
        listener = self._listener
        while listener is not None:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed by stop()
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        self.connections += 1
        size = slot_size(self.volume.info.blocksize)
        fd = os.memfd_create("pfs-local-read", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            segment = mmap.mmap(fd, size)
            sent_segment = False
            with conn, segment:
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
        except Exception:
            log.exception("local read connection failed")
        finally:
            os.close(fd)
            self.connections -= 1

    def _read(self, request: dpb.ReadRequest, segment: mmap.mmap) -> dpb.LocalReadReply:
        try:
            reg = self.registration
            if not reg.secret:
                raise StorageError("the datanode has not registered with a namenode yet")
            start, count = request.block_start, request.block_count
            tickets.check(reg.secret, request.ticket, reg.datanode_id, start, count, write=False)
            self.volume.check_range(start, count)
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
