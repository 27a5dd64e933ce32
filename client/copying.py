"""Copies inside the cluster: a file whose content is in blocks is copied server-side
(each datanode of the new file fills its replica from a datanode of the source, no byte
passes through the client: FileWriter.copy_blocks); a content the namenode keeps
inline, or a target of another blocksize, streams through the client (nothing touches a
local disk). A tree is walked once (`Client.walk`) and rebuilt, several files at a time.

As cp without -p: contents and symbolic links are copied, not owners, modes or
times; a copied file keeps its source's replication unless one is given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from plasmafs.client.client import Client
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.core import paths
from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import InvalidArgumentError, IsDirectoryError, NotFoundError

TREE_COPIES = 8  # files copied at once by copy_tree


async def copy_file(
    fs: Client,
    src: str,
    dst: str,
    *,
    replication: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Attr:
    """Copy the file at `src` (a symbolic link followed) to `dst`, replacing a file
    there; the new file's attributes. `progress` is called with each piece's size."""
    reader = await fs.open(src, "rb")
    assert isinstance(reader, FileReader) and reader.attr is not None
    try:
        if reader.attr.kind is not FileKind.FILE:
            raise IsDirectoryError(f"{src}: is a directory")
        await _refuse_same_file(fs, reader.attr, dst)
        writer = await fs.open(
            dst,
            "wb",
            replication=reader.attr.replication if replication is None else replication,
            size_hint=reader.attr.size,
        )
        assert isinstance(writer, FileWriter)
        async with writer:
            await writer.copy_from(reader, progress=progress)
    finally:
        await reader.close()
    assert writer.attr is not None
    return writer.attr


async def _refuse_same_file(fs: Client, source: Attr, dst: str) -> None:
    try:
        existing = await fs.stat(dst)
    except NotFoundError:
        return
    if existing.ino == source.ino:
        raise InvalidArgumentError(f"{dst}: is the file being copied")


async def copy_tree(
    fs: Client,
    src: str,
    dst: str,
    *,
    replication: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[str]:
    """Copy the directory at `src` and everything below it to `dst` (created, or
    merged into if it is a directory). Returns the paths under `src` of directories it
    could not read (listed, not copied); raises on any other failure."""
    src, dst = paths.normalize(src), paths.normalize(dst)
    if dst == src or dst.startswith(src.rstrip("/") + "/"):
        raise InvalidArgumentError(f"cannot copy {src} into itself ({dst})")
    unreadable: list[str] = []
    copies: set[asyncio.Task[Attr]] = set()
    try:
        async for entry in fs.walk(src):
            source = paths.join(src, entry.path) if entry.path else src
            target = paths.join(dst, entry.path) if entry.path else dst
            if entry.unreadable:
                unreadable.append(source)
            if entry.attr.kind is FileKind.DIRECTORY:
                await fs.mkdir(target, parents=True)
            elif entry.attr.kind is FileKind.SYMLINK:
                assert entry.target is not None
                await fs.symlink(target, entry.target)
            else:
                while len(copies) >= TREE_COPIES:
                    await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
                    _reap(copies)
                copy = copy_file(fs, source, target, replication=replication, progress=progress)
                copies.add(asyncio.create_task(copy))
        while copies:
            await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
            _reap(copies)
    finally:
        for task in copies:
            task.cancel()
        await asyncio.gather(*copies, return_exceptions=True)
    return unreadable


def _reap(copies: set[asyncio.Task[Attr]]) -> None:
    """Drop finished copies, raising the first failure among them."""
    for task in [t for t in copies if t.done()]:
        copies.discard(task)
        task.result()
