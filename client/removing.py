"""Removing a whole subtree: one walk (`Client.walk`) finds everything below it; files
go as the walk finds them and directories deepest first at the end, a transaction per
batch of removals, so that a tree costs a few round trips per thousand entries rather
than a listing and a commit per directory."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from plasmafs.client.client import Client
from plasmafs.client.transaction import Transaction
from plasmafs.core import paths
from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import InvalidArgumentError, NotFoundError, PermissionError

BATCH = 1000  # removals per transaction


async def remove_tree(fs: Client, path: str, *, batch: int = BATCH) -> None:
    """Remove `path` and everything below it (a file or a symbolic link alone). Entries
    that vanish meanwhile are fine; a directory that cannot be read fails the removal
    (what was removed before stays removed, as with rm -r)."""
    path = paths.normalize(path)
    if path == "/":
        raise InvalidArgumentError("refusing to remove the root directory '/'")
    directories: list[str] = []
    files: list[str] = []
    async for entry in fs.walk(path):
        full = paths.join(path, entry.path) if entry.path else path
        if entry.unreadable:
            raise PermissionError(f"{full}: permission denied (directory not read)")
        if entry.attr.kind is FileKind.DIRECTORY:
            directories.append(full)
            continue
        files.append(full)
        if len(files) >= batch:
            await _remove(fs, files, Transaction.unlink)
            files = []
    if files:
        await _remove(fs, files, Transaction.unlink)
    directories.reverse()  # the walk lists a directory before what it holds
    for start in range(0, len(directories), batch):
        await _remove(fs, directories[start : start + batch], Transaction.rmdir)


async def _remove(
    fs: Client, targets: list[str], remove: Callable[[Transaction, str], Awaitable[None]]
) -> None:
    """One transaction removing `targets` in order; already gone is not a failure."""
    async with fs.transaction() as t:
        results = await asyncio.gather(
            *(remove(t, target) for target in targets), return_exceptions=True
        )
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, NotFoundError):
            raise result
