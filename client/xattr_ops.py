"""Extended attributes in the library, in the shape of Python's os functions: names as
str (or bytes) with their namespace prefix (`user.`, `trusted.`, `security.`), values
as bytes, `follow_symlinks=False` for a symbolic link's own (which Linux, and
plasmafs, keep no `user.` attributes on).

`XattrReads` joins the read operations of transactions and committed reads,
`XattrChanges` the changes of transactions, `ClientXattrs` the client's one-shot forms.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar

from plasmafs.core import paths
from plasmafs.core.errors import InvalidArgumentError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.xattrs import SetMode

T = TypeVar("T")
Pending = asyncio.Future[pb.Response]
Target = str | int  # a path, or an inode number
XATTR_CREATE = int(SetMode.CREATE)
XATTR_REPLACE = int(SetMode.REPLACE)


def xattr_name(name: str | bytes) -> bytes:
    """The wire form of an attribute name (str encoded as the OS encodes file names)."""
    return name if isinstance(name, bytes) else os.fsencode(name)


def _aim(
    q: pb.GetXattr | pb.ListXattrs | pb.SetXattr | pb.RemoveXattr, target: Target, follow: bool
) -> None:
    if isinstance(target, int):
        if not 0 < target < 2**64:
            raise InvalidArgumentError(f"inode number {target} is out of range")
        q.ino = target
    else:
        q.path = paths.encode(target)
    q.nofollow = not follow


class _Requests:
    """What the mixins need of the class they join: its requests and their answers."""

    def _new(self) -> tuple[pb.Request, Pending]:
        raise NotImplementedError

    async def _result(self, future: Pending) -> pb.Response:
        raise NotImplementedError


class XattrReads(_Requests):
    """getxattr and listxattr, for a class that sends requests."""

    def getxattr(
        self, target: Target, name: str | bytes, *, follow_symlinks: bool = True
    ) -> Awaitable[bytes]:
        """The value of attribute `name` of the file at `target` (a path or an inode
        number); NoDataError if it has none of that name."""
        request, future = self._new()
        q = request.getxattr
        _aim(q, target, follow_symlinks)
        q.name = xattr_name(name)
        return self._value(future)

    def listxattr(self, target: Target, *, follow_symlinks: bool = True) -> Awaitable[list[str]]:
        """The names of the file's attributes the caller may see, sorted."""
        request, future = self._new()
        _aim(request.listxattrs, target, follow_symlinks)
        return self._names(future)

    async def _value(self, future: Pending) -> bytes:
        return (await self._result(future)).xattr_value

    async def _names(self, future: Pending) -> list[str]:
        return [os.fsdecode(n) for n in (await self._result(future)).xattr_names.names]


class XattrChanges(_Requests):
    """setxattr and removexattr, for a transaction."""

    def setxattr(
        self,
        target: Target,
        name: str | bytes,
        value: bytes,
        flags: int = 0,
        *,
        follow_symlinks: bool = True,
    ) -> Awaitable[None]:
        """Set attribute `name`; `flags` XATTR_CREATE (ExistsError if set) or
        XATTR_REPLACE (NoDataError if not), as os.setxattr."""
        if flags not in (0, XATTR_CREATE, XATTR_REPLACE):
            raise InvalidArgumentError(f"setxattr flags {flags}: 0, XATTR_CREATE or XATTR_REPLACE")
        request, future = self._new()
        q = request.setxattr
        _aim(q, target, follow_symlinks)
        q.name, q.value, q.mode = xattr_name(name), bytes(value), flags
        return self._done(future)

    def removexattr(
        self, target: Target, name: str | bytes, *, follow_symlinks: bool = True
    ) -> Awaitable[None]:
        """Remove attribute `name`; NoDataError if it is not set."""
        request, future = self._new()
        q = request.removexattr
        _aim(q, target, follow_symlinks)
        q.name = xattr_name(name)
        return self._done(future)

    async def _done(self, future: Pending) -> None:
        await self._result(future)


class ClientXattrs:
    """The client's forms: reads of committed state, changes in a one-shot transaction."""

    async def _read(self, read: Callable[..., Awaitable[T]]) -> T:
        raise NotImplementedError

    async def _one_shot(self, op: Callable[..., Awaitable[T]]) -> T:
        raise NotImplementedError

    async def getxattr(
        self, target: Target, name: str | bytes, *, follow_symlinks: bool = True
    ) -> bytes:
        """The value of attribute `name` (os.getxattr); NoDataError if unset."""
        return await self._read(lambda r: r.getxattr(target, name, follow_symlinks=follow_symlinks))

    async def listxattr(self, target: Target, *, follow_symlinks: bool = True) -> list[str]:
        """The names of the attributes the caller may see (os.listxattr)."""
        return await self._read(lambda r: r.listxattr(target, follow_symlinks=follow_symlinks))

    async def setxattr(
        self,
        target: Target,
        name: str | bytes,
        value: bytes,
        flags: int = 0,
        *,
        follow_symlinks: bool = True,
    ) -> None:
        """Set attribute `name` (os.setxattr; flags XATTR_CREATE or XATTR_REPLACE)."""
        await self._one_shot(
            lambda t: t.setxattr(target, name, value, flags, follow_symlinks=follow_symlinks)
        )

    async def removexattr(
        self, target: Target, name: str | bytes, *, follow_symlinks: bool = True
    ) -> None:
        """Remove attribute `name` (os.removexattr); NoDataError if unset."""
        await self._one_shot(lambda t: t.removexattr(target, name, follow_symlinks=follow_symlinks))
