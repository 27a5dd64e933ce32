"""What fsspec and plasmafs say differently: plasmafs errors as the built-in OSErrors
fsspec's callers test for, inodes as fsspec's description dictionaries, and a walk
gathered into os.walk's triples."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from plasmafs.core import paths
from plasmafs.core.attributes import Attr, FileKind, TreeEntry
from plasmafs.core.errors import PlasmaError

T = TypeVar("T")


def os_error(exc: PlasmaError, path: str) -> OSError:
    """The built-in error fsspec's callers test for: OSError with the errno picks its
    subclass (ENOENT: FileNotFoundError, EEXIST: FileExistsError, ...)."""
    return OSError(exc.posix_errno, str(exc), path)


async def answer(work: Awaitable[T], path: str) -> T:
    try:
        return await work
    except PlasmaError as exc:
        raise os_error(exc, path) from exc


def kind_name(attr: Attr | None) -> str:
    if attr is None:
        return "other"
    return {FileKind.FILE: "file", FileKind.DIRECTORY: "directory"}.get(attr.kind, "other")


def describe(
    path: str, attr: Attr | None, link: Attr | None = None, target: str | None = None
) -> dict[str, Any]:
    """fsspec's description of the inode at `path`: `attr` is what it leads to (None: a
    dangling link), `link` the symbolic link itself if it is one."""
    shown = attr or link
    assert shown is not None
    return {
        "name": path,
        "size": shown.size if attr is not None else 0,
        "type": kind_name(attr),
        "mtime": shown.mtime_ns / 1e9,
        "ctime": shown.ctime_ns / 1e9,
        "mode": shown.st_mode,
        "uid": shown.uid,
        "gid": shown.gid,
        "ino": shown.ino,
        "nlink": shown.nlink,
        "replication": shown.replication,
        "blocksize": shown.blocksize,
        "islink": link is not None,
        **({"destination": target} if target is not None else {}),
    }


async def iterate(items: AsyncIterator[T], path: str) -> AsyncIterator[T]:
    """`items`, a PlasmaError while iterating becoming its OSError."""
    try:
        async for item in items:
            yield item
    except PlasmaError as exc:
        raise os_error(exc, path) from exc


Children = dict[str, tuple[dict[str, Any], dict[str, Any]]]  # directory -> (dirs, files)


async def gather_children(tree: AsyncIterator[tuple[str, TreeEntry]]) -> Children:
    """Each directory of a walk with the descriptions of its subdirectories and of its
    other entries, by name."""
    children: Children = {}
    async for full, entry in tree:
        is_dir = entry.attr.kind is FileKind.DIRECTORY
        if is_dir:
            children[full] = ({}, {})
        if entry.path:
            parent, name = paths.parent_and_name(full)
            dirs, files = children[parent]
            (dirs if is_dir else files)[name] = describe(full, entry.attr)
    return children


async def walk_triples(
    path: str,
    children: Children,
    maxdepth: int | None,
    topdown: bool,
    detail: bool,
) -> AsyncIterator[tuple[str, Any, Any]]:
    dirs, files = children[path]
    shown_dirs: Any = dirs if detail else list(dirs)
    shown_files: Any = files if detail else list(files)
    if topdown:
        yield path, shown_dirs, shown_files
    if maxdepth is None or maxdepth > 1:
        below = None if maxdepth is None else maxdepth - 1
        # topdown callers may prune: walk only the names left in what they got
        for name in list(shown_dirs):
            async for triple in walk_triples(
                paths.join(path, name), children, below, topdown, detail
            ):
                yield triple
    if not topdown:
        yield path, shown_dirs, shown_files
