"""How a `pfs` command ends: its exit statuses, the exception that says errors were
already reported one line each, and the reporter that prints them."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

from plasmafs.core.errors import PlasmaError

EXIT_FAILED = 1


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

    async def each(self, items: list[str], action: Callable[[str], Awaitable[None]]) -> None:
        for item in items:
            try:
                await action(item)
            except PlasmaError as exc:
                self.error(str(exc))
        if self.failed:
            raise CommandFailed
