"""The framing of the local data socket, shared by the client and the datanode:
each message is its 4-byte big-endian length, then its bytes; and the size of the
shared-memory segment a connection reads into."""

from __future__ import annotations

import socket
import struct

from plasmafs.core.proto import datanode_pb2 as dpb

SLOT_BYTES = 8 * 1024 * 1024  # the segment size, at least one block (see slot_size)
_LEN = struct.Struct(">I")


def slot_size(blocksize: int) -> int:
    """The segment size for a volume's blocksize."""
    return max(SLOT_BYTES, blocksize)


def frame(message: dpb.LocalRequest | dpb.LocalReply) -> bytes:
    """A message as it travels on a local data socket: its length, then its bytes."""
    payload = message.SerializeToString()
    return _LEN.pack(len(payload)) + payload


def body_length(head: bytes | bytearray) -> int:
    """The length a frame's 4-byte head announces."""
    return int(_LEN.unpack(head)[0])


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
