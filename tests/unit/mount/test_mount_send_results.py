"""The write-behind's answers of one send (`transaction.results_of`): every change's
result or failure in order, awaited in the sending task, and a cancelled send leaves
no coroutine behind unawaited."""

from __future__ import annotations

import asyncio
import gc
import warnings

from plasmafs.client.transaction import results_of
from plasmafs.core.errors import ExistsError


async def _answer(value: object, delay: float = 0.0) -> object:
    await asyncio.sleep(delay)
    if isinstance(value, Exception):
        raise value
    return value


async def test_each_result_or_failure_in_order() -> None:
    refused = ExistsError("taken")
    results = await results_of(_answer(1, 0.02), _answer(refused), _answer(3), _answer(None))
    assert results == [1, refused, 3, None]


async def test_no_task_per_answer() -> None:
    before = len(asyncio.all_tasks())
    seen: list[int] = []

    async def counting(k: int) -> int:
        seen.append(len(asyncio.all_tasks()))
        await asyncio.sleep(0)
        return k

    assert await results_of(*(counting(k) for k in range(100))) == list(range(100))
    assert max(seen) == before


async def test_a_cancelled_send_closes_the_answers_it_did_not_reach() -> None:
    started = asyncio.Event()

    async def first() -> None:
        started.set()
        await asyncio.sleep(60)

    sending = asyncio.create_task(results_of(first(), _answer(2), _answer(3)))
    await started.wait()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sending.cancel()
        await asyncio.wait([sending])
        assert sending.cancelled()
        del sending  # and with it the send's frame and its answers
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
