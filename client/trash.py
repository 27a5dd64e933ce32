"""Removing through the trash: an entry removed goes to its remover's trash,
`/.Trash/<user>/Current/<its path>`, for as long as the cluster keeps removed entries
(its trash interval, which the namenode tells a client as it connects; 0: no trash),
and a rename brings it back. What is in a trash already is deleted for good, as is
what is removed with `skip_trash`. The namenode's emptier (namenode/trash.py) turns
`Current` into dated checkpoints and deletes those past the interval; `expunge` does
the same at once for the caller's own trash.

A name already taken in the trash (the same path removed twice) gets the time in
milliseconds appended, as HDFS does. The trash's directories are made 0700: what one
user removed is no one else's to read there.
"""

from __future__ import annotations

import time

from plasmafs.client.client import Client
from plasmafs.client.removing import remove_tree
from plasmafs.core import paths
from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import (
    ExistsError,
    InvalidArgumentError,
    IsDirectoryError,
    NotDirectoryError,
    NotFoundError,
    PermissionError,
)
from plasmafs.core.trash_names import (
    CURRENT,
    TRASH,
    checkpoint_name,
    expired,
    in_trash,
)

ATTEMPTS = 3


async def remove(
    fs: Client, path: str, *, recursive: bool = False, skip_trash: bool = False
) -> str | None:
    """Remove `path` (a directory only with `recursive`, its whole tree): into the
    caller's trash, returning where it went, or for good (None) with `skip_trash`,
    when the cluster keeps no trash, or when it is in a trash already."""
    path = paths.normalize(path)
    if path == "/":
        raise InvalidArgumentError("refusing to remove the root directory '/'")
    attr = await fs.lookup(path)
    if attr.kind is FileKind.DIRECTORY and not recursive:
        raise IsDirectoryError(f"{path}: is a directory (remove it recursively)")
    conn = await fs.connection()
    if skip_trash or conn.trash_interval <= 0 or in_trash(path):
        if attr.kind is FileKind.DIRECTORY:
            await remove_tree(fs, path)
        else:
            await fs.unlink(path)
        return None
    return await move_to_trash(fs, path, conn.user)


async def move_to_trash(fs: Client, path: str, user: str) -> str:
    """Move `path` to `user`'s trash under its own path, making the directories it
    needs there; its path in the trash."""
    await _check_home(fs, f"{TRASH}/{user}")
    parent, name = paths.parent_and_name(paths.join(f"{TRASH}/{user}/{CURRENT}", path.lstrip("/")))
    target = f"{parent}/{name}"
    for attempt in range(ATTEMPTS):
        try:
            async with fs.transaction() as t:
                await t.makedirs(parent, 0o700)
                await t.rename(path, target, replace=False)
            return target
        except ExistsError:  # removed before: this one gets the time appended
            target = f"{parent}/{name}{time.time_ns() // 1_000_000}"
        except NotDirectoryError:  # a file removed before is where a directory goes
            parent = f"{parent}{time.time_ns() // 1_000_000}"
            target = f"{parent}/{name}"
        except (NotFoundError, PermissionError) as exc:
            if attempt or not await _trash_missing(fs):
                raise
            raise type(exc)(
                f"{path}: cannot move it to the trash ({TRASH} is missing: the namenode makes "
                "it when its trash interval is not 0); remove it with skip_trash"
            ) from exc
    raise ExistsError(f"{path}: no free name for it in the trash after {ATTEMPTS} tries")


async def expunge(fs: Client, *, immediate: bool = False) -> list[str]:
    """Empty the caller's trash as the namenode does: `Current` becomes a checkpoint
    and checkpoints older than the trash interval are deleted (`immediate`: everything
    in it is); the paths deleted."""
    conn = await fs.connection()
    home = f"{TRASH}/{conn.user}"
    try:
        names = await fs.listdir(home)
    except NotFoundError:
        return []
    now = time.time()
    if immediate:
        doomed = names
    else:
        stamp = checkpoint_name(now)
        if CURRENT in names and stamp not in names:
            await fs.rename(f"{home}/{CURRENT}", f"{home}/{stamp}", replace=False)
            names = [stamp if n == CURRENT else n for n in names]
        doomed = expired(names, now, conn.trash_interval)
    for name in doomed:
        await remove_tree(fs, f"{home}/{name}")
    return [f"{home}/{name}" for name in doomed]


async def space_in_trash(fs: Client) -> int | None:
    """The space (with replication) the caller's trash holds; None when the cluster
    keeps no trash."""
    conn = await fs.connection()
    if conn.trash_interval <= 0:
        return None
    try:
        return (await fs.summarize(f"{TRASH}/{conn.user}")).space
    except NotFoundError:
        return 0


async def _check_home(fs: Client, home: str) -> None:
    """Refuse a trash another user could reach into: `home`, if it exists, must be a
    directory (not a link) that only its owner may write (1777's /.Trash lets anyone
    make a name there first; a home made by someone else and closed to the caller
    fails the move with EACCES, which is safe)."""
    try:
        attr = await fs.lookup(home)
    except NotFoundError:
        return
    if attr.kind is not FileKind.DIRECTORY or attr.mode & 0o022:
        raise PermissionError(
            f"{home} is not a private directory (a link, or writable by others): the "
            "trash refuses it; an administrator removes it, or remove with skip_trash"
        )


async def _trash_missing(fs: Client) -> bool:
    try:
        await fs.stat(TRASH)
    except NotFoundError:
        return True
    return False
