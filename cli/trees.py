"""The `pfs` commands over whole subtrees: du, count, find, cp and `ls -R`. Each
reads a subtree with one summary or one walk (`Client.summarize`, `Client.walk`):
a round trip or a few for the whole tree, not one per directory."""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from plasmafs.cli import accounts as account_commands
from plasmafs.cli import formatting, quotas
from plasmafs.cli.exits import CommandFailed, Reporter
from plasmafs.client.client import Client
from plasmafs.core import paths
from plasmafs.core.attributes import FileKind, TreeEntry
from plasmafs.core.errors import InvalidArgumentError, IsDirectoryError, NotFoundError
from plasmafs.core.sizes import parse_size

KINDS = {"f": FileKind.FILE, "d": FileKind.DIRECTORY, "l": FileKind.SYMLINK}


def _bytes(n: int, human: bool) -> str:
    return formatting.human_bytes(n) if human else str(n)


async def _walk(fs: Client, path: str, out: Reporter) -> AsyncIterator[tuple[str, TreeEntry]]:
    """The entries of the subtree at `path` with their full paths; a directory the walk
    could not enter is reported as an error (and still yielded)."""
    async for entry in fs.walk(path):
        full = paths.join(path, entry.path) if entry.path else path
        if entry.unreadable:
            out.error(f"{full}: permission denied (directory not read)")
        yield full, entry


# --- du and count -------------------------------------------------------------------------


