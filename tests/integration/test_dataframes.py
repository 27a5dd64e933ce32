"""Hand-framed data messages are exactly protobuf's wire format, whichever way they are
made, so peers using the generated classes interoperate."""

from __future__ import annotations

import os

import pytest

from plasmafs.core import data_framing as dataframes
from plasmafs.core.proto import datanode_pb2 as dpb


@pytest.mark.parametrize("length", [1, 127, 128, 16_383, 16_384, 4 * 1024 * 1024 + 3])
def test_a_read_chunk_filled_in_place_is_a_protobuf_read_chunk(length: int) -> None:
    data = os.urandom(length)
    message, view = dataframes.new_read_chunk(length)
    assert len(view) == length and not view.readonly
    view[:] = data
    assert isinstance(message, bytes)
    assert message == dpb.ReadChunk(data=data).SerializeToString()
    assert message == dataframes.frame_read_chunk(data)
    assert bytes(dataframes.parse_read_chunk(message)) == data


def test_write_data_frames_parse_back_without_a_copy() -> None:
    data = os.urandom(300)
    raw = dataframes.frame_write_data(data)
    assert dpb.WriteChunk.FromString(raw).data == data
    payload = dataframes.parse_write_chunk(raw)
    assert isinstance(payload, memoryview) and payload.obj is raw and bytes(payload) == data
