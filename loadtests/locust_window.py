"""The measured window of a locust run, passed from the locust master to locust_run
through a file: `start` when every user runs, `stop` when the test stops.

Kept apart from the locust files so that locust_run can use it without importing locust
(whose import monkey-patches the importing process unless told not to).
"""

from __future__ import annotations

import os
from pathlib import Path

WINDOW_FILE_ENV = "PFS_LOCUST_WINDOW_FILE"


def mark(what: str) -> None:
    """Append `what` to the window file, if this process was given one."""
    path = os.environ.get(WINDOW_FILE_ENV)
    if path:
        with open(path, "a") as f:
            f.write(f"{what}\n")


def marks(path: Path) -> set[str]:
    """The marks written so far."""
    try:
        return {line.split()[0] for line in path.read_text().splitlines() if line.strip()}
    except FileNotFoundError:
        return set()
