"""A directory moved into a trash must be one its mover could remove whole.

POSIX lets anyone with write access on two directories move a third between them,
whatever it holds; but what lands in a trash is later deleted by the namenode's
emptier as the superuser. Without this check a user with write access on a shared
directory could move another's tree into their own trash and have the emptier delete
what they could not (a remove of it, entry by entry, is refused). So a move of a
directory from outside any trash into one needs, from a caller who is not the
superuser, what `rm -r` of that tree needs: read, write and search on every directory
in it that holds entries, and in a sticky one ownership of the directory or of each
entry. Moves inside the trash, and files (a remove needs no more than the move), are
as POSIX says.

The tree is read as committed, in one query: entries another transaction adds to it
before this move commits are not checked (they would have to be made in a directory
the mover may write, which makes them the mover's to remove but for a sticky bit).
"""

from __future__ import annotations

import stat

from plasmafs.core.errors import OperationNotPermittedError, PermissionError
from plasmafs.namenode.permissions import R, W, X, may
from plasmafs.namenode.principals import Principal
from plasmafs.namenode.store import Store


async def check_removable_tree(store: Store, who: Principal, ino: int, shown: str) -> None:
    """PermissionError (or OperationNotPermittedError for a sticky directory) unless
    `who` may remove directory `ino` (at `shown`) and everything below it."""
    if who.superuser:
        return
    rows = await store.directories_with_entries(ino)
    closed = [ino for ino, mode, uid, gid in rows if not may(who, mode, uid, gid, R | W | X)]
    sticky_of_others = [ino for ino, mode, uid, _ in rows if mode & stat.S_ISVTX and uid != who.uid]
    foreign = None
    if not closed and sticky_of_others:
        foreign = await store.entry_of_another(sticky_of_others, who.uid)
    if closed:
        raise PermissionError(
            f"{shown}: cannot move it to the trash: a directory in it (inode {closed[0]}) "
            "denies you the read, write and search that removing what it holds needs"
        )
    if foreign is not None:
        raise OperationNotPermittedError(
            f"{shown}: cannot move it to the trash: a sticky directory in it holds "
            "entries of other users"
        )
