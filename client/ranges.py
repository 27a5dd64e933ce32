"""Many byte ranges of many files at once: each file is opened once (its block list and
read tickets come in one namenode request), then its ranges are read from the
datanodes alone, several at a time. Ranges are slices: None runs to an end of the
file, a negative offset counts from its end."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from plasmafs.client.client import Client
from plasmafs.client.file_reader import FileReader

RANGE_READS = 32  # ranges read at once

Range = tuple[str, int | None, int | None]  # path, start, end (as a slice's)


def slice_limits(start: int | None, end: int | None, size: int) -> tuple[int, int]:
    """[start, end) of a file of `size` bytes as offsets, clamped to the file."""
    first = 0 if start is None else (size + start if start < 0 else start)
    last = size if end is None else (size + end if end < 0 else end)
    first = min(max(first, 0), size)
    return first, max(first, min(last, size))


async def read_ranges(fs: Client, ranges: Sequence[Range]) -> list[bytes | BaseException]:
    """The bytes of each range, or the error that reading it raised, in order."""
    readers: dict[str, asyncio.Task[FileReader]] = {}
    room = asyncio.Semaphore(RANGE_READS)

    async def opened(path: str) -> FileReader:
        reader = await fs.open(path, "rb")
        assert isinstance(reader, FileReader)
        return reader

    async def one(path: str, start: int | None, end: int | None) -> bytes:
        if path not in readers:
            readers[path] = asyncio.ensure_future(opened(path))
        reader = await readers[path]
        first, last = slice_limits(start, end, reader.size)
        async with room:
            return await reader.pread(first, last - first)

    try:
        return await asyncio.gather(*(one(*r) for r in ranges), return_exceptions=True)
    finally:
        for task in readers.values():
            if task.done() and not task.cancelled() and task.exception() is None:
                await task.result().close()
