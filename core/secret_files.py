"""Files only their owner may read or write: private keys and token files.

They are written atomically with mode 0600, and read back only while group and others
have no access to them, as ssh treats private keys.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from plasmafs.core.errors import ConfigError

MAX_SECRET_FILE = 64 * 1024  # larger than any key or token; a bigger file is a mistake


def write_private(path: Path, data: bytes, *, replace: bool = True) -> None:
    """Write `data` to a new file only its owner can read, then move it in place. With
    `replace` False an existing `path` is left as it is: FileExistsError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing tmp file keeps its mode otherwise
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if replace:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # unlike a rename, refuses an existing name, atomically
    finally:
        os.unlink(tmp)


def read_private(path: Path, what: str) -> bytes:
    """The contents of the regular file `path`; ConfigError naming the path and its mode
    when group or others have any access to it (`what` names the file in errors)."""
    try:
        # O_NONBLOCK: a FIFO put in place of the file must not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from exc
    try:
        # The mode is checked on the open file, so a swap after the check changes nothing.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{what} {path} is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ConfigError(
                f"{what} {path} has mode {mode:04o}: group and others must have no access "
                f"to it (chmod 600 {path})"
            )
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(MAX_SECRET_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SECRET_FILE:
        raise ConfigError(f"{what} {path} is larger than {MAX_SECRET_FILE} bytes")
    return data


def ensure_random_key(path: Path, size: int = 32) -> Path:
    """`path`, holding `size` random bytes written now (mode 0600) unless it exists."""
    with contextlib.suppress(FileExistsError):
        write_private(path, os.urandom(size), replace=False)
    return path
