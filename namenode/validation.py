"""Checks of request values the namespace rules share: modes, replication, blocksizes,
directory-listing cursors."""

from __future__ import annotations

from plasmafs.client import paths
from plasmafs.client.errors import InvalidArgumentError

MIN_BLOCKSIZE = 64 * 1024
MAX_BLOCKSIZE = 64 * 1024 * 1024
MAX_REPLICATION = 32


def check_cursor(after: bytes) -> str:
    """A readdir cursor: empty, or anything a name could be (it need not exist)."""
    if len(after) > paths.MAX_NAME_BYTES or b"\0" in after:
        raise InvalidArgumentError("readdir cursor is longer than a name or contains NUL")
    try:
        return after.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError("readdir cursor is not valid UTF-8") from exc


def check_mode(mode: int) -> int:
    """Permission bits only."""
    if not 0 <= mode <= 0o7777:
        raise InvalidArgumentError(f"mode {mode:#o} has bits outside 0o7777")
    return mode


def check_replication(replication: int) -> int:
    """1..32 replicas."""
    if not 1 <= replication <= MAX_REPLICATION:
        raise InvalidArgumentError(f"replication {replication} is not in 1..{MAX_REPLICATION}")
    return replication


def check_blocksize(blocksize: int) -> int:
    """A power of two from 64 KiB to 64 MiB."""
    if not (MIN_BLOCKSIZE <= blocksize <= MAX_BLOCKSIZE and blocksize & (blocksize - 1) == 0):
        raise InvalidArgumentError(
            f"blocksize {blocksize} is not a power of two from 64 KiB to 64 MiB"
        )
    return blocksize
