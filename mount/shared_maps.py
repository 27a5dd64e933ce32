"""Whether a local process maps a file of this mount shared, from /proc/PID/maps.

FUSE tells a mount nothing of mappings. A file mapped shared by processes on two
hosts cannot be coherent (each host's page cache holds its own copy of the pages,
written by plain stores, not by requests), and programs that share memory through a
file coordinate with locks on it: SQLite's WAL index is the common case. The mount
asks this when such a lock is taken (mount/file_locks.py
`KernelLocks.refuse_mapping_between_hosts`).
"""

from __future__ import annotations

from pathlib import Path


def maps_shared(pid: int, device: str, ino: int) -> bool:
    """Whether process (or thread) `pid` has inode `ino` of the file system on
    `device` ("major:minor" as in /proc/self/mountinfo) mapped shared. False if the
    process is gone or its maps unreadable."""
    major, minor = (int(part) for part in device.split(":"))
    wanted = (major, minor, ino)
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        # address perms offset dev inode [path]; perms ends in "s" for a shared one
        fields = line.split(maxsplit=5)
        if len(fields) < 5 or fields[1][3:4] != "s":
            continue
        dev_major, _, dev_minor = fields[3].partition(":")
        try:
            found = (int(dev_major, 16), int(dev_minor, 16), int(fields[4]))
        except ValueError:
            continue
        if found == wanted:
            return True
    return False
