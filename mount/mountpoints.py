"""What the CLI and the mount's process both need to know about mount points: whether
something is mounted at a path, and which device, read from /proc/self/mountinfo.
Standard library only, so `pfs umount` works without the mount extra."""

from __future__ import annotations

import os
import re
from pathlib import Path


def is_mounted(path: Path) -> bool:
    """True if something is mounted at `path`, even a mount whose process died (where
    stat() fails with ENOTCONN and os.path.ismount says no)."""
    try:
        return _device_at(path) is not None
    except OSError:
        return os.path.ismount(path)


def mounted_device(path: Path) -> str | None:
    """The "major:minor" device of the file system mounted at `path` (the last one
    mounted there, which is the one seen); None if none or the table is unreadable.
    Reads no file under `path`, so a FUSE daemon may ask about its own mount before
    it answers requests."""
    try:
        return _device_at(path)
    except OSError:
        return None


def _device_at(path: Path) -> str | None:
    """The device of the last mount at `path` in /proc/self/mountinfo, or None."""
    target = os.path.normpath(path)
    device = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4 and _unescape(fields[4]) == target:
            device = fields[2]
    return device


def _unescape(field: str) -> str:
    """A mount table field with its octal escapes (\\040 for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
