"""The mount's read-ahead: whole chunks for sequential readers, exact ranges for random
ones, the same bytes either way."""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from plasmafs.core.errors import UnavailableError
from plasmafs.mount.prefetch import AHEAD, CHUNK, Prefetch

KIB = 1024


class Source:
    """A file's bytes, with every fetch recorded; `fail_once` fails the first fetch
    that starts at that offset."""

    def __init__(self, size: int, fail_once: int | None = None) -> None:
        self.data = os.urandom(size)
        self.fetches: list[tuple[int, int]] = []
        self.running = 0
        self._fail_once = fail_once

    async def fetch(self, offset: int, length: int) -> bytes:
        self.fetches.append((offset, length))
        self.running += 1
        try:
            await asyncio.sleep(0)  # as a datanode round trip would, let others run
            if offset == self._fail_once:
                self._fail_once = None
                raise UnavailableError("the datanode went away")
            return self.data[offset : offset + length]
        finally:
            self.running -= 1


async def test_a_sequential_reader_gets_its_bytes_from_whole_chunks() -> None:
    source = Source(3 * CHUNK + 12345)
    prefetch = Prefetch(source.fetch, len(source.data))
    out = bytearray()
    while len(out) < len(source.data):
        piece = await prefetch.read(len(out), 128 * KIB)
        assert piece
        out += piece
    assert bytes(out) == source.data
    assert await prefetch.read(len(out), 128 * KIB) == b""  # the end
    assert sorted(source.fetches) == [(i * CHUNK, CHUNK) for i in range(3)] + [(3 * CHUNK, 12345)]
    await prefetch.close()


async def test_a_read_inside_a_chunk_is_a_view_of_it_not_a_copy() -> None:
    source = Source(CHUNK)
    prefetch = Prefetch(source.fetch, len(source.data))
    first = await prefetch.read(0, 512 * KIB)
    second = await prefetch.read(512 * KIB, 512 * KIB)
    assert isinstance(first, memoryview) and isinstance(second, memoryview)
    assert first.obj is second.obj  # the one chunk fetched
    assert bytes(first) + bytes(second) == source.data[: 1024 * KIB]
    whole = Prefetch(source.fetch, len(source.data))
    assert await whole.read(0, CHUNK) is source.data  # all of it: the chunk itself
    await prefetch.close()
    await whole.close()


async def test_random_reads_fetch_exactly_what_they_ask_for() -> None:
    source = Source(4 * CHUNK)
    prefetch = Prefetch(source.fetch, len(source.data))
    for offset in (3 * CHUNK + 100, CHUNK + 7, 2 * CHUNK - 5):
        assert await prefetch.read(offset, 4096) == source.data[offset : offset + 4096]
    assert source.fetches == [(3 * CHUNK + 100, 4096), (CHUNK + 7, 4096), (2 * CHUNK - 5, 4096)]
    await prefetch.close()


async def test_read_ahead_requests_that_overtake_each_other_read_the_right_bytes() -> None:
    source = Source(6 * CHUNK)
    prefetch = Prefetch(source.fetch, len(source.data))
    assert await prefetch.read(0, 128 * KIB) == source.data[: 128 * KIB]
    rng = random.Random(3)
    position = 128 * KIB
    while position < len(source.data):
        # The kernel's read-ahead: a window of requests in flight at once, in any order.
        window = list(range(position, position + 8 * 128 * KIB, 128 * KIB))
        window = [o for o in window if o < len(source.data)]
        rng.shuffle(window)
        pieces = await asyncio.gather(*(prefetch.read(o, 128 * KIB) for o in window))
        for offset, piece in zip(window, pieces, strict=True):
            assert piece == source.data[offset : offset + 128 * KIB]
        position += 8 * 128 * KIB
    assert all(length == CHUNK and offset % CHUNK == 0 for offset, length in source.fetches)
    await prefetch.close()


async def test_at_most_a_few_chunks_are_held_or_fetched_ahead() -> None:
    source = Source(40 * CHUNK)
    prefetch = Prefetch(source.fetch, len(source.data))
    for offset in range(0, 20 * CHUNK, 128 * KIB):
        await prefetch.read(offset, 128 * KIB)
        assert len(prefetch._chunks) <= AHEAD + 2
    assert max(offset for offset, _ in source.fetches) <= (19 + AHEAD) * CHUNK
    await prefetch.close()


async def test_a_failed_fetch_fails_the_read_and_the_next_read_fetches_again() -> None:
    source = Source(2 * CHUNK, fail_once=0)
    prefetch = Prefetch(source.fetch, len(source.data))
    with pytest.raises(UnavailableError):
        await prefetch.read(0, 128 * KIB)
    assert await prefetch.read(0, 128 * KIB) == source.data[: 128 * KIB]
    assert [offset for offset, _ in source.fetches].count(0) == 2  # not kept failed
    await prefetch.close()


async def test_close_ends_every_fetch_and_reports_no_lost_failure() -> None:
    source = Source(10 * CHUNK, fail_once=2 * CHUNK)
    prefetch = Prefetch(source.fetch, len(source.data))
    await prefetch.read(0, 4096)  # starts fetching the chunks ahead, one of which fails
    await prefetch.close()
    assert source.running == 0
    assert not prefetch._chunks
