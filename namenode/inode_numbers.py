"""Inode numbers for new files and directories, taken from PostgreSQL's inode_numbers
sequence a batch at a time (so most creates ask PostgreSQL nothing), and reserved
ahead for clients that name their own creates (ReserveInodes)."""

from __future__ import annotations

import asyncio
from typing import Protocol

INODE_BATCH = 1024  # the inode_numbers sequence's increment


class InodeSequence(Protocol):
    """Where batches of numbers come from (the store)."""

    async def reserve_inode_numbers(self) -> int:
        """The first of INODE_BATCH numbers nobody else will be given."""
        ...


class InodeNumbers:
    """Hands out inode numbers no other create (on this or any namenode) gets."""

    def __init__(self, sequence: InodeSequence) -> None:
        self._sequence = sequence
        self._next = 0
        self._end = 0
        self._refill = asyncio.Lock()

    async def next(self) -> int:
        """A new inode number."""
        if self._next >= self._end:
            async with self._refill:
                if self._next >= self._end:
                    base = await self._sequence.reserve_inode_numbers()
                    self._next, self._end = base, base + INODE_BATCH
        ino = self._next
        self._next += 1
        return ino

    async def reserve(self, count: int) -> list[int]:
        """`count` new inode numbers, for a client to give the files it creates."""
        return [await self.next() for _ in range(count)]
