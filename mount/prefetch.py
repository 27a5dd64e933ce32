"""Read-ahead for files read from start to end through the mount.

The kernel asks for at most 128 KiB per read; fetching each from a datanode costs a
round trip (a request to the local datanode's shared memory, or a gRPC call) and a
disk read of that size. Once reads go sequentially, a file's reads are served from
chunks of CHUNK bytes fetched ahead, AHEAD of them beyond the one being read, each
one request to the datanodes. Random reads (those that do not continue where the
last one ended) go straight to the reader and fetch nothing ahead.

The chunks come from one reader, so they hold the version the file had when it was
opened, as every read of that open file does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

CHUNK = 2 * 1024 * 1024  # bytes fetched by one request ahead of the reads
AHEAD = 3  # chunks fetched beyond the one being read


class Prefetch:
    """The chunks fetched ahead for one open file of `size` bytes, read with
    `fetch(offset, length)`."""

    def __init__(self, fetch: Callable[[int, int], Awaitable[bytes]], size: int) -> None:
        self._fetch = fetch
        self._size = size
        self._chunks: dict[int, asyncio.Task[bytes]] = {}  # chunk index -> its fetch
        self._next = 0  # where a sequential read would start
        self._streaming = False

    async def read(self, offset: int, size: int) -> bytes | memoryview:
        """Up to `size` bytes at `offset`, fewer at the end of the file (a view into a
        fetched chunk: the reply to the kernel is copied from it, so a slice of bytes
        would copy every byte twice)."""
        end = min(offset + size, self._size)
        sequential = offset == self._next or self._covered(offset)
        self._next = end
        if offset >= end:
            return b""
        if not sequential:
            self._streaming = False
            return await self._fetch(offset, end - offset)
        self._streaming = True
        first, last = offset // CHUNK, (end - 1) // CHUNK
        self._drop_before(first - 1)  # one kept behind: read-ahead requests overtake
        for index in range(first, min(last + AHEAD, self._last_chunk()) + 1):
            self._start(index)
        parts = [await self._chunk(index) for index in range(first, last + 1)]
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        skip = offset - first * CHUNK
        if skip == 0 and end - offset == len(data):
            return data
        return memoryview(data)[skip : skip + end - offset]

    def start(self) -> None:
        """Fetch the first chunk now, ahead of a read from the start."""
        if self._size > 0:
            self._start(0)

    async def close(self) -> None:
        """Stop fetching and wait until every fetch has ended (the reader they use
        closes next); what was fetched is let go."""
        tasks = list(self._chunks.values())
        self._drop_before(self._last_chunk() + 1)
        await asyncio.gather(*tasks, return_exceptions=True)

    def _covered(self, offset: int) -> bool:
        """True if `offset` falls in a chunk being fetched for a sequential reader (the
        kernel sends its read-ahead requests concurrently, not strictly in order)."""
        return self._streaming and offset // CHUNK in self._chunks

    def _last_chunk(self) -> int:
        return max(self._size - 1, 0) // CHUNK

    def _start(self, index: int) -> None:
        if index not in self._chunks:
            start = index * CHUNK
            length = min(CHUNK, self._size - start)
            self._chunks[index] = asyncio.ensure_future(self._fetch(start, length))

    async def _chunk(self, index: int) -> bytes:
        task = self._chunks[index]
        try:
            return await asyncio.shield(task)
        except Exception:
            # A failed fetch is not kept: the next read of the chunk tries again.
            if self._chunks.get(index) is task:
                del self._chunks[index]
            raise

    def _drop_before(self, index: int) -> None:
        for old in [i for i in self._chunks if i < index]:
            task = self._chunks.pop(old)
            task.cancel()
            task.add_done_callback(_forget)


def _forget(task: asyncio.Task[bytes]) -> None:
    """Take a dropped fetch's outcome, so that its failure is not reported as lost."""
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()
