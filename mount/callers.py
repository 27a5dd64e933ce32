"""Who a FUSE request comes from, for a mount that acts for its host's users
(`pfs mount -o callers`).

The kernel tells each request's uid, gid and pid; the supplementary groups are the
process's, read from /proc/PID/status. A process's groups are read once per
GROUPS_TTL for the same pid, uid and gid: a process that only changes its
supplementary groups (setgroups) may act with the old ones for that long on the
namenode. The kernel's own checks (the mount runs with default_permissions) always use
the groups the process has.
"""

from __future__ import annotations

import time

import pyfuse3

from plasmafs.client.callers import LocalCaller

GROUPS_TTL = 1.0  # s a process's groups are taken as read
_KEPT = 4096  # processes remembered


class CallerIds:
    """The LocalCaller of each request, with the groups of its process."""

    def __init__(self, proc: str = "/proc") -> None:
        self._proc = proc
        self._known: dict[tuple[int, int, int], tuple[float, LocalCaller]] = {}

    def of(self, ctx: pyfuse3.RequestContext) -> LocalCaller:
        """The caller of the request `ctx` describes."""
        key = (ctx.pid, ctx.uid, ctx.gid)
        now = time.monotonic()
        known = self._known.get(key)
        if known is not None and known[0] > now:
            return known[1]
        caller = LocalCaller(ctx.uid, ctx.gid, self._groups(ctx.pid))
        if len(self._known) >= _KEPT:
            self._known = {k: v for k, v in self._known.items() if v[0] > now}
            if len(self._known) >= _KEPT:
                self._known.clear()
        self._known[key] = (now + GROUPS_TTL, caller)
        return caller

    def _groups(self, pid: int) -> tuple[int, ...]:
        """The supplementary groups of process `pid`; none if it is gone (or in another
        PID namespace, where the kernel says 0)."""
        if pid <= 0:
            return ()
        try:
            with open(f"{self._proc}/{pid}/status", "rb") as status:
                for line in status:
                    if line.startswith(b"Groups:"):
                        return tuple(int(g) for g in line.split()[1:])
        except (OSError, ValueError):
            pass
        return ()
