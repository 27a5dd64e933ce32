"""Data messages of the datanode protocol, framed by hand.

`ReadChunk {bytes data = 1}` and `WriteChunk {... bytes data = 4}` carry megabytes;
building and parsing them through protobuf objects copies every byte twice more
than needed. These functions produce and read exactly the protobuf wire format (a
field tag, a varint length, the bytes), so peers using the generated classes
interoperate, but the bytes are copied at most once when framed (not at all when a
datanode reads blocks straight into a new ReadChunk) and not at all when read.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from plasmafs.core.proto import datanode_pb2 as dpb

if TYPE_CHECKING:
    import grpc

SERVICE = "plasmafs.datanode.v1.Datanode"

_READ_DATA_TAG = 0x0A  # field 1, length-delimited
_WRITE_DATA_TAG = 0x22  # field 4, length-delimited


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _split(raw: bytes, tag: int) -> memoryview | None:
    """The payload of a message that is exactly one `tag` field, else None."""
    if not raw or raw[0] != tag:
        return None
    length = 0
    shift = 0
    i = 1
    while i < len(raw):
        byte = raw[i]
        length |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            break
        shift += 7
    if i + length != len(raw):
        return None
    return memoryview(raw)[i:]


def frame_read_chunk(data: bytes | memoryview) -> bytes:
    """A serialized ReadChunk carrying `data`."""
    return b"".join((bytes((_READ_DATA_TAG,)), _varint(len(data)), data))


def new_read_chunk(length: int) -> tuple[bytes, memoryview]:
    """A serialized ReadChunk of `length` data bytes, header written and data not yet, and
    a writable view of its data part.

    A datanode reads blocks straight into the message gRPC will send, instead of reading
    them into one buffer and copying that behind a header (over 2 GiB `cat`s, 4 runs
    each way: datanode CPU per GiB 0.71 -> 0.65 s, rate +8%). The caller must fill the
    whole view before the message is used or shared, and keep the message referenced
    while it writes: the view does not keep it alive.
    """
    header = bytes((_READ_DATA_TAG,)) + _varint(length)
    message = _unfilled_bytes(None, len(header) + length)
    memory = (ctypes.c_char * len(message)).from_address(_bytes_address(message))
    view = memoryview(memory).cast("B")
    view[: len(header)] = header
    return message, view[len(header) :]


# CPython's way to make a bytes object and fill it afterwards (what C code does with
# PyBytes_FromStringAndSize(NULL, n)); nothing else sees it until it is filled.
_unfilled_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_unfilled_bytes.restype = ctypes.py_object
_unfilled_bytes.argtypes = [ctypes.c_char_p, ctypes.c_ssize_t]
_bytes_address = ctypes.pythonapi.PyBytes_AsString
_bytes_address.restype = ctypes.c_void_p
_bytes_address.argtypes = [ctypes.py_object]


def parse_read_chunk(raw: bytes) -> memoryview:
    """The data of a serialized ReadChunk (without copying it)."""
    payload = _split(raw, _READ_DATA_TAG)
    if payload is not None:
        return payload
    return memoryview(dpb.ReadChunk.FromString(raw).data)


def frame_write_data(data: bytes | memoryview) -> bytes:
    """A serialized WriteChunk carrying only `data` (the messages after the first)."""
    return b"".join((bytes((_WRITE_DATA_TAG,)), _varint(len(data)), data))


def serialize_write_chunk(message: dpb.WriteChunk | bytes) -> bytes:
    """WriteChunk messages as the client sends them: pre-framed data, or a message."""
    return message if isinstance(message, bytes) else message.SerializeToString()


def parse_write_chunk(raw: bytes) -> dpb.WriteChunk | memoryview:
    """A WriteChunk: its data alone (no copy) when that is all it holds, else the message."""
    payload = _split(raw, _WRITE_DATA_TAG)
    if payload is not None:
        return payload
    return dpb.WriteChunk.FromString(raw)


def serialize_read_chunk(message: bytes | dpb.ReadChunk) -> bytes:
    """ReadChunk messages as the datanode sends them: already framed (by
    frame_read_chunk, off the event loop), or a message."""
    if isinstance(message, dpb.ReadChunk):
        return message.SerializeToString()
    if not isinstance(message, bytes):  # unframed data would corrupt the stream
        raise TypeError(f"ReadBlocks yields framed bytes, not {type(message).__name__}")
    return message


class DatanodeStub:
    """The datanode's data calls, with data messages framed by hand: what clients and
    copying datanodes call (this module loads no gRPC itself)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.ReadBlocks = channel.unary_stream(
            f"/{SERVICE}/ReadBlocks",
            request_serializer=dpb.ReadRequest.SerializeToString,
            response_deserializer=parse_read_chunk,
        )
        self.WriteBlocks = channel.stream_unary(
            f"/{SERVICE}/WriteBlocks",
            request_serializer=serialize_write_chunk,
            response_deserializer=dpb.WriteReply.FromString,
        )
        self.CopyBlocks = channel.unary_unary(
            f"/{SERVICE}/CopyBlocks",
            request_serializer=dpb.CopyRequest.SerializeToString,
            response_deserializer=dpb.WriteReply.FromString,
        )