async def cmd_du(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """SIZE SPACE PATH lines: bytes and the space they take with replication, for each
    directory under each path (last after its contents), or for the paths alone (-s)."""

    async def one(target: str) -> None:
        path = paths.normalize(target)
        if args.summarize:
            total = await fs.summarize(path)
            _unread(out, path, total.unreadable)
            print(_du_line(total.bytes, total.space, path, args.human))
            return
        await _du_tree(fs, path, args.human, out)

    await out.each(args.paths or ["/"], one)


def _du_line(size: int, space: int, path: str, human: bool) -> str:
    return f"{_bytes(size, human)}\t{_bytes(space, human)}\t{path}"


def _unread(out: Reporter, path: str, unreadable: int) -> None:
    if unreadable:
        out.error(f"{path}: {unreadable} director{'y' if unreadable == 1 else 'ies'} not read")


@dataclass(slots=True)
class _Open:
    """A directory du is inside, and what it holds so far."""

    path: str
    size: int = 0
    space: int = 0


async def _du_tree(fs: Client, path: str, human: bool, out: Reporter) -> None:
    """Every directory's totals from one walk: a directory is complete (and printed)
    once the walk leaves it."""
    stack: list[_Open] = []

    def close_until(full: str) -> None:
        while stack and not (full + "/").startswith(stack[-1].path.rstrip("/") + "/"):
            done = stack.pop()
            print(_du_line(done.size, done.space, done.path, human))
            if stack:
                stack[-1].size += done.size
                stack[-1].space += done.space

    async for full, entry in _walk(fs, path, out):
        close_until(full)
        a = entry.attr
        if a.kind is FileKind.DIRECTORY:
            stack.append(_Open(full))
        elif a.kind is FileKind.FILE:
            if not stack:  # a file given as the path
                print(_du_line(a.size, entry.space, full, human))
            else:
                stack[-1].size += a.size
                stack[-1].space += entry.space
    close_until("\0")  # sorts under no directory: closes them all


async def cmd_count(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """DIR_COUNT FILE_COUNT CONTENT_SIZE PATHNAME, as `hdfs dfs -count` (files include
    symbolic links)."""
    if args.header:
        quota_header = f"{quotas.QUOTA_HEADER} " if args.quotas else ""
        print(f"{quota_header}{'DIR_COUNT':>12} {'FILE_COUNT':>12} {'CONTENT_SIZE':>18} PATHNAME")

    async def one(target: str) -> None:
        path = paths.normalize(target)
        total = await fs.summarize(path)
        _unread(out, path, total.unreadable)
        size = _bytes(total.bytes, args.human)
        limits = f"{quotas.columns(total.quota, args.human)} " if args.quotas else ""
        files = total.files + total.symlinks
        print(f"{limits}{total.directories:>12} {files:>12} {size:>18} {path}")

    await out.each(args.paths, one)


# --- find -----------------------------------------------------------------------------------


def size_test(text: str) -> Callable[[int], bool]:
    """-size N, +N (more than), -N (less than); N in bytes or with K, M, G, T."""
    sign = text[:1] if text[:1] in "+-" else ""
    try:
        limit = parse_size(text[len(sign) :])
    except ValueError as exc:
        raise InvalidArgumentError(f"-size: {exc}") from None
    if sign == "+":
        return lambda size: size > limit
    if sign == "-":
        return lambda size: size < limit
    return lambda size: size == limit


async def cmd_find(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """The paths under each given path that pass every test given."""
    kind = KINDS[args.type] if args.type else None
    size_ok = size_test(args.size) if args.size else None

    def wanted(full: str, entry: TreeEntry) -> bool:
        a = entry.attr
        if kind is not None and a.kind is not kind:
            return False
        if args.name is not None and not fnmatch.fnmatchcase(full.rpartition("/")[2], args.name):
            return False
        return size_ok is None or (a.kind is FileKind.FILE and size_ok(a.size))

    async def one(target: str) -> None:
        async for full, entry in _walk(fs, paths.normalize(target), out):
            if wanted(full, entry):
                print(full)

    await out.each(args.paths or ["/"], one)


# --- ls -R ----------------------------------------------------------------------------------


async def list_tree(
    fs: Client,
    args: argparse.Namespace,
    names: account_commands.KnownNames,
    path: str,
    out: Reporter,
    first: bool,
) -> None:
    """`ls -R` of the directory at `path` from one walk: a block per directory, each
    after its parent's, as ls(1) orders them. The walk interleaves a directory's
    entries with its subdirectories' contents, so the listing is gathered first."""
    blocks: dict[str, list[TreeEntry]] = {}
    order: list[str] = []
    unreadable: set[str] = set()
    async for entry in fs.walk(path):
        full = paths.join(path, entry.path) if entry.path else path
        if entry.attr.kind is FileKind.DIRECTORY:
            blocks[full] = []
            order.append(full)
            if entry.unreadable:
                unreadable.add(full)
        if entry.path:
            blocks[paths.parent_and_name(full)[0]].append(entry)
    for position, directory in enumerate(order):  # the walk's order is ls -R's
        print(("" if first and position == 0 else "\n") + f"{directory}:")
        if directory in unreadable:
            out.error(f"{directory}: permission denied (directory not read)")
            continue
        long_names = await names.get() if args.long else None
        for entry in blocks[directory]:
            print(_ls_line(args, entry, long_names))


def _ls_line(
    args: argparse.Namespace, entry: TreeEntry, names: formatting.OwnerNames | None
) -> str:
    if names is not None:
        return formatting.long_line(
            entry.name, entry.attr, inode=args.inode, target=entry.target, names=names
        )
    if args.inode:
        return f"{entry.attr.ino:>10} {entry.name}"
    return entry.name


# --- cp -------------------------------------------------------------------------------------


async def cmd_cp(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """Copy files (and trees with -r) inside the cluster; into DST if it is a directory."""
    from plasmafs.client.copying import copy_file, copy_tree  # loads the data path

    *sources, target = args.paths
    if not sources:
        raise InvalidArgumentError("cp needs a source and a destination")
    dest = paths.normalize(target)
    try:
        into_dir = (await fs.stat(dest)).kind is FileKind.DIRECTORY
    except NotFoundError:
        into_dir = False
    if not into_dir and len(sources) > 1:
        raise InvalidArgumentError(f"target {target} is not a directory")
    replication = args.replication

    async def one(source: str) -> None:
        src = paths.normalize(source)
        to = paths.join(dest, paths.parent_and_name(src)[1]) if into_dir else dest
        if (await fs.stat(src)).kind is FileKind.DIRECTORY:
            if not args.recursive:
                raise IsDirectoryError(f"{src}: is a directory (use -r to copy it)")
            for skipped in await copy_tree(fs, src, to, replication=replication):
                out.error(f"{skipped}: permission denied (directory not copied)")
        else:
            await copy_file(fs, src, to, replication=replication)

    await out.each(sources, one)
    if out.failed:
        raise CommandFailed
