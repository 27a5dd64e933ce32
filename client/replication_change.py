"""Changing the replication of existing files, as `hdfs dfs -setrep` does: one file, or
every file below a directory, and waiting until the block lists show the change.

The namenode does the copying and the removal of surplus replicas; the client only
records the new replication on each inode and, when asked to wait, watches the block
lists until every block group has exactly that many live replicas.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from plasmafs.core import paths
from plasmafs.core.attributes import DirEntry, FileKind
from plasmafs.core.errors import NotFoundError
from plasmafs.core.value_checks import check_replication

if TYPE_CHECKING:
    from plasmafs.client.client import Client
    from plasmafs.client.transaction import Transaction

BATCH = 1000  # files per transaction (and per directory page) in a tree
WAIT_BATCH = 256  # block lists asked for at once while waiting
DEFAULT_POLL = 0.5  # seconds between looks at the block lists


async def set_replication(fs: Client, path: str, replication: int) -> list[str]:
    """Set the replication of the file at `path` (symbolic links followed), or of every
    file below the directory at `path`; returns the files changed. A tree is changed a
    transaction per page of each directory, so a huge one is not one huge commit; files
    removed meanwhile are skipped."""
    check_replication(replication)
    canonical = paths.normalize(path)
    attr = await fs.stat(canonical)
    if attr.kind is not FileKind.DIRECTORY:
        await fs.setattr(attr.ino, replication=replication)
        return [canonical]
    changed: list[str] = []
    directories = [canonical]
    while directories:
        directory = directories.pop()
        after = ""
        while True:
            try:
                entries, more = await fs.readdir(directory, after=after, limit=BATCH)
            except NotFoundError:
                break  # removed while we walked
            files = [e for e in entries if e.kind is FileKind.FILE]
            if files:
                done = await _set_page(fs, files, replication)
                changed.extend(paths.join(directory, e.name) for e in done)
            directories.extend(
                paths.join(directory, e.name) for e in entries if e.kind is FileKind.DIRECTORY
            )
            if not more or not entries:
                break
            after = entries[-1].name
    return changed


async def _set_page(fs: Client, files: list[DirEntry], replication: int) -> list[DirEntry]:
    return await fs.run(lambda t: _set_all(t, files, replication))


async def _set_all(t: Transaction, files: list[DirEntry], replication: int) -> list[DirEntry]:
    """Set the replication of `files` in one transaction; returns those still there."""
    results = await asyncio.gather(
        *(t.setattr(e.ino, replication=replication) for e in files), return_exceptions=True
    )
    done = []
    for entry, result in zip(files, results, strict=True):
        if isinstance(result, NotFoundError):
            continue
        if isinstance(result, BaseException):
            raise result
        done.append(entry)
    return done


async def replication_reached(fs: Client, path: str, replication: int) -> bool:
    """True when every block group of the file at `path` has exactly `replication` live
    replicas (a file removed meanwhile counts as done)."""
    try:
        blocks = await fs.blocks(path)
    except NotFoundError:
        return True
    return all(e.live_replicas == replication for e in blocks.extents)


async def wait_for_replication(
    fs: Client, files: list[str], replication: int, *, poll: float = DEFAULT_POLL
) -> None:
    """Return once every file in `files` has exactly `replication` live replicas of each
    block: missing copies made and surplus ones removed. It waits as long as that takes
    (bound it with asyncio.wait_for)."""
    pending = list(files)
    while True:
        still: list[str] = []
        for start in range(0, len(pending), WAIT_BATCH):
            group = pending[start : start + WAIT_BATCH]
            reached = await asyncio.gather(
                *(replication_reached(fs, p, replication) for p in group)
            )
            still.extend(p for p, ok in zip(group, reached, strict=True) if not ok)
        if not still:
            return
        pending = still
        await asyncio.sleep(poll)
