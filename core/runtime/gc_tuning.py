"""Garbage collection for long-running processes (the daemons and the mount).

A daemon keeps tens of thousands of long-lived objects (the namenode's caches and lock
table, a mount's leased directories): with CPython's default thresholds the collector
walks all of them again and again while they grow. Nothing here imports a server, so
the mount (which installs no server extras) shares it.
"""

from __future__ import annotations

import gc

# Young collections after this many allocations, and a full one only after many young
# ones (besides CPython's own rule: 25% more long-lived objects since the last).
DAEMON_THRESHOLDS = (50_000, 20, 10)


def tune_for_daemon() -> None:
    """What start-up made is never scanned again, and collections come far less often
    (`DAEMON_THRESHOLDS`)."""
    gc.freeze()
    gc.set_threshold(*DAEMON_THRESHOLDS)
