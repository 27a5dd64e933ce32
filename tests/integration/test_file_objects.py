"""File objects behave like Python's io objects: ValueError once closed,
io.UnsupportedOperation for what a reader or a writer cannot do, seek() checks its
arguments as io does, readable()/writable()/seekable(); a negative offset to pread is
InvalidArgumentError, never bytes made up. Both the asyncio objects and the sync facade."""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from plasmafs.client import Client, FileReader, FileWriter, InvalidArgumentError, SyncClient
from tests.conftest import DataCluster

DATA = b"0123456789" * 1000

# Each seek, with the error io.BytesIO raises for it (None: allowed).
SEEKS: list[tuple[tuple[Any, ...], type[Exception] | None]] = [
    ((3,), None),
    ((2, os.SEEK_CUR), None),
    ((-4, os.SEEK_END), None),
    ((len(DATA) + 10,), None),  # past the end: allowed, reads nothing
    ((0, 3), ValueError),
    ((0, -1), ValueError),
    ((-1,), ValueError),
    ((1.5,), TypeError),
    (("1",), TypeError),
    ((0, 1.0), TypeError),
    ((None,), TypeError),
]


async def _reader(fs: Client, path: str = "/f") -> FileReader:
    reader = await fs.open(path, "rb")
    assert isinstance(reader, FileReader)
    return reader


async def _raises(kind: type[BaseException], call: Callable[[], Awaitable[Any] | Any]) -> None:
    with pytest.raises(kind):
        result = call()
        if isinstance(result, Awaitable):
            await result


async def test_a_reader_is_readable_and_seekable_as_io_is(dfs: Client) -> None:
    await dfs.write_file("/f", DATA)
    reader = await _reader(dfs)
    assert (reader.readable(), reader.writable(), reader.seekable()) == (True, False, True)
    for args, error in SEEKS:
        reference = io.BytesIO(DATA)
        reader.seek(7)
        reference.seek(7)
        if error is None:
            assert reader.seek(*args) == reference.seek(*args), args
            assert reader.tell() == reference.tell()
            assert await reader.read(5) == reference.read(5)
        else:
            with pytest.raises(error):
                reference.seek(*args)
            with pytest.raises(error):
                reader.seek(*args)
            assert reader.tell() == 7, args  # a refused seek moves nothing
    # A position before the start is refused however it is reached.
    reader.seek(7)
    with pytest.raises(ValueError):
        reader.seek(-8, os.SEEK_CUR)
    with pytest.raises(ValueError):
        reader.seek(-len(DATA) - 1, os.SEEK_END)
    assert reader.tell() == 7
    reader.seek(0)
    assert await reader.read(None) == DATA
    await _raises(TypeError, lambda: reader.read(2.5))
    await _raises(io.UnsupportedOperation, lambda: reader.write(b"x"))
    await reader.close()


async def test_pread_refuses_negative_offsets(dfs: Client) -> None:
    await dfs.write_file("/f", DATA)
    reader = await _reader(dfs)
    assert await reader.pread(len(DATA) - 3, 100) == DATA[-3:]
    for offset in (-1, -len(DATA), -(2**40)):
        await _raises(InvalidArgumentError, functools.partial(reader.pread, offset, 10))
        with pytest.raises(InvalidArgumentError):
            async for _ in reader.stream(offset, 10):
                pass
    assert reader.tell() == 0


async def test_a_closed_reader_raises_value_error(dfs: Client) -> None:
    await dfs.write_file("/f", DATA)
    reader = await _reader(dfs)
    await reader.close()
    await reader.close()  # twice is fine, as with io
    for call in [
        lambda: reader.read(),
        lambda: reader.read(3),
        lambda: reader.readinto(bytearray(4)),
        lambda: reader.seek(0),
        lambda: reader.tell(),
        lambda: reader.pread(0, 3),
        lambda: reader.readable(),
        lambda: reader.seekable(),
        lambda: reader.write(b"x"),
    ]:
        await _raises(ValueError, call)
    with pytest.raises(ValueError):
        async with reader:
            pass


async def test_a_writer_writes_only_and_is_closed_after_close(dfs: Client) -> None:
    writer = await dfs.open("/w", "wb")
    assert isinstance(writer, FileWriter)
    assert (writer.readable(), writer.writable(), writer.seekable()) == (False, True, False)
    await writer.write(b"abc")
    await writer.write(bytearray(b"defg"))
    assert writer.tell() == 7
    for call in [
        lambda: writer.read(),
        lambda: writer.readinto(bytearray(2)),
        lambda: writer.seek(0),
    ]:
        await _raises(io.UnsupportedOperation, call)
    await writer.close()
    for call in [
        lambda: writer.write(b"more"),
        lambda: writer.tell(),
        lambda: writer.writable(),
        lambda: writer.read(),
    ]:
        await _raises(ValueError, call)
    assert await dfs.read_file("/w") == b"abcdefg"


def test_the_sync_facade_raises_the_same(data_cluster: DataCluster) -> None:
    with SyncClient(data_cluster.namenode.address) as fs:
        with fs.open("/s", "wb") as w:
            assert w.writable() and not w.readable() and not w.seekable()
            w.write(b"hello world")
            assert w.tell() == 11
            with pytest.raises(io.UnsupportedOperation):
                w.read()
            with pytest.raises(io.UnsupportedOperation):
                w.seek(0)
        with pytest.raises(ValueError):
            w.write(b"x")
        with fs.open("/s") as r:
            assert r.readable() and r.seekable() and not r.writable()
            with pytest.raises(io.UnsupportedOperation):
                r.write(b"x")
            with pytest.raises(ValueError):
                r.seek(0, 3)
            with pytest.raises(TypeError):
                r.seek(1.5)
            with pytest.raises(ValueError):
                r.seek(-1)
            with pytest.raises(InvalidArgumentError):
                r.pread(-1, 5)
            r.seek(-5, os.SEEK_END)
            assert r.read() == b"world"
            buffer = bytearray(5)
            r.seek(0)
            assert r.readinto(buffer) == 5 and buffer == b"hello"
        assert r.closed
        for call in [r.read, r.tell, lambda: r.seek(0), lambda: r.readinto(bytearray(1))]:
            with pytest.raises(ValueError):
                call()
        with pytest.raises(ValueError), r:
            pass
