"""The `WriteBehind` of a mount without write-behind (`-o nowrite_behind`): no
directory is leased and nothing is queued, so every change goes to the namenode at
once and the namenode answers every lookup."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from plasmafs.client import At, Client
from plasmafs.core.attributes import Attr
from plasmafs.mount.writebehind import LeasedDir


class DirectWrites:
    """Every change straight to the namenode (see the module's docstring)."""

    unsent: frozenset[int] = frozenset()  # nothing is ever queued
    before_release: Callable[[set[int]], Awaitable[None]] | None = None

    def __init__(self, fs: Client) -> None:
        self.fs = fs

    def leased(self, ino: int) -> LeasedDir | None:
        """None: no directory is leased."""
        return None

    async def lease_existing(self, ino: int) -> LeasedDir | None:
        """None: no directory is leased."""
        return None

    def attr(self, ino: int) -> Attr | None:
        """None: the namenode has every attribute."""
        return None

    async def mkdir(self, parent: int, name: str, mode: int) -> Attr:
        """A new directory, made now."""
        return await self.fs.mkdir(At(parent, name), mode)

    async def remove(self, parent: int, name: str, *, directory_wanted: bool) -> Attr:
        """Never asked: `removable_here` is always False."""
        raise AssertionError("no directory is leased without write-behind")

    def queues_here(self, directory: LeasedDir) -> bool:
        """False: nothing is queued."""
        return False

    def removable_here(self, parent: int, name: str) -> bool:
        """False: every removal goes to the namenode."""
        return False

    def update(self, attr: Attr) -> None:
        """No table to update."""

    def relinked(self, attr: Attr) -> None:
        """No table to update."""

    def forget_entry(self, parent: int, name: str) -> None:
        """No table to update."""

    def known(self, parent: int, name: str, attr: Attr) -> None:
        """No table to update."""

    async def send(self) -> None:
        """Nothing queued to send."""

    async def send_reporting(self) -> None:
        """Nothing queued to send, no failure to report."""

    async def release(self, dirs: list[int]) -> None:
        """No lease to let go of."""

    async def close(self) -> None:
        """No lease to let go of."""
