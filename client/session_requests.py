"""Requests about a connection's own namenode session: inode numbers reserved for the
files and directories it will create, and the directory leases it holds.

A directory made with `Transaction.mkdir(..., lease=True)` is leased to the session
of the connection that made it: until released, only that session reads or changes
its entries, so a client may answer for them itself and send its changes later, in
batches. Others that need the directory wait; `lease_news` tells the holder so, and
the holder releases the lease once it sent what it had pending. The namenode takes a
lease away after its recall timeout; reservations and leases end with the connection.
"""

from __future__ import annotations

from plasmafs.client.transaction import CommittedReads, _u64
from plasmafs.core.errors import InvalidArgumentError

MAX_RESERVE = 65536  # inode numbers one request reserves at most


class SessionRequests(CommittedReads):
    """Session requests on one connection (outside transactions)."""

    async def reserve_inodes(self, count: int) -> list[int]:
        """`count` inode numbers for creates and mkdirs of this connection (`ino`)."""
        if not 0 < count <= MAX_RESERVE:
            raise InvalidArgumentError(f"reserve 1 to {MAX_RESERVE} inode numbers, not {count}")
        request, future = self._new()
        request.reserve_inodes.count = count
        return list((await self._result(future)).inodes.inos)

    async def release_leases(self, dirs: list[int]) -> None:
        """Let go of the leases on `dirs` (others are ignored)."""
        _u64(**{f"dir {i}": d for i, d in enumerate(dirs)})
        request, future = self._new()
        request.release_leases.dirs.extend(dirs)
        await self._result(future)

    async def lease_dir(self, ino: int) -> None:
        """Lease existing directory `ino`, which this user owns (BusyError while another
        session leases it or a transaction has changes under way in it); list it
        afterwards to know its entries."""
        _u64(dir=ino)
        request, future = self._new()
        request.lease_dir.dir = ino
        await self._result(future)

    async def lease_news(self, wait: float) -> tuple[list[int], list[int]]:
        """The leased directories others recalled (release them once what is pending in
        them is sent) and those taken away since the last call, waiting up to `wait`
        seconds (at most 60) for some."""
        if not 0 <= wait <= 60:
            raise InvalidArgumentError(f"wait {wait} is not between 0 and 60 seconds")
        request, future = self._new()
        request.lease_news.wait_ms = int(wait * 1000)
        news = (await self._result(future)).lease_news
        return list(news.recalled), list(news.revoked)
