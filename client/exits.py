"""How a `pfs` command ends: its exit statuses, and the exception that says errors were
already reported one line each."""

from __future__ import annotations

EXIT_FAILED = 1


class CommandFailed(Exception):
    """Some paths failed; their errors were printed already."""
