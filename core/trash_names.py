"""Where removed entries wait: the names of the trash that clients (client/trash.py)
and the namenode's emptier (namenode/trash.py) share.

A user's trash is `/.Trash/<user>/`: what they remove goes under `Current/` at its
own path, and `Current` becomes a checkpoint named by the UTC time it was made
(`YYMMDDHHMMSS`, as HDFS names them) until the checkpoint is older than the cluster's
trash interval and is deleted.
"""

from __future__ import annotations

import calendar
import time

TRASH_NAME = ".Trash"  # in the root directory
TRASH = "/" + TRASH_NAME
CURRENT = "Current"
CHECKPOINT_FORMAT = "%y%m%d%H%M%S"


def in_trash(path: str) -> bool:
    """Whether the (normalized) path is the trash or inside it."""
    return path == TRASH or path.startswith(TRASH + "/")


def checkpoint_name(now: float) -> str:
    """The name of a checkpoint made at `now` (seconds since the epoch)."""
    return time.strftime(CHECKPOINT_FORMAT, time.gmtime(now))


def expired(names: list[str], now: float, interval: float) -> list[str]:
    """The checkpoints among `names` made at or before `now - interval`."""
    limit = now - interval
    return [n for n in names if (made := checkpoint_time(n)) is not None and made <= limit]


def checkpoint_time(name: str) -> float | None:
    """The time a checkpoint's name says (None: the name is no checkpoint's)."""
    if len(name) != 12 or not name.isdigit():
        return None
    try:
        return float(calendar.timegm(time.strptime(name, CHECKPOINT_FORMAT)))
    except ValueError:
        return None
