"""The signing keys of access keys, asked of the namenode and kept for a minute.

A key is good for one day and region; keeping it a minute bounds how long a revoked
access key still works at this gateway. Unknown or revoked keys are asked again each
time (a flood of them costs namenode calls, never a wrong answer).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from plasmafs.client.s3_keys import SigningKey
from plasmafs.core.errors import NotFoundError, OperationNotPermittedError, PlasmaError
from plasmafs.gateway.s3_errors import S3Error, from_plasma

KEEP_SECONDS = 60.0
MAX_KEPT = 10_000

Fetch = Callable[[str, str, str], Awaitable[SigningKey]]


class SigningKeys:
    """A cache in front of `fetch(access_key_id, date, region)`."""

    def __init__(self, fetch: Fetch, keep: float = KEEP_SECONDS) -> None:
        self._fetch = fetch
        self._keep = keep
        self._kept: dict[tuple[str, str, str], tuple[float, SigningKey]] = {}
        self._asking: dict[tuple[str, str, str], asyncio.Future[SigningKey]] = {}

    async def get(self, access_key_id: str, date: str, region: str) -> SigningKey:
        """The signing key; S3Error InvalidAccessKeyId for an unknown or revoked key."""
        wanted = (access_key_id, date, region)
        kept = self._kept.get(wanted)
        now = time.monotonic()
        if kept is not None and now - kept[0] < self._keep:
            return kept[1]
        asking = self._asking.get(wanted)
        if asking is None:
            asking = self._asking[wanted] = asyncio.ensure_future(self._ask(wanted))
            asking.add_done_callback(lambda _: self._asking.pop(wanted, None))
        return await asyncio.shield(asking)

    async def _ask(self, wanted: tuple[str, str, str]) -> SigningKey:
        try:
            key = await self._fetch(*wanted)
        except NotFoundError:
            raise S3Error(
                "InvalidAccessKeyId",
                403,
                "The AWS Access Key Id you provided does not exist in our records.",
            ) from None
        except OperationNotPermittedError as exc:
            raise S3Error(
                "InternalError", 500, f"this gateway's credential may not act for the key: {exc}"
            ) from None
        except PlasmaError as exc:
            raise from_plasma(exc) from None
        if len(self._kept) >= MAX_KEPT:
            self._kept.clear()
        self._kept[wanted] = (time.monotonic(), key)
        return key
