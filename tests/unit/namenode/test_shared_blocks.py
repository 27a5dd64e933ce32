"""Reference counts of shared block ranges, and the gate between releasing commits and
snapshots."""

from __future__ import annotations

import asyncio

from plasmafs.namenode.shared_blocks import ReleaseGate, SharedBlocks


def test_a_range_nobody_shares_is_freed_whole() -> None:
    shared = SharedBlocks()
    assert shared.unshare(1, 10, 5) == [(10, 5)]
    assert not shared


def test_shared_blocks_are_freed_by_the_last_reference_only() -> None:
    shared = SharedBlocks()
    shared.share_all([(1, 0, 10)])  # a snapshot of a file on blocks 0-9
    assert shared.shared_blocks(1) == 10
    assert shared.unshare(1, 0, 10) == []  # the live file drops them: the snapshot keeps
    assert shared.unshare(1, 0, 10) == [(0, 10)]  # the snapshot goes: free
    assert not shared


def test_partly_shared_ranges_free_exactly_the_unshared_part() -> None:
    shared = SharedBlocks()
    shared.share_all([(1, 4, 4)])
    shared.share_all([(1, 6, 4)])  # blocks 6-7 shared three times, 4-5 and 8-9 twice
    assert shared.extra_blocks() == 2 + 2 * 2 + 2
    assert shared.unshare(1, 0, 12) == [(0, 4), (10, 2)]
    assert shared.freed_by([(1, 0, 12)]) == [(1, 0, 6), (1, 8, 4)]  # counts unchanged
    assert shared.unshare_all([(1, 4, 6)]) == [(1, 4, 2), (1, 8, 2)]
    assert shared.unshare(1, 6, 2) == [(6, 2)]
    assert not shared


def test_counts_are_rebuilt_from_extent_rows() -> None:
    rows = [(1, 0, 8), (1, 0, 8), (1, 4, 2), (2, 0, 3), (2, 3, 3)]
    shared = SharedBlocks.from_rows(rows)
    assert shared.shared_blocks(1) == 8 and shared.shared_blocks(2) == 0
    assert shared.unshare(1, 0, 8) == []
    assert shared.unshare(1, 4, 2) == []
    assert shared.unshare(1, 0, 8) == [(0, 8)]


def test_datanodes_are_counted_apart() -> None:
    shared = SharedBlocks()
    shared.share_all([(1, 0, 4), (2, 0, 4)])
    shared.forget(2)
    assert shared.unshare(2, 0, 4) == [(0, 4)]
    assert shared.unshare(1, 0, 4) == []


async def test_the_gate_keeps_snapshots_and_releases_apart() -> None:
    gate = ReleaseGate()
    order: list[str] = []

    async def release(name: str, hold: float) -> None:
        async with gate.shared():
            order.append(f"{name}+")
            await asyncio.sleep(hold)
            order.append(f"{name}-")

    async def snapshot() -> None:
        async with gate.exclusive():
            order.append("snap+")
            await asyncio.sleep(0.01)
            order.append("snap-")

    first = asyncio.create_task(release("a", 0.02))
    await asyncio.sleep(0)
    taking = asyncio.create_task(snapshot())
    await asyncio.sleep(0)
    later = asyncio.create_task(release("b", 0))  # waits behind the waiting snapshot
    await asyncio.gather(first, taking, later)
    assert order == ["a+", "a-", "snap+", "snap-", "b+", "b-"]


async def test_a_cancelled_exclusive_wait_lets_shared_holders_in() -> None:
    gate = ReleaseGate()
    async with gate.shared():
        waiting = asyncio.create_task(gate.exclusive().__aenter__())
        await asyncio.sleep(0)
        blocked = asyncio.create_task(gate.shared().__aenter__())
        await asyncio.sleep(0)
        assert not blocked.done()
        waiting.cancel()
        async with asyncio.timeout(1):
            await blocked
