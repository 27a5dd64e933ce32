"""What the kernel is told about inodes: plasmafs attributes as pyfuse3 entries, and
plasmafs errors as errnos."""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable
from typing import TypeVar

import pyfuse3

from plasmafs.core.attributes import Attr
from plasmafs.core.errors import ConnectionLostError, PlasmaError
from plasmafs.mount.options import MountOptions

log = logging.getLogger(__name__)
T = TypeVar("T")

BLOCK_UNIT = 512  # st_blocks counts these, whatever the file system's block size


def entry(attr: Attr, options: MountOptions) -> pyfuse3.EntryAttributes:
    """The kernel's view of `attr`, cached for the mount's lifetimes."""
    e = pyfuse3.EntryAttributes()
    e.st_ino = attr.ino
    e.generation = 0  # inode numbers are never reused
    e.entry_timeout = options.entry_timeout
    e.attr_timeout = options.attr_timeout
    e.st_mode = attr.st_mode
    e.st_nlink = attr.nlink
    e.st_uid = attr.uid
    e.st_gid = attr.gid
    e.st_rdev = attr.rdev
    e.st_size = attr.size
    e.st_blksize = attr.blocksize or 4096
    e.st_blocks = -(-attr.size // BLOCK_UNIT)
    e.st_atime_ns = attr.mtime_ns  # no access times: reads never write metadata
    e.st_mtime_ns = attr.mtime_ns
    e.st_ctime_ns = attr.ctime_ns
    return e


def absent(options: MountOptions) -> pyfuse3.EntryAttributes:
    """A name that does not exist, which the kernel may remember so long."""
    e = pyfuse3.EntryAttributes()
    e.st_ino = 0
    e.entry_timeout = options.negative_timeout
    return e


def fuse_error(exc: BaseException) -> pyfuse3.FUSEError:
    """The errno a failed operation reports: a plasmafs error's own; EIO for a lost
    namenode connection (the next request reconnects) and for anything unexpected."""
    if isinstance(exc, pyfuse3.FUSEError):
        return exc
    if isinstance(exc, ConnectionLostError):
        log.warning("namenode unreachable: %s", exc)
        return pyfuse3.FUSEError(errno.EIO)
    if isinstance(exc, PlasmaError):
        if exc.posix_errno in (errno.EIO, errno.ENOSPC, errno.EBUSY):  # worth an operator's look
            log.warning("%s: %s", type(exc).__name__, exc)
        return pyfuse3.FUSEError(exc.posix_errno)
    if isinstance(exc, OSError) and exc.errno:
        return pyfuse3.FUSEError(exc.errno)
    log.exception("unexpected error", exc_info=exc)
    return pyfuse3.FUSEError(errno.EIO)


async def answer(work: Awaitable[T]) -> T:
    """The result of `work`, or the FUSEError its failure stands for."""
    try:
        return await work
    except Exception as exc:
        raise fuse_error(exc) from None
