"""The byte-rate limit, on a clock that only moves when a taker waits."""

from __future__ import annotations

import asyncio

from plasmafs.datanode.ratelimit import RateLimit


class FakeClock:
    """Time that advances by exactly what takers sleep."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


async def test_takers_together_get_the_rate() -> None:
    clock = FakeClock()
    limit = RateLimit(1000, clock=clock, sleep=clock.sleep)

    async def taker() -> None:
        for _ in range(10):
            await limit.take(100)

    await asyncio.gather(taker(), taker(), taker())
    assert limit.taken == 3000
    # 3000 bytes at 1000 bytes/s: the last 100-byte take starts at 2.9 s
    assert abs(clock.now - 2.9) < 1e-9


async def test_an_idle_spell_earns_no_burst() -> None:
    clock = FakeClock()
    limit = RateLimit(1000, clock=clock, sleep=clock.sleep)
    await limit.take(1000)
    clock.now += 60.0  # idle
    waited = limit.waited
    await limit.take(1000)
    assert limit.waited == waited  # its slot starts now
    await limit.take(1000)
    assert abs(limit.waited - waited - 1.0) < 1e-9


async def test_zero_means_unlimited() -> None:
    clock = FakeClock()
    limit = RateLimit(0, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        await limit.take(1 << 30)
    assert clock.now == 0.0
    assert limit.taken == 100 << 30
