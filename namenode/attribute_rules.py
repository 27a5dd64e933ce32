"""The rules for changing an inode's attributes: chmod, chown, times, truncation and
replication, each allowed to whom POSIX allows it, checked before the inode is locked
and again on what was locked (its owner may have changed meanwhile)."""

from __future__ import annotations

import stat
import time
from dataclasses import dataclass, replace

from plasmafs.core import paths
from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import (
    ConflictError,
    InvalidArgumentError,
    IsDirectoryError,
    NoSpaceError,
    NotFoundError,
)
from plasmafs.core.value_checks import check_mode, check_replication
from plasmafs.namenode.directory_leases import LeaseTable
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.permissions import W, check_chmod, check_chown, check_set_times
from plasmafs.namenode.transaction import Txn
from plasmafs.namenode.transactions import Transactions
from plasmafs.namenode.view import View, check_data


class AttributeRules:
    """setattr over a transaction's view."""

    def __init__(
        self, view: View, transactions: Transactions, leases: LeaseTable, data: FileData
    ) -> None:
        self._view = view
        self._txns = transactions
        self._leases = leases
        self._data = data

    async def setattr(
        self,
        txn: Txn | None,
        *,
        raw: bytes | None,
        ino: int | None,
        mode: int | None,
        uid: int | None,
        gid: int | None,
        mtime_ns: int | None,
        size: int | None,
        replication: int | None,
        mtime_now: bool = False,
        if_size: int | None = None,
    ) -> Attr:
        """Change an inode's attributes; a path target follows symbolic links.
        `mtime_now` sets the mtime to the namenode's clock, which a writer of the file
        may do; any other mtime only its owner. With `if_size`, ConflictError unless
        the file's size is that when the change is made (under its lock)."""
        t = self._txns.writable(txn)
        if raw is not None:
            parts = paths.split_canonical(raw)
            target = await self._view.resolve(t.who, t, parts, follow_last=True)
            what = raw.decode()
        elif ino:
            found = await self._view.inode(t, ino)
            if found is None:
                raise NotFoundError(f"no inode {ino}")
            await self._view.check_ancestors(t.who, t, found)
            target, what = found, f"inode {ino}"
        else:
            raise InvalidArgumentError("setattr needs a path or an inode number")
        if mtime_now and mtime_ns is not None:
            raise InvalidArgumentError("set the mtime to a time or to now, not both")
        if mode is not None:
            check_mode(mode)
        if size is not None or replication is not None:
            if target.kind is FileKind.DIRECTORY:
                raise IsDirectoryError("size and replication apply to files only")
            if target.kind is not FileKind.FILE:
                raise InvalidArgumentError("size and replication apply to files only")
        if size is not None and size < 0:
            raise InvalidArgumentError(f"negative size {size}")
        if replication is not None:
            check_replication(replication)
        asked = _Asked(mode, uid, gid, mtime_ns, mtime_now, size, replication)
        self._check_setattr(t, target.attr, asked, what)
        await self._leases.admit(target.ino)
        await self._txns.lock(t, ("i", target.ino), True)
        current = await self._view.inode(t, target.ino)
        if current is None:
            raise NotFoundError(f"inode {target.ino} was removed")
        a = current.attr
        if if_size is not None and a.size != if_size:
            raise ConflictError(
                f"{what} is {a.size} bytes, not {if_size}: it changed since its size was read"
            )
        mode, uid, gid = self._check_setattr(t, a, asked, what)
        if mtime_now:
            mtime_ns = time.time_ns()
        # Only data needs the datanodes now; an empty file's writer asks for them later.
        raised = replication is not None and replication > a.replication
        if raised and await self._data.view(t, a.ino):
            self._check_replication_possible(replication or 0)
        if size is not None:  # blocks past the new end go, whatever the old size said
            await self._data.truncate(t, a.ino, size, a.blocksize)
        changed = replace(
            a,
            mode=a.mode if mode is None else mode,
            uid=a.uid if uid is None else uid,
            gid=a.gid if gid is None else gid,
            mtime_ns=a.mtime_ns if mtime_ns is None else mtime_ns,
            size=a.size if size is None else size,
            replication=a.replication if replication is None else replication,
            ctime_ns=time.time_ns(),
        )
        data = current.data
        if data is not None and size is not None:
            data = data[:size] or None  # a shorter file keeps its first bytes
        new = t.cs.put_changed_inode(current, changed, data)
        if new.replication != a.replication:
            t.cs.recheck.add(a.ino)
        return new

    def _check_setattr(
        self, t: Txn, a: Attr, asked: _Asked, what: str
    ) -> tuple[int | None, int | None, int | None]:
        """The mode, uid and gid to set (None: unchanged), once the caller may make
        every change asked of inode `a`."""
        who = t.who
        mode, uid, gid = asked.mode, asked.uid, asked.gid
        if mode is not None and _clears_set_id_only(a.mode, mode) and who.uid != a.uid:
            # What a write by anyone but root does (Linux's file_remove_privs): whoever
            # may write the file may ask it.
            check_data(who, t, a, W, what)
        elif mode is not None:
            mode = check_chmod(who, a.uid, a.gid, mode, what)
        if uid is not None or gid is not None:
            uid, gid = check_chown(who, a.uid, a.gid, uid, gid, what)
        if asked.size is not None or asked.replication is not None:
            check_data(who, t, a, W, what)
        if asked.mtime_ns is not None or asked.mtime_now or asked.nothing:
            # Asking nothing still sets the ctime: as a touch to now.
            check_set_times(who, a.mode, a.uid, a.gid, what, now=asked.mtime_ns is None)
        return mode, uid, gid

    def _check_replication_possible(self, replication: int) -> None:
        placeable = len(self._data.registry.placeable())
        if replication > placeable:
            raise NoSpaceError(
                f"replication {replication} needs {replication} live datanodes, "
                f"{placeable} are live and in service"
            )


@dataclass(frozen=True, slots=True)
class _Asked:
    """The changes a setattr asks for (None: unchanged)."""

    mode: int | None
    uid: int | None
    gid: int | None
    mtime_ns: int | None
    mtime_now: bool
    size: int | None
    replication: int | None

    @property
    def nothing(self) -> bool:
        """No change at all is asked for."""
        return not self.mtime_now and all(
            v is None
            for v in (self.mode, self.uid, self.gid, self.mtime_ns, self.size, self.replication)
        )


def _clears_set_id_only(old: int, new: int) -> bool:
    """True if `new` is `old` without some of its set-user-ID and set-group-ID bits."""
    set_id = stat.S_ISUID | stat.S_ISGID
    return new != old and new & ~set_id == old & ~set_id and not new & set_id & ~old
