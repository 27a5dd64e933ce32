"""A load of creates, one transaction each, that keeps going across namenode crashes
and failovers and remembers which creates were acknowledged (so a test can check that
none of them is lost)."""

from __future__ import annotations

import asyncio
import contextlib
import time

from plasmafs.client import Client, PlasmaError


class CreateLoad:
    """Creates files one transaction each through a namenode, reconnecting on failures,
    and remembers which creates were acknowledged."""

    def __init__(self, address: str, directory: str = "/load", *, durable: bool = True) -> None:
        self.address = address  # one namenode, or several comma-separated
        self.directory = directory
        self.durable = durable  # False: relaxed commits (acknowledged before the WAL flush)
        self.acknowledged: list[str] = []
        self.acknowledged_at: list[float] = []  # time.monotonic() of each
        self.failures: list[PlasmaError] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        """Start creating in the background."""
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop creating (a create under way is given up)."""
        if self._task is None or self._task.done():
            return
        self._stopping = True  # a cancellation may surface as the client's close error
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        k = 0
        while not self._stopping:
            try:
                async with Client(
                    self.address, connect_timeout=2, durable_commits=self.durable
                ) as fs:
                    while True:
                        k += 1
                        await fs.create(f"{self.directory}/f{k}")
                        self.acknowledged.append(f"f{k}")
                        self.acknowledged_at.append(time.monotonic())
            except PlasmaError as exc:
                self.failures.append(exc)
                await asyncio.sleep(0.05)  # the namenode or PostgreSQL is away: pace retries

    async def wait_for_progress(self, timeout: float = 60.0) -> None:
        """Until a create is acknowledged after this call."""
        seen = len(self.acknowledged)
        async with asyncio.timeout(timeout):
            while len(self.acknowledged) <= seen:
                await asyncio.sleep(0.02)
