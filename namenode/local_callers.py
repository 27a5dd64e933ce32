"""Requests made for the local callers of a client's host (a mount with -o callers).

A connection authenticates as one user. A mount shared by the people of a host passes,
on each request, the uid, gid and groups of the process that made it, and the namenode
checks permissions as that caller, if the connection's user may act for callers: a
superuser may act for every uid, another user for the range of uids an administrator
gave it (`pfs admin user set NAME --act-for-callers FIRST-LAST`), read at every request
so that a change holds at once. The ids are taken as the host tells them (the trust of
NFS's AUTH_SYS): numeric ids without an account are used as they are, and a caller
with uid 0 is the superuser, as root is on a local disk; so only a range that includes
0 lets a host's root act as root. An insecure namenode checks nobody: every caller's
ids are taken.
"""

from __future__ import annotations

from plasmafs.core.errors import InvalidArgumentError, OperationNotPermittedError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.namenode.principals import Principal, Principals

MAX_GROUPS = 65536  # NGROUPS_MAX of Linux
_KEPT = 4096  # callers remembered (built once, not per request)


class CallerRights:
    """Who a request made for a local caller acts as."""

    def __init__(self, principals: Principals | None) -> None:
        self._principals = principals
        self._known: dict[tuple[int, int, int, tuple[int, ...]], Principal] = {}

    def acting(self, who: Principal, caller: pb.LocalCaller) -> Principal:
        """The caller as a principal of `who`'s connection (its credential, its
        expiry); OperationNotPermittedError unless `who` may act for the caller's uid."""
        uid = caller.uid
        self.check(who, uid)
        if len(caller.groups) > MAX_GROUPS:
            raise InvalidArgumentError(f"a caller is in at most {MAX_GROUPS} groups")
        key = (who.credential_id, uid, caller.gid, tuple(caller.groups))
        known = self._known.get(key)
        if known is None:
            if len(self._known) >= _KEPT:
                self._known.clear()
            known = self._known[key] = Principal(
                self._name(uid),
                uid,
                caller.gid,
                frozenset((caller.gid, *caller.groups)),
                uid == 0,
                who.credential_id,
                who.expires,
            )
        return known

    def check(self, who: Principal, uid: int) -> None:
        """OperationNotPermittedError unless `who` may act for local uid `uid`."""
        if self._principals is None or who.superuser:
            return
        callers = self._principals.callers(who.uid)
        if callers is None or not callers[0] <= uid <= callers[1]:
            allowed = "no local caller" if callers is None else f"uids {callers[0]}-{callers[1]}"
            raise OperationNotPermittedError(
                f"user {who.name} may not act for local uid {uid} (it may act for "
                f"{allowed}: an administrator grants it with `pfs admin user set "
                f"{who.name} --act-for-callers FIRST-LAST`)"
            )

    def _name(self, uid: int) -> str:
        if self._principals is not None:
            name = self._principals.names().users.get(uid)
            if name is not None:
                return name
        return str(uid)
