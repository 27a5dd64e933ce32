"""Extended attributes: their namespaces, limits and the encoding an inode keeps them in.

Names are bytes with a namespace prefix, as Linux's: `user.` (anyone with the file's
permissions), `trusted.` (the superuser's) and `security.` (set by the superuser, read
by anyone who may see the file). `system.` (ACLs) and every other prefix are not
supported. Limits are ext4's: a name of at most 255 bytes, a value of at most 64 KiB,
and 128 KiB per inode, counting names, values and 5 bytes a pair.

An inode's attributes are one blob: for each pair, sorted by name, a byte giving the
name's length, four (big-endian) giving the value's, then the name and the value.
"""

from __future__ import annotations

import enum
import struct

from plasmafs.core.errors import (
    InvalidArgumentError,
    NameTooLongError,
    NoSpaceError,
    NotSupportedError,
)

MAX_NAME = 255
MAX_VALUE = 65536
MAX_TOTAL = 131072
PAIR_OVERHEAD = 5
_HEADER = struct.Struct(">BI")


class XattrSpace(enum.Enum):
    """The namespaces plasmafs keeps attributes in."""

    USER = b"user."
    TRUSTED = b"trusted."
    SECURITY = b"security."


class SetMode(enum.IntEnum):
    """setxattr's flags: set either way, only create (EEXIST if set), only replace
    (ENODATA if not set). The values are Linux's XATTR_CREATE and XATTR_REPLACE."""

    ANY = 0
    CREATE = 1
    REPLACE = 2


def space_of(name: bytes) -> XattrSpace:
    """The namespace of `name`, once checked; EOPNOTSUPP for a namespace plasmafs does
    not keep (`system.`, none), EINVAL for an empty name in one, ENAMETOOLONG over 255."""
    if len(name) > MAX_NAME:
        raise NameTooLongError(f"attribute name of {len(name)} bytes (at most {MAX_NAME})")
    if b"\0" in name:
        raise InvalidArgumentError("attribute name with a NUL byte")
    for space in XattrSpace:
        if name.startswith(space.value):
            if len(name) == len(space.value):
                raise InvalidArgumentError(f"attribute name {name!r} has no name after its prefix")
            return space
    raise NotSupportedError(f"attribute namespace of {name!r} is not supported")


def check_value(value: bytes) -> None:
    """Refuse a value over 64 KiB (E2BIG in Linux; ENOSPC here, as ext4 answers past
    its block)."""
    if len(value) > MAX_VALUE:
        raise NoSpaceError(f"attribute value of {len(value)} bytes (at most {MAX_VALUE})")


def encode(pairs: dict[bytes, bytes]) -> bytes | None:
    """The blob of `pairs` (None for none); ENOSPC past 128 KiB."""
    if not pairs:
        return None
    parts: list[bytes] = []
    for name in sorted(pairs):
        value = pairs[name]
        parts += (_HEADER.pack(len(name), len(value)), name, value)
    blob = b"".join(parts)
    if len(blob) > MAX_TOTAL:
        raise NoSpaceError(
            f"the file's extended attributes would take {len(blob)} bytes (at most {MAX_TOTAL})"
        )
    return blob


def decode(blob: bytes | None) -> dict[bytes, bytes]:
    """The pairs of a blob `encode` made."""
    pairs: dict[bytes, bytes] = {}
    if not blob:
        return pairs
    at, end = 0, len(blob)
    while at < end:
        name_len, value_len = _HEADER.unpack_from(blob, at)
        at += _HEADER.size
        name = blob[at : at + name_len]
        at += name_len
        pairs[name] = blob[at : at + value_len]
        at += value_len
    return pairs
