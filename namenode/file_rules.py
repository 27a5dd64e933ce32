"""The rules for a file's content: who may reserve blocks for it, read its block list
or replace it with an inline content, and the namenode's own changes of block lists
(replica copies and removals) in transactions of its own.

Like the namespace rules, these work on a transaction's view and never see SQL; the
block lists themselves are file data's (filedata.py).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from plasmafs.core.attributes import Attr, Extent, FileKind
from plasmafs.core.errors import InvalidArgumentError, IsDirectoryError, NotFoundError
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.inode_records import Inode, in_snapshot
from plasmafs.namenode.locks import SNAPSHOT_UPKEEP_LOCK
from plasmafs.namenode.permissions import R, W
from plasmafs.namenode.principals import SUPERUSER, Principal
from plasmafs.namenode.quotas import Quotas
from plasmafs.namenode.transaction import Txn
from plasmafs.namenode.transactions import Transactions
from plasmafs.namenode.view import View, check_data


class FileRules:
    """Block reservations, block lists and inline content of regular files."""

    def __init__(
        self, view: View, transactions: Transactions, data: FileData, *, inline_limit: int
    ) -> None:
        self._view = view
        self._txns = transactions
        self._data = data
        self.inline_limit = inline_limit  # files up to this size may keep content inline
        self._internal_txns = 0
        self.quotas: Quotas | None = None  # stops writers at a space limit when set

    async def allocate(
        self, txn: Txn | None, ino: int, file_index: int, count: int
    ) -> tuple[Inode, list[Extent]]:
        """Reserve new blocks for a file range (replacing what was there at commit)."""
        t = self._txns.writable(txn)
        inode = await self._file_to_write(t, ino)
        if self.quotas is not None:
            before = None if ino in t.cs.created else await self._view.committed_inode(ino)
            await self.quotas.check_growth(
                t.cs, inode, before, file_index * inode.attr.blocksize + 1
            )
        if inode.data is not None:
            # An inline content moves to blocks whole: block 0 is rewritten with it.
            if file_index != 0:
                raise InvalidArgumentError(
                    f"the content of inode {ino} is inline: write it to blocks from block 0"
                )
            t.cs.put_changed_inode(inode, inode.attr, None)
        return inode, await self._data.allocate(t, inode, file_index, count, t.who.credential_id)

    async def write_inline(self, txn: Txn | None, ino: int, data: bytes) -> Attr:
        """Replace the whole content of a small file with `data`, kept in its inode:
        no block, no datanode. The size becomes len(data); blocks it had are released."""
        t = self._txns.writable(txn)
        if len(data) > self.inline_limit:
            raise InvalidArgumentError(
                f"inline content is at most {self.inline_limit} bytes, not {len(data)}"
            )
        inode = await self._file_to_write(t, ino)
        await self._data.truncate(t, ino, 0, inode.attr.blocksize)
        attr = replace(inode.attr, size=len(data), ctime_ns=time.time_ns())
        return t.cs.put_changed_inode(inode, attr, data or None)

    async def _file_to_write(self, t: Txn, ino: int) -> Inode:
        """The file `ino`, locked exclusively once its data may be written by the caller."""
        seen = await self._view.inode(t, ino)
        if seen is None:
            raise NotFoundError(f"no inode {ino}")
        await self._view.check_ancestors(t.who, t, seen)
        check_data(t.who, t, seen.attr, W, f"inode {ino}")
        await self._txns.lock(t, ("i", ino), True)
        inode = await self._view.inode(t, ino)
        if inode is None:
            raise NotFoundError(f"inode {ino} was removed")
        check_data(t.who, t, inode.attr, W, f"inode {ino}")
        if inode.kind is FileKind.DIRECTORY:
            raise IsDirectoryError(f"inode {ino} is a directory")
        if inode.kind is not FileKind.FILE:
            raise InvalidArgumentError(f"inode {ino} is not a regular file")
        return inode

    async def blocks(
        self, txn: Txn | None, ino: int, file_index: int, count: int, *, who: Principal
    ) -> tuple[Inode, list[Extent]]:
        """A file's extents with read tickets, as the transaction sees them."""
        if txn is not None:
            txn.check_open()
        inode = await self._view.inode(txn, ino)
        if inode is None:
            raise NotFoundError(f"no inode {ino}")
        await self._view.check_ancestors(who, txn, inode)
        check_data(who, txn, inode.attr, R, f"inode {ino}")
        if inode.data is not None:
            return inode, []  # the content travels with the block list itself
        return inode, await self._data.blocks(txn, inode, file_index, count, who.credential_id)

    async def change_file_blocks(
        self, label: str, ino: int, change: Callable[[Txn], Awaitable[bool]], lock_wait: float
    ) -> bool:
        """Run `change` on the block lists of file `ino` in a transaction of the namenode's
        own that holds the file's exclusive lock; commit if it returns True, else abort.
        False also when the file is gone; ConflictError when the lock stays taken."""
        self._internal_txns += 1
        txns = self._txns
        txn = txns.begin(self._internal_txns, label, lock_wait, SUPERUSER)
        txn.upkeep = True
        try:
            txns.writable(txn)
            if in_snapshot(ino):
                await txns.lock(txn, SNAPSHOT_UPKEEP_LOCK, False)
            await txns.lock(txn, ("i", ino), True)
            inode = await self._view.inode(txn, ino)
            if inode is None or inode.kind is not FileKind.FILE or not await change(txn):
                txns.abort(txn, "nothing to change")
                return False
        except BaseException:
            txns.abort(txn, "failed")
            raise
        await txns.commit(txn)
        return True
