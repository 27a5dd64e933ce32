"""The FUSE requests of a mount, answered through the asyncio client.

Each request is one or two namenode requests by inode number (`At` for names in a
directory), never a path walk, so a rename elsewhere cannot redirect it. Errors
become the errno of their plasmafs error (`entries.fuse_error`).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import fcntl
import functools
import itertools
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import pyfuse3

from plasmafs.client import At, Client
from plasmafs.client.callers import (
    LocalCaller,
    acting_for,
    current_caller,
    reset_caller,
    set_caller,
)
from plasmafs.core.attributes import Attr, BlockList, DirEntry, FileKind
from plasmafs.core.errors import NotFoundError
from plasmafs.mount import looked_up
from plasmafs.mount.callers import CallerIds
from plasmafs.mount.direct_writes import DirectWrites
from plasmafs.mount.file_locks import KernelLocks, close_unstarted, locks_cross_hosts
from plasmafs.mount.fuse_values import absent, answer, entry, fuse_error
from plasmafs.mount.handles import FileHandle, OpenFile
from plasmafs.mount.kernelview import KernelView, NoWritebackView
from plasmafs.mount.newfile import NewFile
from plasmafs.mount.options import MountOptions
from plasmafs.mount.parents import DirectoryParents, dot_entry
from plasmafs.mount.readahead import ReadAhead
from plasmafs.mount.writebehind import LeasedDir, WriteBehind
from plasmafs.mount.xattr_free import WithoutXattrs

log = logging.getLogger(__name__)

T = TypeVar("T")
DIRECTORY_PAGE = 1024  # entries per namenode request while listing
MAX_NAME = 255
SET_ID = stat.S_ISUID | stat.S_ISGID
SELINUX_LABEL = b"security.selinux"  # not kept on the mount (see _check_xattr_name)


def answered(
    handler: Callable[..., Coroutine[Any, Any, T]], *, replies: bool = True
) -> Callable[..., Coroutine[Any, Any, T | None]]:
    """`handler`, made to answer every request: a failure that is no FUSEError (a bug)
    is logged and answered with EIO (for a request without a reply, `replies=False`:
    only logged). pyfuse3 would otherwise end the worker that ran it without
    answering, and the program that made the request, and every later one waiting
    behind it (writeback, unmount), would hang."""

    @functools.wraps(handler)
    async def guarded(*args: Any, **kwargs: Any) -> T | None:
        try:
            return await handler(*args, **kwargs)
        except pyfuse3.FUSEError:
            if replies:
                raise
            return None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is None or current.cancelling():
                raise  # the handler itself is cancelled: the mount is going away
            # Work it awaited was cancelled under it: answer all the same.
            log.warning("%s: work it waited for was cancelled", handler.__name__)
            if replies:
                raise pyfuse3.FUSEError(errno.EIO) from None
            return None
        except Exception:
            log.exception("%s failed", handler.__name__)
            if replies:
                raise pyfuse3.FUSEError(errno.EIO) from None
            return None

    return guarded


def for_its_caller(
    handler: Callable[..., Coroutine[Any, Any, T]],
) -> Callable[..., Coroutine[Any, Any, T]]:
    """`handler` (a PlasmaOperations method), made to act for the request's caller on a
    mount acting for its host's users: every namenode request it makes carries the
    caller's ids."""

    @functools.wraps(handler)
    async def acting(self: PlasmaOperations, *args: Any, **kwargs: Any) -> T:
        if self.callers is None:
            return await handler(self, *args, **kwargs)
        token = set_caller(self.caller_of(args))
        try:
            return await handler(self, *args, **kwargs)
        finally:
            reset_caller(token)

    return acting


