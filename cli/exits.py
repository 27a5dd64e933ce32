"""How a `pfs` command ends: its exit statuses, the exception that says errors were
already reported one line each, and the reporter that prints them."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

from plasmafs.core.errors import FAILOVER_ERRORS, PlasmaError

EXIT_FAILED = 1
FAILOVER_ATTEMPTS = 3  # tries of one path of a repeatable command cut by a failover


class CommandFailed(Exception):
    """Some paths failed; their errors were printed already."""


class Reporter:
    """Prints errors the coreutils way and remembers that one happened."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.failed = False

    def error(self, message: str) -> None:
        print(f"pfs: {self.command}: {message}", file=sys.stderr)
        self.failed = True

    async def each(
        self,
        items: list[str],
        action: Callable[[str], Awaitable[None]],
        *,
        repeatable: bool = False,
    ) -> None:
        """`action` on every item, reporting each failure and going on; a `repeatable`
        action (doing it twice is doing it once: mkdir -p, chmod, chown, touch) cut by
        a failover is done again (the client waits for the new active namenode)."""
        for item in items:
            for attempt in range(1, FAILOVER_ATTEMPTS + 1):
                try:
                    await action(item)
                except FAILOVER_ERRORS as exc:
                    if repeatable and attempt < FAILOVER_ATTEMPTS:
                        continue
                    self.error(str(exc))
                except PlasmaError as exc:
                    self.error(str(exc))
                break
        if self.failed:
            raise CommandFailed
