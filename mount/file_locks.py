"""File locks asked by the kernel (fcntl, OFD locks, flock), kept by the namenode so
that they hold between mounts on different hosts.

Each request carries the kernel's lock owner: a process for fcntl's locks, an open
file description for OFD and flock locks. close(2) ends a process's POSIX locks on
the file (the kernel leaves that to the mount's flush, with the closing owner); the
last close of a description ends its OFD and flock locks, which the mount knows by
the owners that locked through it. A waiting request ends with EINTR when the
kernel interrupts it (a signal to the waiting process), even if the interrupt
arrives before the request's handler runs.

Needs pyfuse3 built with the lock handlers (scripts/pyfuse3-with-locks); without
them the kernel keeps the locks on this host alone.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
from collections.abc import Awaitable

import pyfuse3

from plasmafs.client import Client
from plasmafs.client.file_locks import EOF, FLOCK, POSIX, READ, UNLOCK, WRITE
from plasmafs.core.errors import PlasmaError
from plasmafs.mount.fuse_values import answer, fuse_error
from plasmafs.mount.shared_maps import maps_shared

log = logging.getLogger(__name__)

MAX_EARLY_INTERRUPTS = 1024
_TYPES = {fcntl.F_RDLCK: READ, fcntl.F_WRLCK: WRITE, fcntl.F_UNLCK: UNLOCK}
_FLOCK_TYPES = {fcntl.LOCK_SH: READ, fcntl.LOCK_EX: WRITE, fcntl.LOCK_UN: UNLOCK}
_KERNEL_TYPES: dict[int, int] = {READ: fcntl.F_RDLCK, WRITE: fcntl.F_WRLCK}

Held = tuple[int, int, int]  # (inode, family, owner)


def locks_cross_hosts() -> bool:
    """Whether this pyfuse3 passes lock requests to the mount."""
    return getattr(pyfuse3.Operations, "locks_patch_level", None) is not None


class KernelLocks:
    """The mount's part in file locks: the kernel's requests to the namenode's, and
    which open file took which owner's locks."""

    def __init__(self, fs: Client) -> None:
        self.fs = fs
        self.device: str | None = None  # the mount's "major:minor", once mounted
        self._through: dict[int, set[Held]] = {}  # open file (fh) -> what it locked
        self._waits: dict[int, asyncio.Task[None]] = {}  # kernel request -> its wait
        self._interrupted: dict[int, None] = {}  # requests interrupted before their wait

    async def refuse_mapping_between_hosts(self, ino: int, pid: int) -> None:
        """EIO if process `pid` maps `ino` shared while another mount or client holds a
        lock on it. A file locked elsewhere is opened without the page cache, and the
        kernel refuses to map it; this catches the hosts that opened it before either
        locked it, at their next lock (SQLite then says "disk I/O error" instead of
        reading another host's stale WAL index)."""
        if self.device is None or not await asyncio.to_thread(maps_shared, pid, self.device, ino):
            return
        held = await asyncio.gather(
            *(
                answer(self.fs.test_lock(ino, WRITE, family=family, others_only=True))
                for family in (POSIX, FLOCK)
            )
        )
        if any(lock is not None for lock in held):
            log.warning(
                "inode %d: a lock refused to process %d, which maps the file shared while "
                "another host locks it (a mapping is coherent on one host only)",
                ino,
                pid,
            )
            raise pyfuse3.FUSEError(errno.EIO)

    async def test(
        self, ino: int, owner: int, kind: int, start: int, end: int
    ) -> tuple[int, int, int, int] | None:
        """F_GETLK: the conflicting lock as (type, start, end, pid), or None."""
        found = await answer(
            self.fs.test_lock(ino, _type(kind), owner=owner, start=start, end=min(end, EOF))
        )
        if found is None:
            return None
        return _KERNEL_TYPES[found.type], found.start, found.end, found.pid

    async def set(
        self,
        fh: int,
        ino: int,
        owner: int,
        kind: int,
        span: tuple[int, int],
        pid: int,
        *,
        wait: bool,
        request: int,
    ) -> None:
        """F_SETLK/F_SETLKW of a POSIX (or OFD) lock."""
        start, end = span
        wanted = _type(kind)
        change = self.fs.set_lock(
            ino, wanted, owner=owner, start=start, end=min(end, EOF), wait=wait, pid=pid
        )
        await self._asked(change, request, wait)
        if wanted != UNLOCK:  # a close then has locks to end
            self._through.setdefault(fh, set()).add((ino, POSIX, owner))

    async def flock(self, fh: int, ino: int, owner: int, op: int, pid: int, request: int) -> None:
        """flock(2): LOCK_SH, LOCK_EX or LOCK_UN, waiting unless LOCK_NB."""
        kind = _FLOCK_TYPES.get(op & ~fcntl.LOCK_NB)
        if kind is None:
            raise pyfuse3.FUSEError(errno.EINVAL)
        wait = not op & fcntl.LOCK_NB
        change = self.fs.set_lock(ino, kind, family=FLOCK, owner=owner, wait=wait, pid=pid)
        await self._asked(change, request, wait)
        if kind != UNLOCK:
            self._through.setdefault(fh, set()).add((ino, FLOCK, owner))

    async def closed(self, ino: int, owner: int) -> None:
        """close(2) by lock owner `owner`: its POSIX locks on `ino` end."""
        held = (ino, POSIX, owner)
        if not any(held in locked for locked in self._through.values()):
            return
        for locked in self._through.values():
            locked.discard(held)
        await answer(self.fs.release_locks(ino, family=POSIX, owner=owner))

    async def released(self, fh: int) -> None:
        """The last close of open file `fh`: its OFD and flock locks end."""
        for ino, family, owner in self._through.pop(fh, ()):
            await answer(self.fs.release_locks(ino, family=family, owner=owner))

    def locked_through(self, fh: int) -> bool:
        """Whether locks were taken through open file `fh`."""
        return bool(self._through.get(fh))

    def interrupted(self, request: int) -> None:
        """The kernel interrupted request `request`: its wait ends with EINTR."""
        task = self._waits.get(request)
        if task is not None:
            task.cancel()
            return
        self._interrupted[request] = None
        while len(self._interrupted) > MAX_EARLY_INTERRUPTS:
            del self._interrupted[next(iter(self._interrupted))]

    async def _asked(self, change: Awaitable[None], request: int, wait: bool) -> None:
        if not wait:
            await answer(change)
            return
        if request in self._interrupted:
            del self._interrupted[request]
            close_unstarted(change)
            raise pyfuse3.FUSEError(errno.EINTR)
        task = asyncio.ensure_future(change)
        self._waits[request] = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the mount is going away
            raise pyfuse3.FUSEError(errno.EINTR) from None
        except PlasmaError as exc:
            raise fuse_error(exc) from None
        finally:
            if self._waits.get(request) is task:
                del self._waits[request]


def _type(kind: int) -> int:
    found = _TYPES.get(kind)
    if found is None:
        raise pyfuse3.FUSEError(errno.EINVAL)
    return found


def close_unstarted(work: Awaitable[object]) -> None:
    """Close a coroutine that will never be awaited (no "never awaited" warning)."""
    close = getattr(work, "close", None)
    if close is not None:
        close()