def _name(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise pyfuse3.FUSEError(errno.EINVAL) from None


DOTS = (".", "..")


class _Listing:
    """An open directory: the names handed to the kernel so far (the kernel's offsets
    are their positions), and entries fetched from the namenode that it has not taken
    yet, so that a listing continues after the last one it took without asking the
    namenode again."""

    def __init__(self, ino: int) -> None:
        self.ino = ino
        self.names: list[str] = []
        self.pending: collections.deque[DirEntry] = collections.deque()
        self.exhausted = False  # the namenode has nothing after the last one fetched

    @property
    def entries(self) -> list[str]:
        """The names handed to the kernel after "." and ".."."""
        return self.names[len(DOTS) :]

    def rewind(self, position: int) -> None:
        """Continue from `position` (the kernel went back: list again from there)."""
        del self.names[position:]
        self.pending.clear()
        self.exhausted = False


class PlasmaOperations(pyfuse3.Operations):
    """pyfuse3's request handlers for a plasmafs client."""

    supports_dot_lookup = False
    # Lock requests come to the mount when pyfuse3 has the lock handlers.
    supports_locks = locks_cross_hosts()

    def __init__(self, fs: Client, options: MountOptions, callers: CallerIds | None = None) -> None:
        super().__init__()
        self.fs = fs
        self.options = options
        # Set when the mount acts for its host's users (-o callers, with the right).
        self.callers = callers
        self._handles: dict[int, FileHandle] = {}
        self._open_on: dict[int, dict[int, FileHandle]] = {}  # inode -> its open files
        self._opened_by: dict[int, LocalCaller] = {}  # open file or directory -> caller
        # Open files whose writes went to another open file of their inode, until a
        # commit: their close or fsync commits that one.
        self._wrote_elsewhere: set[int] = set()
        self._uncached: set[int] = set()  # open files without the page cache (direct I/O)
        self._listings: dict[int, _Listing] = {}
        self._numbers = itertools.count(1)
        self.readahead = ReadAhead(fs, min(options.attr_timeout, options.entry_timeout))
        self.without_xattrs = WithoutXattrs(options.attr_timeout)
        self.looked_up = looked_up.LookedUp()  # block lists for the opens after lookups
        # pyfuse3 reads this when the kernel connects (FUSE_INIT).
        self.enable_writeback_cache = options.writeback
        self.view: KernelView | NoWritebackView = (
            KernelView(self._open_here) if options.writeback else NoWritebackView()
        )
        self.behind: WriteBehind | DirectWrites = (
            WriteBehind(fs, options.replication) if options.write_behind else DirectWrites(fs)
        )
        self.behind.before_release = self._before_release
        self.locks = KernelLocks(fs)
        self.parents = DirectoryParents()  # for ".." in listings

    def caller_of(self, args: Sequence[Any]) -> LocalCaller | None:
        """The caller a request with these arguments acts for: the one its context
        names, or for a request on an open file or directory (which has none), the one
        that opened it."""
        assert self.callers is not None
        if args and isinstance(args[-1], pyfuse3.RequestContext):
            return self.callers.of(args[-1])
        if args and isinstance(args[0], int):
            return self._opened_by.get(args[0])
        return None

    # --- names and attributes -------------------------------------------------------------

    async def lookup(
        self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        """The entry `name` of a directory."""
        if len(name) > MAX_NAME:
            raise pyfuse3.FUSEError(errno.ENAMETOOLONG)
        leased = self.behind.leased(parent_inode)
        if leased is not None:  # this mount knows every entry
            mine = leased.entries.get(_name(name))
            if mine is not None:
                return self._looked_up(parent_inode, name, mine)
            if self.options.negative_timeout > 0:
                return absent(self.options)
            raise pyfuse3.FUSEError(errno.ENOENT)
        known = self.readahead.entry(parent_inode, _name(name))
        if known is not None:
            return self._looked_up(parent_inode, name, known)
        try:
            where = At(parent_inode, _name(name))
            attr, blocks = await self.fs.lookup_for_reading(where, within=looked_up.WITHIN)
        except NotFoundError:
            if self.options.negative_timeout > 0:
                return absent(self.options)
            raise pyfuse3.FUSEError(errno.ENOENT) from None
        except Exception as exc:
            raise fuse_error(exc) from None
        if blocks is not None:
            self.looked_up.keep(attr.ino, current_caller(), blocks)
        return self._looked_up(parent_inode, name, attr)

    def _looked_up(self, parent: int, name: bytes, attr: Attr) -> pyfuse3.EntryAttributes:
        """The answer to a lookup of `attr` as `name` in `parent` (with writeback
        caching: under a new generation if the kernel's size and mtime of the file are
        outdated)."""
        self.parents.saw(parent, _name(name), attr)
        return self._entry(attr, self.view.looked_up(attr))

    def _listed(self, attr: Attr) -> pyfuse3.EntryAttributes:
        """`attr` in a new entry the kernel may make an inode of (create, listing)."""
        self.view.listed(attr)
        return self._entry(attr, self.view.generation(attr.ino))

    def _open_here(self, inode: int) -> bool:
        return inode in self._open_on

    def _numbered_of(self, inode: int) -> list[tuple[int, FileHandle]]:
        """The files open here on `inode`, with their numbers (fh)."""
        return list(self._open_on.get(inode, {}).items())

    def _handles_of(self, inode: int) -> list[FileHandle]:
        """The files open here on `inode`."""
        return list(self._open_on.get(inode, {}).values())

    def _forget_open(self, fh: int, inode: int) -> None:
        open_on = self._open_on.get(inode)
        if open_on is not None:
            open_on.pop(fh, None)
            if not open_on:
                del self._open_on[inode]

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        """The attributes of an inode (of an open file removed meanwhile: as last known,
        with no links left)."""
        known = self.behind.attr(inode) or self.readahead.attr(inode)
        if known is not None:
            return self._entry(known)
        gone = self._open_attr(inode)
        if gone is not None and gone.nlink == 0:  # removed here while open
            return self._entry(gone)
        try:
            attr = await self.fs.getattr(inode)
        except NotFoundError:
            kept = self._open_attr(inode)
            if kept is None:
                raise pyfuse3.FUSEError(errno.ENOENT) from None
            return entry(replace(kept, nlink=0), self.options)
        except Exception as exc:
            raise fuse_error(exc) from None
        return self._entry(attr)

    def _entry(self, attr: Attr, generation: int = 0) -> pyfuse3.EntryAttributes:
        """The kernel's view of `attr`; a file this mount is writing has the size
        written so far (the namenode has its size of the last commit)."""
        writing = self._writing(attr.ino)
        if writing is not None and writing.size is not None:
            attr = replace(attr, size=writing.size)
        answer = entry(attr, self.options)
        answer.generation = generation
        self.without_xattrs.saw(attr)
        return answer

    def _writing(self, inode: int) -> FileHandle | None:
        """The open file of `inode` with uncommitted writes, if there is one."""
        for handle in self._handles_of(inode):
            if handle.writing:
                return handle
        return None

    def _open_attr(self, inode: int) -> Attr | None:
        """The attributes of `inode` as a handle open here knows them, if any."""
        handles = self._handles_of(inode)
        return handles[0].attr if handles else None

    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        """chmod, chown, utimes and truncate."""
        self._check_writable()
        kept = self._new_file_change(inode, attr, fields) or self._same_times(inode, attr, fields)
        if kept is not None:
            return kept
        changes: dict[str, Any] = {}
        if fields.update_mode:
            changes["mode"] = stat.S_IMODE(attr.st_mode)
        if fields.update_uid:
            changes["uid"] = attr.st_uid
        if fields.update_gid:
            changes["gid"] = attr.st_gid
        if fields.update_mtime:
            changes["mtime_ns"] = attr.st_mtime_ns
            if self._writing(inode) is None and await self._touched_by_writer(inode, attr, ctx):
                # The namenode's clock: a writer who is not the owner may set that.
                changes["mtime_now"] = True
                del changes["mtime_ns"]
        if not changes and not fields.update_size:
            # chown(f, -1, -1), or the kernel's note of a ctime: nothing to change, and
            # nothing to refuse (POSIX).
            return await self.getattr(inode, ctx)
        await self._settle(inode)
        writing = self._writing(inode)
        if writing is None:
            if fields.update_size:
                changes["size"] = attr.st_size
            new = await self._changed(self.fs.setattr(inode, **changes))
        else:
            # The content is changing here: size and mtime go with its commit.
            if fields.update_size:
                await self._changed(writing.truncate(attr.st_size))
            new = await self._changed(writing.setattr(**changes))
        for handle in self._handles_of(inode):
            handle.attr = new
        self._committed(new)
        return self._entry(new)

    async def _touched_by_writer(
        self, inode: int, attr: pyfuse3.EntryAttributes, ctx: pyfuse3.RequestContext
    ) -> bool:
        """True if, on a mount acting for callers, a caller who does not own `inode`
        sets its times to now (utimensat's UTIME_NOW, which the kernel let through
        because the caller may write it). pyfuse3 does not pass the flag on: it fills
        in the time now, so a time within a second of now counts as now."""
        caller = current_caller()
        if caller is None or caller.uid == 0 or abs(time.time_ns() - attr.st_mtime_ns) > 1e9:
            return False
        return caller.uid != (await self.getattr(inode, ctx)).st_uid

    def _new_file_change(
        self, inode: int, attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields
    ) -> pyfuse3.EntryAttributes | None:
        """A change of times or size only, of a new small file kept in memory: kept
        with it, to go with its content (with writeback caching the kernel sends times
        at every close; dd truncates what it opened). None if the change is anything
        else, or a size beyond what the file may keep in memory."""
        if fields.update_mode or fields.update_uid or fields.update_gid:
            return None
        size = attr.st_size if fields.update_size else None
        mtime_ns = attr.st_mtime_ns if fields.update_mtime else None
        mine = self._handles_of(inode)
        kept = [h for h in mine if h.change_in_memory(size, mtime_ns)]
        return self._entry(kept[0].attr) if kept else None

    def _same_times(
        self, inode: int, attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields
    ) -> pyfuse3.EntryAttributes | None:
        """The answer to the kernel's own write-out of a file's times when they are
        those the namenode has (writeback caching only); None otherwise."""
        if not _times_only(fields):
            return None
        known = self.view.unchanged(inode, attr.st_mtime_ns if fields.update_mtime else None)
        return None if known is None else self._entry(known)

    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        """A symbolic link's target."""
        return (await answer(self.fs.readlink(inode))).encode("utf-8")

    # --- changes to directories -----------------------------------------------------------

    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        """A new directory."""
        self._check_writable()
        made = await self._changed(self.behind.mkdir(parent_inode, _name(name), stat.S_IMODE(mode)))
        self.parents.saw(parent_inode, _name(name), made)
        return entry(made, self.options)

    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        """A new symbolic link."""
        self._check_writable()
        await self._table(parent_inode)  # a listing under way must not miss the link
        await self._before_namenode_change()
        attr = await self._changed(self.fs.symlink(At(parent_inode, _name(name)), _name(target)))
        self.behind.known(parent_inode, _name(name), attr)
        return entry(attr, self.options)

    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        """A regular file, or a special file (FIFO, socket, device: kept as a name and
        attributes; the kernel of the host that opens it serves it)."""
        self._check_writable()
        try:
            kind = FileKind.of_mode(mode)
        except ValueError:
            raise pyfuse3.FUSEError(errno.EINVAL) from None
        await self._table(parent_inode)
        await self._before_namenode_change()
        if kind is FileKind.FILE:
            made = self._create(parent_inode, name, mode)
        elif kind.special:
            where = At(parent_inode, _name(name))
            made = self.fs.mknod(where, kind, stat.S_IMODE(mode), rdev if kind.is_device else 0)
        else:
            raise pyfuse3.FUSEError(errno.EINVAL)
        attr = await self._changed(made)
        self.behind.known(parent_inode, _name(name), attr)
        return self._listed(attr)

    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        """A hard link: a new name for an existing inode (the namenode makes it, once
        what is queued, the inode's creation among it, is there)."""
        self._check_writable()
        name = _name(new_name)
        await self._table(new_parent_inode)
        await self._settle(inode)
        attr = await self._changed(self.fs.link(inode, At(new_parent_inode, name)))
        self.behind.known(new_parent_inode, name, attr)
        self._links_changed(attr)
        return self._listed(attr)

    def _links_changed(self, attr: Attr) -> None:
        """`attr` (a new link count) for every name and open file of its inode here."""
        self.behind.relinked(attr)
        for handle in self._handles_of(attr.ino):
            handle.attr = replace(handle.attr, nlink=attr.nlink, ctime_ns=attr.ctime_ns)

    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        """Remove a file or symbolic link."""
        self._check_writable()
        await self._remove(parent_inode, _name(name), directory=False)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        """Remove an empty directory."""
        self._check_writable()
        await self._remove(parent_inode, _name(name), directory=True)

    async def _remove(self, parent: int, name: str, *, directory: bool) -> None:
        await self._table(parent)
        if self.behind.removable_here(parent, name):
            removed = await self._changed(
                self.behind.remove(parent, name, directory_wanted=directory)
            )
            self._unlinked(removed.ino)
            self.parents.removed(parent, name)
            return
        await self._before_namenode_change()
        where = At(parent, name)
        leased = self.behind.leased(parent)
        gone = leased.entries.get(name) if leased is not None else None
        await self._changed(self.fs.rmdir(where) if directory else self.fs.unlink(where))
        self.behind.forget_entry(parent, name)
        self.parents.removed(parent, name)
        if gone is not None and gone.nlink > 1 and not directory:  # other names stay
            self._links_changed(await answer(self.fs.getattr(gone.ino)))
        elif gone is not None:
            self._unlinked(gone.ino)

    def _unlinked(self, inode: int) -> None:
        """The last name of `inode` was removed here: what is open of it has no link
        left."""
        for handle in self._handles_of(inode):
            handle.unlinked()
            handle.attr = replace(handle.attr, nlink=0)

    async def _table(self, parent: int) -> LeasedDir | None:
        """The write-behind's table of directory `parent` about to be changed: leased
        now if it is an existing directory the mount may lease (see `WriteBehind`)."""
        return await answer(self.behind.lease_existing(parent))

    async def _before_namenode_change(self) -> None:
        """Send what is queued and wait for a send under way: a change the namenode
        makes now comes after them (an rmdir must see the queued entries, a rename the
        queued directory, a chmod the queued file...)."""
        await answer(self.behind.send())

    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        """Move an entry, replacing the target unless RENAME_NOREPLACE; swap two with
        RENAME_EXCHANGE."""
        self._check_writable()
        src, dst = At(parent_inode_old, _name(name_old)), At(parent_inode_new, _name(name_new))
        noreplace = bool(flags & pyfuse3.RENAME_NOREPLACE)
        exchange = bool(flags & pyfuse3.RENAME_EXCHANGE)
        # Renames go to the namenode; the directories' tables go with their leases.
        await answer(self.behind.send())
        await self._changed(self.fs.rename(src, dst, replace=not noreplace, exchange=exchange))
        self.parents.renamed((src.dir, src.name), (dst.dir, dst.name), exchange=exchange)
        await answer(self.behind.release([parent_inode_old, parent_inode_new]))
        # Their entries in the tables of their own parents: links and times changed.
        for parent in {parent_inode_old, parent_inode_new}:
            if self.behind.attr(parent) is not None:
                self.behind.update(await answer(self.fs.getattr(parent)))

    # --- directories ----------------------------------------------------------------------

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        """Start listing a directory."""
        number = next(self._numbers)
        self._listings[number] = _Listing(inode)
        self._remember_caller(number)
        return number

    def _remember_caller(self, number: int) -> None:
        caller = current_caller()
        if caller is not None:
            self._opened_by[number] = caller

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        """Entries with attributes from position `start_id`, as many as the kernel takes:
        "." and ".." first, as a local disk lists them."""
        listing = self._listings[fh]
        if start_id < len(listing.names):
            listing.rewind(start_id)
        try:
            while len(listing.names) < len(DOTS):
                dot = DOTS[len(listing.names)]
                ino = listing.ino if dot == "." else self.parents.of(listing.ino)
                position = len(listing.names) + 1
                if not pyfuse3.readdir_reply(token, dot.encode(), dot_entry(ino), position):
                    return
                listing.names.append(dot)
            while True:
                if not listing.pending:
                    if listing.exhausted:
                        return
                    await self._fetch(listing)
                    continue
                item = listing.pending[0]
                assert item.attr is not None
                name = item.name.encode("utf-8")
                position = len(listing.names) + 1
                if not pyfuse3.readdir_reply(token, name, self._listed(item.attr), position):
                    return  # the kernel's buffer is full: the rest waits for its next call
                self.parents.saw(listing.ino, item.name, item.attr)
                listing.names.append(listing.pending.popleft().name)
        except Exception as exc:
            raise fuse_error(exc) from None

    async def _fetch(self, listing: _Listing) -> None:
        """The next page of entries after the last one the kernel took (all of them
        at once if this mount leases the directory or read it ahead)."""
        leased = self.behind.leased(listing.ino)
        if leased is not None:
            listing.pending.extend(leased.listing()[len(listing.entries) :])
            listing.exhausted = True
            return
        if not listing.entries:
            whole = await self.readahead.listing(listing.ino)
            if whole is not None:
                listing.pending.extend(whole)
                listing.exhausted = True
                return
        after = listing.entries[-1] if listing.entries else ""
        page, more = await self.fs.readdir(
            listing.ino, after=after, limit=DIRECTORY_PAGE, plus=True
        )
        self.readahead.listed(listing.ino, page)
        listing.pending.extend(page)
        listing.exhausted = not more or not page

    async def releasedir(self, fh: int) -> None:
        """The listing is over (and the directory's flock locks taken through it)."""
        self._listings.pop(fh, None)
        await self._release_locks(fh)
        self._opened_by.pop(fh, None)

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        """Every change acknowledged so far becomes durable."""
        await self._send_queue()
        await answer(self.fs.sync())

    async def _send_queue(self) -> None:
        """Send what the write-behind queued, or report (once) a send that failed."""
        await answer(self.behind.send_reporting())

    # --- files ----------------------------------------------------------------------------

    async def create(
        self,
        parent_inode: int,
        name: bytes,
        mode: int,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        """A new file, open (in a directory this mount leases: queued, its content kept
        until close while it is small)."""
        self._check_writable()
        leased = await self._table(parent_inode)
        if leased is not None and self.behind.queues_here(leased):
            behind = self.behind
            assert isinstance(behind, WriteBehind)  # only it leases directories
            attr = await self._changed(behind.create(parent_inode, _name(name), mode))
            limit = (await answer(self.fs.connection())).inline_limit
            return self._opened(NewFile(self.fs, behind, attr, limit), flags), self._listed(attr)
        await self._before_namenode_change()
        attr = await self._changed(self._create(parent_inode, name, mode))
        self.behind.known(parent_inode, _name(name), attr)
        handle: FileHandle = OpenFile(self.fs, attr, writable=_writes(flags))
        return self._opened(handle, flags), self._listed(attr)

    def _create(self, parent_inode: int, name: bytes, mode: int) -> Awaitable[Attr]:
        where = At(parent_inode, _name(name))
        return self.fs.create(where, stat.S_IMODE(mode), replication=self.options.replication)

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        """Open a file: its attributes now, its block list at the first read."""
        writes = _writes(flags)
        if writes:
            self._check_writable()
        if inode in self.behind.unsent:
            await answer(self.behind.send())
        if writes and flags & os.O_TRUNC:
            await self._truncate_at_open(inode)
        kept = (
            None
            if writes or self._open_here(inode)
            else self.looked_up.take(inode, current_caller())
        )
        try:
            if flags & os.O_ACCMODE == os.O_WRONLY:
                handle: FileHandle = OpenFile(self.fs, await self.fs.getattr(inode), writable=True)
            elif kept is not None and (ready := await self._open_looked_up(kept)) is not None:
                handle = ready
            else:  # the block list now: what was committed before it, even if removed
                handle = await OpenFile.for_reading(self.fs, inode, writable=writes)
        except NotFoundError:
            # Removed through another client while the kernel kept its name: ESTALE
            # makes the kernel look the name up again and retry the open once.
            self.readahead.forget()
            raise pyfuse3.FUSEError(errno.ESTALE) from None
        except Exception as exc:
            raise fuse_error(exc) from None
        self.behind.update(handle.attr)  # another client may have written it meanwhile
        try:
            self.view.opening(handle.attr)
        except pyfuse3.FUSEError:
            await handle.release()
            raise
        return self._opened(handle, flags)

    async def _open_looked_up(self, blocks: BlockList) -> OpenFile | None:
        """An open file for reading on the block list a lookup brought, if the file is
        still the version it describes (the attributes asked now are the same); its
        first chunk is fetched while the namenode answers. None: it changed."""
        assert blocks.attr is not None
        handle = OpenFile.on_reader(self.fs, await self.fs.reader_of(blocks))
        try:
            current = await self.fs.getattr(blocks.attr.ino)
        except BaseException:
            await handle.release()
            raise
        if current != blocks.attr:
            await handle.release()
            return None
        return handle

    async def _truncate_at_open(self, inode: int) -> None:
        """O_TRUNC (the kernel leaves it to the mount): the content goes at the open,
        written or not after it, unless something open here is writing it."""
        if self._writing(inode) is not None:
            return
        known = self.behind.attr(inode)
        attr = known if known is not None else await answer(self.fs.getattr(inode))
        if attr.size > 0:
            await self._settle(inode)
            truncated = self.fs.setattr(inode, size=0, mtime_now=True)  # a change of content
            self._committed(await self._changed(truncated))

    def _opened(self, handle: FileHandle, flags: int) -> pyfuse3.FileInfo:
        number = next(self._numbers)
        self._handles[number] = handle
        self._open_on.setdefault(handle.ino, {})[number] = handle
        self._remember_caller(number)
        # Close-to-open: drop cached pages of an earlier version on every open.
        uncached = handle.locked_elsewhere or writes_around_page_cache(
            flags, writeback=self.options.writeback
        )
        if uncached:
            self._uncached.add(number)
        return pyfuse3.FileInfo(fh=number, keep_cache=False, direct_io=uncached)

    async def read(self, fh: int, off: int, size: int) -> bytes | memoryview:  # type: ignore[override]
        """Bytes of an open file (pyfuse3 replies from any contiguous buffer, so a view
        into data fetched ahead is not copied first)."""
        return await answer(self._through(self._handles[fh]).read(off, size))

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        """Bytes into an open file (one at a time per open file, in the order they
        came: the kernel writes cached pages back several at once; the handle orders
        them)."""
        self.readahead.forget()
        handle = self._handles[fh]
        if handle.attr.mode & SET_ID and not handle.writing:
            await self._drop_set_id(handle)
        through = self._through(handle)
        if through is not handle:
            self._wrote_elsewhere.add(fh)
        return await answer(through.write(off, buf))

    def _through(self, handle: FileHandle) -> FileHandle:
        """The open file that reads and writes for `handle`: the one of its inode with
        uncommitted writes, if another has them. Every open of a file on one mount sees
        what any other wrote at once, as on a local disk: processes of one host share
        a file (a log and its reader, SQLite's WAL index mapped by several) and the
        kernel writes a mapping's pages back through any open of it."""
        if handle.writing:
            return handle
        writing = self._writing(handle.ino)
        return handle if writing is None else writing

    async def _drop_set_id(self, handle: FileHandle) -> None:
        """A write by a local caller other than root clears the file's set-user-ID bit,
        and its set-group-ID bit if group members may execute it, as Linux does (the
        kernel asks it itself only of writes through its page cache)."""
        caller = current_caller()
        mode = handle.attr.mode
        kept = mode & ~stat.S_ISUID
        if mode & stat.S_IXGRP:
            kept &= ~stat.S_ISGID
        if caller is None or caller.uid == 0 or kept == mode:
            return
        attr = await self._changed(self.fs.setattr(handle.ino, mode=kept))
        for other in self._handles_of(attr.ino):
            other.attr = attr
        self._committed(attr)

    async def _before_release(self, inodes: set[int]) -> None:
        """Files kept in memory in directories about to be released become ordinary
        open files (once released, nothing is queued for them)."""
        for number, handle in list(self._handles.items()):
            if handle.ino in inodes:
                with acting_for(self._opened_by.get(number)):
                    await answer(handle.settle())

    async def _settle(self, inode: int) -> None:
        """Every handle of `inode` kept in memory becomes an ordinary one, and the
        queue is sent (before a change the namenode makes to the inode)."""
        for number, handle in self._numbered_of(inode):
            with acting_for(self._opened_by.get(number)):
                await answer(handle.settle())
        await self._before_namenode_change()

    async def flush(self, fh: int) -> None:
        """close(2): what was written becomes visible (and durable within about a
        second, at once with -o sync; in a leased directory: queued, for others once
        sent or recalled)."""
        handle = self._handles[fh]
        if self.options.writeback:
            # The kernel wrote the file's cached pages back through any descriptor of
            # it open for writing: what they hold is part of what this close makes
            # visible.
            for other in self._handles_of(handle.ino):
                if other is not handle and other.writing:
                    await self._commit(other)
        await self._commit(self._committing(fh))

    def _committing(self, fh: int) -> FileHandle:
        """The open file a close or fsync of `fh` commits: the one its writes went to."""
        handle = self._handles[fh]
        if fh in self._wrote_elsewhere:
            self._wrote_elsewhere.discard(fh)
            return self._through(handle)
        return handle

    async def fsync(self, fh: int, datasync: bool) -> None:
        """fsync(2): the file's content committed, and every change acknowledged so far
        (the file's name among them) durable."""
        await self._commit(self._committing(fh))
        await self._send_queue()
        if not self.options.sync:
            await answer(self.fs.sync())

    async def _commit(self, handle: FileHandle) -> None:
        if not handle.writing:
            await answer(handle.commit())
            return
        self.readahead.forget()
        self._committed(await self._changed(handle.commit()))
        await self._others_read_anew(handle)

    async def _others_read_anew(self, handle: FileHandle) -> None:
        """The other open files of `handle`'s inode here read the version it just
        committed, not the one they opened: one mount is one host, coherent as a local
        disk (a process fsyncs, another one reads)."""
        for number, other in self._numbered_of(handle.ino):
            if other is not handle:
                with acting_for(self._opened_by.get(number)):
                    await answer(other.revalidate())

    def _committed(self, attr: Attr) -> None:
        """A leased directory's table (and the kernel's view) takes the attributes a
        change through this mount answered."""
        self.behind.update(attr)
        self.view.committed(attr)

    async def release(self, fh: int) -> None:
        """The last descriptor of an open file closed."""
        await self._release_locks(fh)
        handle = self._handles.pop(fh, None)
        self._opened_by.pop(fh, None)
        self._wrote_elsewhere.discard(fh)
        self._uncached.discard(fh)
        if handle is not None:
            self._forget_open(fh, handle.ino)
            writing, cached = handle.writing, handle.prefetched
            try:
                await handle.release()
                if writing:
                    self._committed(handle.attr)
                    await self._others_read_anew(handle)
                elif cached:
                    self._drop_cached_pages(handle.ino)
            except Exception as exc:  # nobody to tell but the log
                log.warning("closing inode %d failed: %s", handle.ino, exc)
            if writing:
                self.readahead.forget()

    def _drop_cached_pages(self, inode: int) -> None:
        """Let the kernel free the pages read through the last open of `inode` now.
        The next open drops them anyway (close-to-open), and pages freed at once are
        the next reads' pages, instead of memory never touched before. The call waits
        on this loop's answers if a page is dirty (writeback caching) or being read (a
        handle of the file open here), so it is skipped then."""
        if self.options.writeback or self._open_here(inode):
            return
        try:
            pyfuse3.invalidate_inode(inode)
        except OSError as exc:  # the kernel forgot the inode already
            log.debug("dropping the cached pages of inode %d: %s", inode, exc)

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        """The kernel let go of these inodes."""
        inodes = [inode for inode, _ in inode_list]
        self.view.forget(inodes)
        self.parents.forget(inodes)

    # --- file locks (mount/file_locks.py) ------------------------------------------------

    async def getlk(
        self,
        inode: int,
        fh: int,
        owner: int,
        kind: int,
        start: int,
        end: int,
        pid: int,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[int, int, int, int] | None:
        """F_GETLK: the lock in the way, held on any host, if any."""
        await self._settle(inode)
        return await self.locks.test(inode, owner, kind, start, end)

    async def setlk(
        self,
        inode: int,
        fh: int,
        owner: int,
        kind: int,
        start: int,
        end: int,
        pid: int,
        sleep: bool,
        request: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        """F_SETLK, F_SETLKW (and OFD locks): an unlock sends what was written first,
        a lock taken drops what this host cached of the file (NFS's rules: the next
        holder reads what the last one wrote)."""
        change = self.locks.set(
            fh, inode, owner, kind, (start, end), pid, wait=sleep, request=request
        )
        await self._lock_change(fh, inode, kind == fcntl.F_UNLCK, change, ctx.pid)

    async def flock(
        self, inode: int, fh: int, owner: int, op: int, request: int, ctx: pyfuse3.RequestContext
    ) -> None:
        """flock(2), with the same rules as setlk."""
        change = self.locks.flock(fh, inode, owner, op, ctx.pid, request)
        await self._lock_change(fh, inode, op & ~fcntl.LOCK_NB == fcntl.LOCK_UN, change, ctx.pid)

    async def _release_locks(self, fh: int) -> None:
        """The OFD and flock locks taken through open file `fh` end (its last close);
        a failure is logged, and the release goes on (a lost connection took them)."""
        if not self.locks.locked_through(fh):
            return
        try:
            await self.locks.released(fh)
        except pyfuse3.FUSEError as exc:
            log.warning("releasing the locks of open file %d: errno %d", fh, exc.errno)

    async def flush_locks(self, fh: int, owner: int) -> None:
        """After flush: the closing owner's POSIX locks on the file end."""
        handle = self._handles.get(fh)
        if handle is not None:
            await self.locks.closed(handle.ino, owner)

    def lock_interrupted(self, request: int) -> None:
        """The process waiting in lock request `request` got a signal."""
        self.locks.interrupted(request)

    async def _lock_change(
        self, fh: int, inode: int, unlocking: bool, change: Awaitable[None], pid: int
    ) -> None:
        """`change` of a lock on `inode` through open file `fh` by process `pid`, once
        the namenode has the inode (it may be queued or in memory here), between what
        an unlock needs before it and what a lock taken needs after it (and before it:
        no shared mapping of the file on two hosts)."""
        try:
            await self._settle(inode)
            if unlocking:
                await self._before_unlock(inode)
            elif fh not in self._uncached:
                await self.locks.refuse_mapping_between_hosts(inode, pid)
        except BaseException:
            close_unstarted(change)
            raise
        await change
        if not unlocking:
            await self._after_lock(inode)

    async def _before_unlock(self, inode: int) -> None:
        """What is written to `inode` here goes to the cluster before a lock on it is
        let go (with writeback caching: out of the kernel's cache first)."""
        if self.options.writeback:
            await _drop_kernel_copy(inode)
        for number, handle in self._numbered_of(inode):
            if handle.writing:
                with acting_for(self._opened_by.get(number)):
                    self._committed(await answer(handle.commit()))

    async def _after_lock(self, inode: int) -> None:
        """Forget what this host holds of `inode`'s content: the kernel's pages and
        the open files' versions."""
        self.readahead.forget()
        for number, handle in self._numbered_of(inode):
            with acting_for(self._opened_by.get(number)):
                await answer(handle.revalidate())
        await _drop_kernel_copy(inode)

    # --- extended attributes --------------------------------------------------------------

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        """An extended attribute's value. With writeback caching the kernel asks for
        security.capability before every write(2) once the mount answers getxattr; it
        is answered ENOSYS there, and the kernel stops asking (and reading them)."""
        if self.options.writeback:
            raise pyfuse3.FUSEError(errno.ENOSYS)
        _check_xattr_name(name)
        if self._known_without_xattrs(inode):  # ls -l asks every file for two
            raise pyfuse3.FUSEError(errno.ENODATA)
        return await answer(self.fs.getxattr(inode, name))

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> Sequence[bytes]:
        """The names of the extended attributes the caller may see (an SELinux label
        set through the library is not one of them here)."""
        if self._known_without_xattrs(inode):
            return []
        names = [os.fsencode(n) for n in await answer(self.fs.listxattr(inode))]
        return [n for n in names if n != SELINUX_LABEL]

    async def setxattr(
        self, inode: int, name: bytes, value: bytes, ctx: pyfuse3.RequestContext
    ) -> None:
        """Set an extended attribute (pyfuse3 passes no XATTR_CREATE or XATTR_REPLACE:
        the kernel's own check of them, a getxattr first, stands)."""
        _check_xattr_name(name)
        await self._change_xattrs(inode, lambda: self.fs.setxattr(inode, name, value))

    async def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        """Remove an extended attribute."""
        _check_xattr_name(name)
        await self._change_xattrs(inode, lambda: self.fs.removexattr(inode, name))

    async def _change_xattrs(self, inode: int, change: Callable[[], Awaitable[None]]) -> None:
        """`change` made by the namenode once the inode is there (queued or in memory
        until now), and the attributes known here updated after it."""
        self._check_writable()
        await self._settle(inode)
        self.without_xattrs.forget(inode)
        await self._changed(change())
        self.without_xattrs.forget(inode)  # and what was answered while it was made
        new = await answer(self.fs.getattr(inode))
        for handle in self._handles_of(inode):
            handle.attr = new
        self._committed(new)

    def _known_without_xattrs(self, inode: int) -> bool:
        """Whether this mount knows, fresh enough, that `inode` has no attributes."""
        known = self.behind.attr(inode) or self.readahead.attr(inode) or self._open_attr(inode)
        if known is not None:
            return not known.has_xattrs
        return self.without_xattrs.known(inode)

    # --- the file system ------------------------------------------------------------------

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        """Space and inode counts from the namenode's fsstat."""
        st = await answer(self.fs.fsstat())
        out = pyfuse3.StatvfsData()
        bs = st.blocksize or 4096
        out.f_bsize = out.f_frsize = bs
        out.f_blocks = st.capacity_bytes // bs
        out.f_bfree = out.f_bavail = max(st.capacity_bytes - st.used_bytes, 0) // bs
        used = st.files + st.directories + st.symlinks
        out.f_files = used + 2**32
        out.f_ffree = out.f_favail = 2**32
        out.f_namemax = MAX_NAME
        return out

    async def close(self) -> None:
        """Abort what open files wrote and did not commit (the mount is going away)."""
        await self.readahead.close()
        for handle in list(self._handles.values()):
            await handle.abort()
        self._handles.clear()
        await self.behind.close()

    async def _changed(self, work: Awaitable[T]) -> T:
        """`work`'s result (or its errno), with what was read ahead dropped once it
        is done: a walk under way during the change may have missed it."""
        try:
            return await answer(work)
        finally:
            self.readahead.forget()

    def _check_writable(self) -> None:
        """Refuse a change on a read-only mount; otherwise drop what was read ahead,
        which the change may make stale."""
        if self.options.ro:
            raise pyfuse3.FUSEError(errno.EROFS)
        self.readahead.forget()


async def _drop_kernel_copy(inode: int) -> None:
    """Make the kernel drop (after writing back) its cached pages of `inode`. In a
    thread: the kernel may need this loop to answer while it does."""
    try:
        await asyncio.to_thread(pyfuse3.invalidate_inode, inode)
    except OSError as exc:  # the kernel forgot the inode already
        log.debug("dropping the cached pages of inode %d: %s", inode, exc)


def _check_xattr_name(name: bytes) -> None:
    """EOPNOTSUPP without a namenode request for a namespace plasmafs keeps none of
    (ls -l asks for system.posix_acl_access), and for SELinux labels, which a mount
    does not keep: `ls -l` asks every file for one, and stops asking a file system
    that answers EOPNOTSUPP (SELinux labels FUSE mounts by mount options instead)."""
    if name == SELINUX_LABEL or not name.startswith((b"user.", b"trusted.", b"security.")):
        raise pyfuse3.FUSEError(errno.EOPNOTSUPP)


def _times_only(fields: pyfuse3.SetattrFields) -> bool:
    return not (fields.update_mode or fields.update_uid or fields.update_gid or fields.update_size)


def writes_around_page_cache(flags: int, *, writeback: bool) -> bool:
    """True if writes through an open with `flags` should go to the mount straight from
    the program's buffer (FUSE direct I/O). The kernel would otherwise copy what is
    written into its page cache on the way, for nothing: the next open drops those
    pages (close-to-open), and nothing reads or maps them through a write-only open.
    Writeback caching needs the page cache to gather writes; an O_RDWR open may map
    the file, which needs it too."""
    return flags & os.O_ACCMODE == os.O_WRONLY and not writeback


def _writes(flags: int) -> bool:
    return flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)


# Every request handler answers, whatever happens inside it (see `answered`), for the
# request's caller (see `for_its_caller`).
for _handler in (
    "lookup", "getattr", "setattr", "readlink", "mkdir", "symlink", "mknod", "link",
    "unlink", "rmdir", "rename", "opendir", "readdir", "releasedir", "fsyncdir", "create",
    "open", "read", "write", "flush", "fsync", "release", "forget", "statfs", "getxattr",
    "listxattr", "setxattr", "removexattr", "getlk", "setlk", "flock", "flush_locks",
):  # fmt: skip
    _method = getattr(PlasmaOperations, _handler)
    _guarded = answered(for_its_caller(_method), replies=_handler != "forget")
    setattr(PlasmaOperations, _handler, _guarded)
