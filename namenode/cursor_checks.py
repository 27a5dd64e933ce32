"""Checks of request values only the namespace rules make: listing and walk cursors.
The checks every process shares (modes, replication, blocksizes) are in
plasmafs.core.value_checks."""

from __future__ import annotations

from plasmafs.core import paths
from plasmafs.core.errors import InvalidArgumentError


def check_cursor(after: bytes) -> str:
    """A readdir cursor: empty, or anything a name could be (it need not exist)."""
    if len(after) > paths.MAX_NAME_BYTES or b"\0" in after:
        raise InvalidArgumentError("readdir cursor is longer than a name or contains NUL")
    try:
        return after.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError("readdir cursor is not valid UTF-8") from exc


# A walk's paths are relative to its root and may be longer than a path from the root
# may be (a mount creates by directory inode), so its cursor gets more room.
MAX_WALK_CURSOR_BYTES = 16 * paths.MAX_PATH_BYTES


def check_walk_cursor(after: bytes) -> list[str]:
    """A walk cursor: empty, or names joined by "/" (they need not exist)."""
    if not after:
        return []
    if len(after) > MAX_WALK_CURSOR_BYTES or b"\0" in after:
        raise InvalidArgumentError("walk cursor is too long or contains NUL")
    try:
        names = after.decode("utf-8").split("/")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError("walk cursor is not valid UTF-8") from exc
    if any(not name or len(name.encode("utf-8")) > paths.MAX_NAME_BYTES for name in names):
        raise InvalidArgumentError("walk cursor has an empty name or one longer than a name")
    return names


def check_key_cursor(after: bytes) -> tuple[list[str], bool]:
    """A key-order walk's cursor: a walk cursor that may end with "/" (a directory's
    key); its names, and whether it did."""
    directory = after.endswith(b"/")
    names = check_walk_cursor(after[:-1] if directory else after)
    if directory and not names:
        raise InvalidArgumentError("walk cursor is a lone '/'")
    return names, directory
