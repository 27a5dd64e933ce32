"""Checks of request values only the namespace rules make: directory-listing cursors.
The checks every process shares (modes, replication, blocksizes) are in
plasmafs.client.values."""

from __future__ import annotations

from plasmafs.client import paths
from plasmafs.client.errors import InvalidArgumentError


def check_cursor(after: bytes) -> str:
    """A readdir cursor: empty, or anything a name could be (it need not exist)."""
    if len(after) > paths.MAX_NAME_BYTES or b"\0" in after:
        raise InvalidArgumentError("readdir cursor is longer than a name or contains NUL")
    try:
        return after.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError("readdir cursor is not valid UTF-8") from exc
