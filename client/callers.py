"""Requests made for a local caller: the ids of the process a mount serves.

A mount shared by the people of a host (`pfs mount -o callers`) makes each request to
the namenode for the process that caused it; the namenode checks permissions as that
process's uid, gid and groups, if the mount's user may act for callers (an
administrator's grant, or a superuser's credential). `acting_for` marks every request
made in its block, in the current task and the tasks it starts; requests made
elsewhere act as the connection's user.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass

from plasmafs.core.proto import namenode_pb2 as pb


@dataclass(frozen=True, slots=True)
class LocalCaller:
    """A local process's identity: uid, primary gid and supplementary groups."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    def to_wire(self, out: pb.LocalCaller) -> None:
        """Fill the request's caller field."""
        out.uid = self.uid
        out.gid = self.gid
        if self.groups:
            out.groups.extend(self.groups)


_acting: ContextVar[LocalCaller | None] = ContextVar("plasmafs_local_caller", default=None)


@contextmanager
def acting_for(caller: LocalCaller | None) -> Iterator[None]:
    """Requests made in the block act for `caller` (None: as the connection's user)."""
    token = _acting.set(caller)
    try:
        yield
    finally:
        _acting.reset(token)


def set_caller(caller: LocalCaller | None) -> Token[LocalCaller | None]:
    """Requests made from now on act for `caller`, until `reset_caller` with the token
    this returns (`acting_for` without a context manager's cost, for a mount's every
    request)."""
    return _acting.set(caller)


def reset_caller(token: Token[LocalCaller | None]) -> None:
    """Requests act again for whom they did before `set_caller` gave `token`."""
    _acting.reset(token)


def current_caller() -> LocalCaller | None:
    """The caller requests made here act for, if any."""
    return _acting.get()


def stamp(request: pb.Request) -> None:
    """Mark `request` with the current caller, if any."""
    caller = _acting.get()
    if caller is not None:
        caller.to_wire(request.caller)
