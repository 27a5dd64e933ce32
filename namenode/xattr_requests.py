"""Extended attributes on the namenode: get, list, set and remove, over a transaction's
view, and the stream requests that ask for them.

An inode's attributes live in its row (`Inode.xattrs`), so a change is one more
replaced row under the inode's exclusive lock, committed, cached and dumped with the
rest; a change sets the inode's ctime, as Linux's does.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from plasmafs.core import xattrs as codec
from plasmafs.core.errors import ExistsError, InvalidArgumentError, NoDataError, NotFoundError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.xattrs import SetMode
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.directory_leases import LeaseTable
from plasmafs.namenode.inode_records import Inode
from plasmafs.namenode.permissions import Caller
from plasmafs.namenode.transaction import Txn
from plasmafs.namenode.transactions import Transactions
from plasmafs.namenode.view import View
from plasmafs.namenode.xattr_rules import check_change, check_read, visible

if TYPE_CHECKING:
    from plasmafs.namenode.session import Handler, Session

Target = Place | int  # a place (its last component followed or not) or an inode number


class Xattrs:
    """getxattr, listxattr, setxattr and removexattr over a transaction's view."""

    def __init__(self, view: View, transactions: Transactions, leases: LeaseTable) -> None:
        self._view = view
        self._txns = transactions
        self._leases = leases

    async def get(
        self, txn: Txn | None, who: Caller, target: Target, follow: bool, name: bytes
    ) -> bytes:
        """The value of attribute `name`; ENODATA if it has none of that name."""
        space = codec.space_of(name)
        inode, what = await self._find(txn, who, target, follow)
        check_read(who, inode.attr, space, name, what)
        if not inode.attr.has_xattrs:
            raise NoDataError(f"no attribute {name!r} on {what}")
        value = codec.decode(await self._blob(txn, inode)).get(name)
        if value is None:
            raise NoDataError(f"no attribute {name!r} on {what}")
        return value

    async def names(
        self, txn: Txn | None, who: Caller, target: Target, follow: bool
    ) -> list[bytes]:
        """The names of its attributes the caller may see, sorted."""
        inode, _ = await self._find(txn, who, target, follow)
        if not inode.attr.has_xattrs:
            return []
        pairs = codec.decode(await self._blob(txn, inode))
        return [n for n in sorted(pairs) if visible(who, inode.attr, n)]

    async def change(
        self,
        txn: Txn | None,
        target: Target,
        follow: bool,
        name: bytes,
        value: bytes | None,
        mode: SetMode = SetMode.ANY,
    ) -> None:
        """Set attribute `name` to `value`, or remove it (None; ENODATA if not set)."""
        t = self._txns.writable(txn)
        space = codec.space_of(name)
        if value is not None:
            codec.check_value(value)
        inode, what = await self._find(t, t.who, target, follow)
        check_change(t.who, inode.attr, space, name, what)
        await self._leases.admit(inode.ino)
        await self._txns.lock(t, ("i", inode.ino), True)
        current = await self._view.inode(t, inode.ino)
        if current is None:
            raise NotFoundError(f"{what} was removed")
        check_change(t.who, current.attr, space, name, what)  # its owner or mode may be new
        pairs = codec.decode(current.xattrs)
        present = name in pairs
        if value is None or mode is SetMode.REPLACE:
            if not present:
                raise NoDataError(f"no attribute {name!r} on {what}")
        elif mode is SetMode.CREATE and present:
            raise ExistsError(f"attribute {name!r} is already set on {what}")
        if value is None:
            del pairs[name]
        else:
            pairs[name] = value
        blob = codec.encode(pairs)
        attr = replace(current.attr, has_xattrs=blob is not None, ctime_ns=time.time_ns())
        t.cs.put_changed_inode(replace(current, xattrs=blob), attr, current.data)

    async def _find(
        self, txn: Txn | None, who: Caller, target: Target, follow: bool
    ) -> tuple[Inode, str]:
        if isinstance(target, int):
            found = await self._view.inode(txn, target)
            if found is None:
                raise NotFoundError(f"no inode {target}")
            await self._view.check_ancestors(who, txn, found)
            return found, f"inode {target}"
        return await self._view.resolve_place(who, txn, target, follow), target.shown

    async def _blob(self, txn: Txn | None, inode: Inode) -> bytes | None:
        if inode.xattrs:  # b"": a listing's inode, which says only that it has some
            return inode.xattrs
        full = await self._view.inode(txn, inode.ino)
        return full.xattrs if full is not None else None


def _target(q: pb.GetXattr | pb.ListXattrs | pb.SetXattr | pb.RemoveXattr) -> Target:
    if bool(q.ino) == bool(q.path):
        raise InvalidArgumentError("name the file by its path or its inode, not both")
    return q.ino or Place.of(q.path)


async def _getxattr(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.getxattr
    out.xattr_value = await s.xattrs.get(t, s.who, _target(q), not q.nofollow, q.name)


async def _listxattrs(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.listxattrs
    names = await s.xattrs.names(t, s.who, _target(q), not q.nofollow)
    out.xattr_names.names.extend(names)
    out.xattr_names.SetInParent()


async def _setxattr(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.setxattr
    try:
        mode = SetMode(q.mode)
    except ValueError:
        raise InvalidArgumentError(f"no setxattr mode {q.mode}") from None
    await s.xattrs.change(t, _target(q), not q.nofollow, q.name, q.value, mode)
    out.done.SetInParent()


async def _removexattr(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.removexattr
    await s.xattrs.change(t, _target(q), not q.nofollow, q.name, None)
    out.done.SetInParent()


HANDLERS: dict[str, Handler] = {
    "getxattr": _getxattr,
    "listxattrs": _listxattrs,
    "setxattr": _setxattr,
    "removexattr": _removexattr,
}
READ_ONLY = frozenset(["getxattr", "listxattrs"])
