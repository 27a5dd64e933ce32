"""Name and path rules shared by client and namenode.

A name is 1..255 bytes of UTF-8 without '/' or NUL, and neither '.' nor '..'.
A path is absolute, at most 4096 bytes, and its components are names. The client
normalizes what users type (`normalize`); the namenode accepts only canonical paths
(`split_canonical`), so both sides agree on what a path means.
"""

from __future__ import annotations

from typing import NamedTuple

from plasmafs.core.errors import InvalidArgumentError, NameTooLongError

MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
MAX_SYMLINK_BYTES = 4096


class At(NamedTuple):
    """One name in the directory of inode number `dir`: how a mount names an entry,
    knowing the directory's inode and not its path (which a rename may change)."""

    dir: int
    name: str


Where = str | At  # a path, or a name in a directory given by inode number


def wire_place(where: Where) -> tuple[bytes, int]:
    """The (path or name, directory inode) pair a request carries for `where`."""
    if isinstance(where, At):
        if not 0 < where.dir < 2**64:
            raise InvalidArgumentError(f"directory inode {where.dir} is out of range")
        return check_name(where.name).encode("utf-8"), where.dir
    return encode(where), 0


def check_name(name: str) -> str:
    """Return `name` if it is a valid directory-entry name, else raise."""
    if name in ("", ".", ".."):
        raise InvalidArgumentError(f"invalid name {name!r}")
    if "/" in name or "\0" in name:
        raise InvalidArgumentError(f"invalid name {name!r}: contains '/' or NUL")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"invalid name {name!r}: not encodable as UTF-8") from exc
    if size > MAX_NAME_BYTES:
        raise NameTooLongError(f"name of {size} bytes exceeds {MAX_NAME_BYTES}: {name[:40]!r}...")
    return name


def normalize(path: str, cwd: str = "/") -> str:
    """Make `path` absolute and canonical: resolve '.', '..' and repeated '/' lexically."""
    if not isinstance(path, str):
        raise InvalidArgumentError(f"path must be a string, not {type(path).__name__}")
    if path == "":
        raise InvalidArgumentError("empty path")
    if "\0" in path:
        raise InvalidArgumentError(f"path contains NUL: {path!r}")
    full = path if path.startswith("/") else cwd.rstrip("/") + "/" + path
    parts: list[str] = []
    for part in full.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(check_name(part))
    canonical = "/" + "/".join(parts)
    if len(canonical.encode("utf-8")) > MAX_PATH_BYTES:
        raise NameTooLongError(f"path exceeds {MAX_PATH_BYTES} bytes")
    return canonical


def encode(path: str, cwd: str = "/") -> bytes:
    """The wire form of a user path: normalized, UTF-8."""
    return normalize(path, cwd).encode("utf-8")


def split_canonical(raw: bytes) -> list[str]:
    """Components of a canonical wire path; raise on anything not canonical."""
    if len(raw) > MAX_PATH_BYTES:
        raise NameTooLongError(f"path exceeds {MAX_PATH_BYTES} bytes")
    try:
        path = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"path is not valid UTF-8: {raw[:60]!r}") from exc
    if not path.startswith("/"):
        raise InvalidArgumentError(f"path is not absolute: {path!r}")
    if path == "/":
        return []
    if path.endswith("/"):
        raise InvalidArgumentError(f"path is not canonical (trailing '/'): {path!r}")
    parts = path[1:].split("/")
    for part in parts:
        check_name(part)
    return parts


def join(parent: str, name: str) -> str:
    """Join a canonical directory path and a name."""
    return ("/" if parent == "/" else parent + "/") + name


def parent_and_name(path: str) -> tuple[str, str]:
    """Split a canonical path into its parent path and last name."""
    if path == "/":
        raise InvalidArgumentError("the root directory has no parent")
    head, _, name = path.rpartition("/")
    return (head or "/"), name


def check_symlink_target(raw: bytes) -> str:
    """Validate a symbolic link's target (any non-empty text up to 4096 bytes)."""
    if not raw:
        raise InvalidArgumentError("empty symlink target")
    if len(raw) > MAX_SYMLINK_BYTES:
        raise NameTooLongError(f"symlink target exceeds {MAX_SYMLINK_BYTES} bytes")
    if b"\0" in raw:
        raise InvalidArgumentError("symlink target contains NUL")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError("symlink target is not valid UTF-8") from exc
