"""The trash's emptier: what users removed stays a while in /.Trash, then goes.

A remove through the library, the CLI or fsspec moves the entry into its remover's
trash, `/.Trash/<user>/Current/<its path>` (client/trash.py): restoring it is a rename
back. The active namenode makes `/.Trash` (root's, mode 1777: anyone may make their
own trash in it, no one touch another's) and, every `period` seconds, turns each
user's `Current` into a checkpoint named by the time (`YYMMDDHHMMSS`, UTC, as HDFS
names them) and deletes the checkpoints older than the trash interval: a removed entry
goes between `interval` and `interval + period` after its removal. A checkpoint is
deleted in transactions of BATCH removals, files first as one walk finds them, then
its directories deepest first, as the superuser; the walk resumes where it was after
each batch, so a huge tree costs a few round trips to PostgreSQL per thousand entries.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import ExistsError, NotFoundError, PlasmaError
from plasmafs.core.trash_names import CURRENT, TRASH, checkpoint_name, expired
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.principals import SUPERUSER
from plasmafs.namenode.startup import NamespaceParts
from plasmafs.namenode.transaction import Txn

log = logging.getLogger(__name__)

BATCH = 1000  # removals per transaction
LOCK_WAIT = 5.0  # seconds an emptier operation waits for a lock a client holds
MAX_PERIOD = 3600.0
_DIRECTORY = int(FileKind.DIRECTORY)


def checkpoint_period(interval: float) -> float:
    """How often Current becomes a checkpoint: a quarter of the interval, at most an
    hour, at least a quarter of a second."""
    return max(0.25, min(interval / 4, MAX_PERIOD))


class TrashEmptier:
    """Checkpoints and deletes what users' trashes hold, on the active namenode."""

    def __init__(self, parts: NamespaceParts, interval: float) -> None:
        self.parts = parts
        self.interval = interval
        self.period = checkpoint_period(interval)
        self.deleted = 0  # entries deleted for good
        self._txn_ids = itertools.count(1)

    async def run(self) -> None:
        """Make /.Trash, then empty it every period until cancelled; a pass that fails
        (a conflict, a lost term, PostgreSQL away) is logged and the next one tries."""
        while True:
            try:
                await self._ensure_root()
                break
            except Exception:
                log.exception("making %s failed", TRASH)
                await asyncio.sleep(self.period)
        while True:
            await asyncio.sleep(self.period)
            try:
                await self.pass_once(time.time())
            except Exception:
                log.exception("emptying the trash stopped early")

    async def pass_once(self, now: float) -> None:
        """Checkpoint every user's Current, then delete the checkpoints past the interval."""
        stamp = checkpoint_name(now)
        users = await self._directories(TRASH)
        if users is None:  # removed by a superuser: made again
            await self._ensure_root()
            return
        for user in users:
            try:
                await self._empty(f"{TRASH}/{user}", stamp, now)
            except PlasmaError as exc:  # one user's trash in the way: the others go on
                log.warning("emptying %s/%s stopped early: %s", TRASH, user, exc)

    async def _empty(self, home: str, stamp: str, now: float) -> None:
        """Checkpoint one user's Current and delete their checkpoints past the interval."""
        names = await self._directories(home) or []
        if CURRENT in names and stamp not in names:
            current, checkpoint = f"{home}/{CURRENT}", f"{home}/{stamp}"
            await self._change(partial(self._rename, src=current, dst=checkpoint))
        for name in expired(names, now, self.interval):
            await self.delete_tree(f"{home}/{name}")

    async def delete_tree(self, path: str) -> None:
        """Delete `path` and everything below it, BATCH removals per transaction."""
        namespace = self.parts.namespace
        directories: list[str] = []
        kept: list[str] = []  # directories with snapshots: they stay until those are deleted
        after: list[str] = []
        while True:
            items, more = await self.parts.subtrees.walk(SUPERUSER, _place(path), after, BATCH)
            files = []
            for item in items:
                full = f"{path}/{item.path}" if item.path else path
                if item.inode.kind == _DIRECTORY:
                    directories.append(full)
                    if item.inode.ino in namespace.snapshotted:
                        kept.append(full)
                else:
                    files.append(full)
            if files:
                await self._change(partial(self._each, paths=files, remove=namespace.unlink))
            if not more or not items:
                break
            after = items[-1].path.split("/")
        directories.reverse()  # the walk lists a directory before what it holds
        if kept:
            log.warning("trash: kept %s: it has snapshots (delete them to free it)", kept)
            directories = [
                d for d in directories if not any(k == d or k.startswith(d + "/") for k in kept)
            ]
        for start in range(0, len(directories), BATCH):
            batch = directories[start : start + BATCH]
            await self._change(partial(self._each, paths=batch, remove=namespace.rmdir))
        if not kept:
            log.info("trash: deleted %s", path)

    async def _ensure_root(self) -> None:
        async def make(t: Txn) -> None:
            with contextlib.suppress(ExistsError):
                await self.parts.namespace.mkdir(t, _place(TRASH), 0o1777)

        await self._change(make)

    async def _directories(self, path: str) -> list[str] | None:
        """The names of the directories in `path`; None if it is gone."""
        names: list[str] = []
        after: list[str] = []
        while True:
            try:
                items, more = await self.parts.subtrees.walk(
                    SUPERUSER, _place(path), after, BATCH, depth=1
                )
            except NotFoundError:
                return None
            names += [i.path for i in items if i.path and i.inode.kind == _DIRECTORY]
            if not more or not items:
                return names
            after = [items[-1].path]

    async def _rename(self, t: Txn, src: str, dst: str) -> None:
        await self.parts.namespace.rename(t, _place(src), _place(dst), noreplace=True)

    async def _each(
        self, t: Txn, paths: list[str], remove: Callable[[Txn, Place], Awaitable[None]]
    ) -> None:
        for path in paths:
            try:
                await remove(t, _place(path))
                self.deleted += 1
            except NotFoundError:
                pass  # gone meanwhile (restored, or removed by its owner)

    async def _change(self, body: Callable[[Txn], Awaitable[None]]) -> None:
        """Run `body` in a transaction of the superuser's and commit it."""
        transactions = self.parts.transactions
        txn = transactions.begin(next(self._txn_ids), "trash", LOCK_WAIT, SUPERUSER)
        try:
            await body(txn)
            await transactions.commit(txn)
        except BaseException:
            transactions.abort(txn, "the trash emptier's change failed")
            raise


def _place(path: str) -> Place:
    return Place.of(path.encode())
