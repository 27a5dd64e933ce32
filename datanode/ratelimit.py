"""A byte-rate limit shared by the tasks that take from it (the copies of one datanode,
or its scrub)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class RateLimit:
    """At most `rate` bytes per second over time for everyone who calls `take`; 0 means
    unlimited. Each take reserves the next free slot of the timeline and waits until it
    starts, so concurrent takers share the rate in arrival order and an idle spell earns
    no burst."""

    def __init__(
        self,
        rate: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.rate = rate
        self.taken = 0  # bytes granted so far
        self.waited = 0.0  # seconds takers were asked to wait, in total
        self._clock = clock
        self._sleep = sleep
        self._free_at = 0.0

    async def take(self, nbytes: int) -> None:
        """Wait until `nbytes` more fit the rate, then count them as taken."""
        if self.rate > 0:
            now = self._clock()
            start = max(now, self._free_at)
            self._free_at = start + nbytes / self.rate
            if start > now:
                self.waited += start - now
                await self._sleep(start - now)
        self.taken += nbytes
