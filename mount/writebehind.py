"""Write-behind of small files and directories in directories the mount leases.

Every directory the mount makes is leased to its namenode session from birth
(`namenode/directory_leases.py`), and an existing directory of the mount's user is leased when
the mount first changes something in it (unless it is the root, nobody else is
changing it, it was not recalled in the last REFUSED_RETRY seconds, and it holds at
most MAX_LEASED_LISTING entries, which the mount then lists once). Until the lease
ends, nobody else reads or changes its entries, so the mount keeps them in a table
and answers lookups, listings, attributes, creates, mkdirs, unlinks and rmdirs in it
by itself, with inode numbers the session reserved. The changes queue here and go
to the namenode in one relaxed transaction every FLUSH_INTERVAL (or sooner: a full
queue, fsync, and any request that needs the namenode to know them first). Small
files (up to the namenode's inline limit) are written at close into the queue as
well; bigger ones, and every other change (rename, chmod, truncate, symlinks), send
the queue first and then go to the namenode as before.

Another client that needs a leased directory recalls it: the mount hears of it
(`lease_news`), sends its queue, drops the table and releases the lease, so the
other client then sees everything the mount did. A directory left idle for
IDLE_RELEASE is released the same way.

What a crash may lose: changes in leased directories from the last FLUSH_INTERVAL
(and, as for every relaxed commit, the namenode's last second before its WAL flush),
never half of a transaction; what fsync acknowledged is never lost. If the connection
to the namenode is lost, the queue cannot be sent (its inode numbers and leases belong
to the lost session): it is dropped, logged, and the next fsync reports EIO.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

import pyfuse3

from plasmafs.client import At, Client
from plasmafs.client.callers import LocalCaller, acting_for, current_caller
from plasmafs.client.connection import Connection
from plasmafs.client.session_requests import SessionRequests
from plasmafs.client.transaction import Transaction, results_of
from plasmafs.core.attributes import Attr, DirEntry, FileKind
from plasmafs.core.errors import BusyError, ConnectionLostError, PlasmaError

log = logging.getLogger(__name__)

FLUSH_INTERVAL = 0.1  # s between sends of the queue
MAX_QUEUE = 4096  # changes queued at most; the next one waits for a send
RESERVE_BATCH = 1024  # inode numbers reserved at a time
IDLE_RELEASE = 30.0  # s without use after which a leased directory is released
NEWS_WAIT = 1.0  # s one lease_news request waits
LOCK_WAIT = 5.0  # s a send waits for locks of the mount's other transactions
MAX_LEASED_LISTING = 4096  # entries an existing directory may hold to be leased
LISTING_PAGE = 1024
REFUSED_RETRY = 10.0  # s before a directory refused or recalled is leased again


@dataclass(slots=True)
class _Change:
    """One queued change: "mkdir", "create", "content", "unlink" or "rmdir"."""

    kind: str
    parent: int = 0
    name: str = ""
    ino: int = 0
    mode: int = 0
    data: bytes = b""
    mtime_ns: int | None = None  # of a content, if the program set one
    caller: LocalCaller | None = None  # the local caller it is made for (-o callers)


@dataclass(slots=True)
class LeasedDir:
    """A directory this mount leases: its own attributes and every entry's."""

    attr: Attr
    entries: dict[str, Attr] = field(default_factory=dict)
    used: float = field(default_factory=time.monotonic)

    @property
    def writable(self) -> bool:
        """The owner may create and remove here (the mount made it, as its owner);
        otherwise changes go to the namenode, which refuses them."""
        return self.attr.mode & 0o300 == 0o300

    def listing(self) -> list[DirEntry]:
        """Every entry, in name order."""
        return [DirEntry(n, a.ino, a.kind, a) for n, a in sorted(self.entries.items())]

    def touched(self, nlink_delta: int = 0) -> None:
        now = time.time_ns()
        self.attr = replace(
            self.attr, mtime_ns=now, ctime_ns=now, nlink=self.attr.nlink + nlink_delta
        )
        self.used = time.monotonic()


class WriteBehind:
    """The leased directories of one mount and its queue of changes."""

    def __init__(self, fs: Client, replication: int) -> None:
        self.fs = fs
        self.replication = replication
        self.dirs: dict[int, LeasedDir] = {}
        self.located: dict[int, tuple[int, str]] = {}  # inode -> (leased dir, name)
        self.unsent: set[int] = set()  # inodes whose creation or content is queued
        self.flushes = 0
        self._queue: list[_Change] = []
        self._pool: list[int] = []
        self._refilling = asyncio.Lock()  # one reservation at a time: none is dropped
        self._conn: Connection | None = None  # whose session the leases belong to
        self._failure: PlasmaError | None = None
        self._sending = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._releasing: set[asyncio.Task[None]] = set()
        self._leasing: dict[int, asyncio.Task[LeasedDir | None]] = {}  # existing dirs
        # Files whose queued creation their writer took along (`claim_create`): set
        # once that writer's transaction ended.
        self._claims: dict[int, asyncio.Event] = {}
        self._claimed: dict[int, _Change] = {}
        self.kept_bytes = 0  # content new files keep in memory (`NewFile`), all together
        self._refused: dict[int, float] = {}  # directory -> not tried again before then
        # Called with the inodes of a directory about to be released, while its table
        # still stands: files open in memory there become ordinary open files.
        self.before_release: Callable[[set[int]], Awaitable[None]] | None = None

    # --- what the mount asks ----------------------------------------------------------------

    def leased(self, ino: int) -> LeasedDir | None:
        """The table of directory `ino` if this mount leases it (and the session that
        holds the lease is still the connection's)."""
        if not self.dirs:
            return None
        if self._conn is None or self._conn.closed:
            self._lost("the connection to the namenode was lost")
            return None
        directory = self.dirs.get(ino)
        if directory is not None:
            directory.used = time.monotonic()
        return directory

    async def lease_existing(self, ino: int) -> LeasedDir | None:
        """The table of directory `ino`, leased and listed now if it was not leased
        (None if it stays the namenode's: not the mount user's, being changed by
        others, too big, or the namenode refused it lately)."""
        directory = self.leased(ino)
        if directory is not None:
            return directory
        task = self._leasing.get(ino)
        if task is None:
            if ino == pyfuse3.ROOT_INODE or self._closing:
                return None  # every path goes through the root: others would recall it
            if self._refused.get(ino, 0.0) > time.monotonic():
                return None
            task = asyncio.ensure_future(self._lease_and_list(ino))
            self._leasing[ino] = task
            task.add_done_callback(lambda _: self._leasing.pop(ino, None))
        return await asyncio.shield(task)

    async def _lease_and_list(self, ino: int) -> LeasedDir | None:
        try:
            conn = await self.fs.connection()
            if self._conn is not conn:
                self._adopt(conn)
            await SessionRequests(conn).lease_dir(ino)
        except PlasmaError as exc:
            log.debug("directory %d stays the namenode's: %s", ino, exc)
            self._refuse(ino)
            return None
        try:
            attr, entries = await asyncio.gather(self.fs.getattr(ino), self._list(ino))
        except PlasmaError as exc:
            log.info("leased directory %d given back: %s", ino, exc)
            self._refuse(ino)
            await _quietly(SessionRequests(conn).release_leases([ino]))
            return None
        if conn.closed:
            return None
        directory = LeasedDir(attr)
        for entry in entries:
            assert entry.attr is not None
            self._add(ino, directory, entry.name, entry.attr)
        self.dirs[ino] = directory
        self._start()
        return directory

    async def _list(self, ino: int) -> list[DirEntry]:
        """Every entry of directory `ino` (leased: nobody else changes them)."""
        entries: list[DirEntry] = []
        listing = self.fs.scandir(ino, plus=True, page=LISTING_PAGE)
        async with contextlib.aclosing(listing):
            async for entry in listing:
                entries.append(entry)
                if len(entries) > MAX_LEASED_LISTING:
                    raise BusyError(f"more than {MAX_LEASED_LISTING} entries")
        return entries

    def _refuse(self, ino: int) -> None:
        now = time.monotonic()
        if len(self._refused) > MAX_LEASED_LISTING:
            self._refused = {i: t for i, t in self._refused.items() if t > now}
        self._refused[ino] = now + REFUSED_RETRY

    def attr(self, ino: int) -> Attr | None:
        """The attributes of `ino` if it is a leased directory or an entry of one."""
        directory = self.leased(ino)
        if directory is not None:
            return directory.attr
        where = self.located.get(ino)
        if where is None:
            return None
        parent = self.leased(where[0])
        return parent.entries.get(where[1]) if parent is not None else None

    def queues_here(self, directory: LeasedDir) -> bool:
        """True if the current caller's changes in leased `directory` may be queued: its
        owner may change it (`LeasedDir.writable`), and the caller is that owner, in its
        group unless it is set-group-ID (always, on a mount of one user): new entries
        then belong to the directory's owner and group, as the table makes them."""
        if not directory.writable:
            return False
        caller = current_caller()
        if caller is None:
            return True
        d = directory.attr
        return caller.uid == d.uid and (caller.gid == d.gid or bool(d.mode & stat.S_ISGID))

    async def mkdir(self, parent: int, name: str, mode: int) -> Attr:
        """A new directory, leased: queued in a leased `parent`, else made now."""
        mode = stat.S_IMODE(mode)
        directory = await self.lease_existing(parent)
        if directory is None or not self.queues_here(directory):
            return await self._mkdir_now(parent, name, mode)
        self._check_free(directory, name)
        attr = self._new_attr(directory, FileKind.DIRECTORY, await self._take_ino(), mode)
        await self._queued(_Change("mkdir", parent, name, attr.ino, mode))
        self._add(parent, directory, name, attr)
        directory.touched(+1)
        self.dirs[attr.ino] = LeasedDir(attr)
        return attr

    async def create(self, parent: int, name: str, mode: int) -> Attr:
        """A new empty file in leased directory `parent`, queued."""
        mode = stat.S_IMODE(mode)
        directory = self.dirs[parent]
        self._check_free(directory, name)
        attr = self._new_attr(directory, FileKind.FILE, await self._take_ino(), mode)
        await self._queued(_Change("create", parent, name, attr.ino, mode))
        self._add(parent, directory, name, attr)
        directory.touched()
        return attr

    async def content(self, ino: int, data: bytes, mtime_ns: int | None = None) -> Attr | None:
        """The whole content of new file `ino`, queued (with the mtime the program set,
        if it did); its new attributes (None if it is not in a leased directory's
        table any more: removed, or the table dropped with a lost session)."""
        where = self.located.get(ino)
        directory = self.leased(where[0]) if where is not None else None
        if where is None or directory is None or where[1] not in directory.entries:
            return None
        now = time.time_ns()
        mtime = now if mtime_ns is None else mtime_ns
        attr = replace(directory.entries[where[1]], size=len(data), mtime_ns=mtime, ctime_ns=now)
        await self._queued(_Change("content", ino=ino, data=data, mtime_ns=mtime_ns))
        directory.entries[where[1]] = attr
        return attr

    async def remove(self, parent: int, name: str, *, directory_wanted: bool) -> Attr:
        """unlink (or rmdir) `name` in leased directory `parent`, queued; the
        attributes of what went."""
        directory = self.dirs[parent]
        attr = directory.entries.get(name)
        if attr is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        if directory_wanted:
            if attr.kind is not FileKind.DIRECTORY:
                raise pyfuse3.FUSEError(errno.ENOTDIR)
            child = self.dirs.get(attr.ino)
            if child is None:
                raise AssertionError("the caller sends rmdir of unleased directories")
            if child.entries:
                raise pyfuse3.FUSEError(errno.ENOTEMPTY)
        elif attr.kind is FileKind.DIRECTORY:
            raise pyfuse3.FUSEError(errno.EISDIR)
        await self._queued(_Change("rmdir" if directory_wanted else "unlink", parent, name))
        del directory.entries[name]
        self.located.pop(attr.ino, None)
        if directory_wanted:
            del self.dirs[attr.ino]  # the namenode ends its lease with it
        directory.touched(-1 if directory_wanted else 0)
        return attr

    def removable_here(self, parent: int, name: str) -> bool:
        """True if removing `name` from leased `parent` can be queued (a directory
        only if leased too)."""
        directory = self.dirs.get(parent)
        if directory is None or not self.queues_here(directory):
            return False
        attr = directory.entries.get(name)
        if attr is not None and attr.kind is not FileKind.DIRECTORY and attr.nlink > 1:
            return False  # other names stay: the namenode counts the links
        return attr is None or attr.kind is not FileKind.DIRECTORY or attr.ino in self.dirs

    def update(self, attr: Attr) -> None:
        """Attributes the namenode just answered for `attr.ino` replace the table's."""
        if attr.ino in self.dirs:
            self.dirs[attr.ino].attr = attr
        where = self.located.get(attr.ino)
        if where is not None and where[0] in self.dirs:
            self.dirs[where[0]].entries[where[1]] = attr

    def relinked(self, attr: Attr) -> None:
        """The link count (and ctime) of `attr.ino` changed: every name of it in a
        table takes them (a file with hard links has several)."""
        for directory in self.dirs.values():
            for name, known in directory.entries.items():
                if known.ino == attr.ino:
                    directory.entries[name] = replace(
                        known, nlink=attr.nlink, ctime_ns=attr.ctime_ns
                    )

    def forget_entry(self, parent: int, name: str) -> None:
        """`name` left leased `parent` through the namenode."""
        directory = self.dirs.get(parent)
        if directory is not None:
            attr = directory.entries.pop(name, None)
            if attr is not None:
                self.located.pop(attr.ino, None)
                self.dirs.pop(attr.ino, None)
                directory.touched(-1 if attr.is_dir else 0)

    def known(self, parent: int, name: str, attr: Attr) -> None:
        """An entry made in leased `parent` through the namenode (a symlink, a rename)."""
        directory = self.dirs.get(parent)
        if directory is not None:
            self._add(parent, directory, name, attr)
            directory.touched(+1 if attr.is_dir else 0)

    def failure(self) -> PlasmaError | None:
        """The error of a send that failed since the last call (reported by fsync)."""
        failed, self._failure = self._failure, None
        return failed

    # --- sending -----------------------------------------------------------------------------

    async def send_reporting(self) -> None:
        """`send`, then EIO (once) if a send failed since the last report: what fsync
        answers when changes it covers were lost."""
        await self.send()
        failed = self.failure()
        if failed is not None:
            log.warning("reporting a failed write-behind send: %s", failed)
            raise pyfuse3.FUSEError(errno.EIO)

    async def send(self) -> None:
        """Send every queued change now, in one transaction, and wait for its commit
        (after that of a send under way, whose changes left the queue already, and
        after the writers of files whose creation they took along: what was queued
        since may concern those files)."""
        async with self._sending:
            while self._claims:
                await next(iter(self._claims.values())).wait()
            changes, self._queue = self._queue, []
            if not changes:
                return
            self.flushes += 1
            results = await self._transaction(changes)
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed and not isinstance(failed[0], ConnectionLostError):
                # One change the namenode refused must not take the others with it:
                # each goes again on its own, in order.
                log.warning("write-behind: a batch of %d failed (%s); sending one by one",
                            len(changes), failed[0])  # fmt: skip
                results, failed = [], []
                for change in changes:
                    single = await self._transaction([change])
                    results += single
                    failed += [r for r in single if isinstance(r, BaseException)]
            for change in changes:
                self.unsent.discard(change.ino)
            for result in results:
                if isinstance(result, Attr):
                    self.update(result)
            if failed:
                log.error("write-behind: %d of %d queued changes were not applied: %s",
                          len(failed), len(changes), failed[0])  # fmt: skip
                self._failure = _as_plasma_error(failed[0])
                # The tables may no longer match the namenode: it answers from now on
                # (the leases are released as others recall them).
                self._lost("a send failed")

    async def _transaction(self, changes: list[_Change]) -> list[object]:
        """The answers of `changes` sent in one transaction, and of its commit."""
        try:
            t = await self.fs.begin(lock_wait=LOCK_WAIT)
            answers = []
            for c in changes:
                with acting_for(c.caller):
                    answers.append(self._request(t, c))
            committed = t.commit(unless_failed=True)
            return await results_of(*answers, committed)
        except Exception as exc:
            return [exc]

    def _request(self, t: Transaction, c: _Change) -> Awaitable[object]:
        if c.kind == "create":
            return t.create(At(c.parent, c.name), c.mode, replication=self.replication, ino=c.ino)
        if c.kind == "mkdir":
            return t.mkdir(At(c.parent, c.name), c.mode, ino=c.ino, lease=True)
        if c.kind == "content":
            written = t.write_inline(c.ino, c.data)
            if c.mtime_ns is None:
                return written
            return _second(written, t.setattr(c.ino, mtime_ns=c.mtime_ns))
        if c.kind == "unlink":
            return t.unlink(At(c.parent, c.name))
        return t.rmdir(At(c.parent, c.name))

    async def claim_create(self, ino: int) -> At | None:
        """Take the queued creation of new file `ino` out of the queue, for the
        transaction that writes its content to create it too (one commit, not two);
        where it is created then. None, and the queue stays as it is, if the creation
        is not queued any more, its directory is not on the namenode yet, or another
        queued change concerns the same file or name. `claim_done` ends the claim;
        until then sends wait (changes queued meanwhile may concern the file)."""
        async with self._sending:  # not while a send under way may concern the file
            mine = [c for c in self._queue if c.ino == ino]
            if len(mine) != 1 or mine[0].kind != "create" or mine[0].parent in self.unsent:
                return None
            create = mine[0]
            if any(c.parent == create.parent and c.name == create.name and c is not create
                   for c in self._queue):  # fmt: skip
                return None
            self._queue.remove(create)
            self._claims[ino] = asyncio.Event()
            self._claimed[ino] = create
            return At(create.parent, create.name)

    def claim_done(self, ino: int, *, created: bool) -> None:
        """The writer of a claimed file ended its transaction: the file was `created`
        with its content, or, if not, its creation is queued again (first: later
        changes may concern it), as if it had never left."""
        create = self._claimed.pop(ino)
        if not created and self._conn is not None and not self._conn.closed:
            self._queue.insert(0, create)
        else:
            self.unsent.discard(ino)
        self._claims.pop(ino).set()

    async def release(self, dirs: list[int]) -> None:
        """Send the queue, then let go of `dirs`: their tables go, the namenode answers."""
        leasing = [self._leasing[i] for i in dirs if i in self._leasing]
        await asyncio.gather(*leasing, return_exceptions=True)  # tables made, then let go
        await self.send()
        if self.before_release is not None:
            inside = {i for i, (d, _) in self.located.items() if d in dirs}
            await self.before_release(inside)
        for ino in dirs:
            self.dirs.pop(ino, None)
        self._forget_entries_of(set(dirs))
        # Also those whose tables were dropped already: the namenode ignores the rest.
        if dirs and self._conn is not None and not self._conn.closed:
            try:
                await SessionRequests(self._conn).release_leases(dirs)
            except PlasmaError as exc:
                log.info("releasing %d leases failed: %s", len(dirs), exc)

    async def close(self) -> None:
        """Send the queue and let go of every lease (the mount is going away)."""
        self._closing = True
        try:
            await self.release([*self.dirs, *self._leasing])
        finally:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    # --- inside ------------------------------------------------------------------------------

    async def _mkdir_now(self, parent: int, name: str, mode: int) -> Attr:
        await self.send()  # the parent itself may be queued
        conn = await self.fs.connection()
        if self._conn is not conn:
            self._adopt(conn)
        t = await self.fs.begin()
        made = t.mkdir_leasing(At(parent, name), mode)
        committed = asyncio.ensure_future(t.commit())
        try:
            attr, leased = await made
        except BaseException:
            await asyncio.gather(committed, return_exceptions=True)
            raise
        await committed
        parent_table = self.dirs.get(parent)
        if parent_table is not None:
            self._add(parent, parent_table, name, attr)
            parent_table.touched(+1)
        if leased:  # not in a tree with a quota: the namenode checks each change there
            self.dirs[attr.ino] = LeasedDir(attr)
            self._start()
        return attr

    def _adopt(self, conn: Connection) -> None:
        """Leases and reservations from now on belong to `conn`'s session."""
        if self.dirs or self._queue:
            self._lost("the connection to the namenode changed")
        self._conn = conn
        self._pool.clear()

    def _lost(self, why: str) -> None:
        """Drop every table and the queue (the session that held them is gone, or a
        send failed): from now on the namenode answers."""
        if self._queue or self.dirs:
            log.error("write-behind: %s; %d queued changes dropped, %d leased directories "
                      "given up", why, len(self._queue), len(self.dirs))  # fmt: skip
            if self._queue:
                self._failure = ConnectionLostError(why)
        abandoned = list(self.dirs)
        self._queue.clear()
        self.unsent.clear()
        self.dirs.clear()
        self.located.clear()
        if abandoned and self._conn is not None and not self._conn.closed:
            # Still this session's leases: let others in without a recall timeout.
            release = SessionRequests(self._conn).release_leases(abandoned)
            task = asyncio.get_running_loop().create_task(_quietly(release))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    def _start(self) -> None:
        if not self._tasks:
            loop = asyncio.get_running_loop()
            with acting_for(None):  # they work for the whole mount, not for one caller
                self._tasks = [
                    loop.create_task(self._sender()),
                    loop.create_task(self._listener()),
                ]

    async def _sender(self) -> None:
        """Send the queue every FLUSH_INTERVAL; release directories left idle."""
        while not self._closing:
            await asyncio.sleep(FLUSH_INTERVAL)
            try:
                if self._queue:
                    await self.send()
                now = time.monotonic()
                idle = [i for i, d in self.dirs.items() if now - d.used > IDLE_RELEASE]
                if idle:
                    await self.release(idle)
            except Exception:  # the loop must go on; send() logs what it dropped
                log.exception("write-behind send failed")

    async def _listener(self) -> None:
        """Release what other clients recall; drop what the namenode took away."""
        while not self._closing:
            conn = self._conn
            if not self.dirs or conn is None or conn.closed:
                await asyncio.sleep(NEWS_WAIT)
                continue
            try:
                recalled, revoked = await SessionRequests(conn).lease_news(NEWS_WAIT)
            except PlasmaError as exc:
                log.info("lease news failed: %s", exc)
                await asyncio.sleep(NEWS_WAIT)
                continue
            for ino in (*recalled, *revoked):
                self._refuse(ino)  # others use it: not leased again at once
            if revoked:
                log.warning("the namenode took away %d leases", len(revoked))
                await self.release(revoked)
            if recalled:
                await self.release(recalled)

    async def _take_ino(self) -> int:
        # Creates running at once wait for one reservation: each refilling the pool
        # for itself dropped the others' numbers, which the session still held
        # (after ~100,000 creates its next reservation was refused: EBUSY).
        while not self._pool:
            async with self._refilling:
                if self._pool:
                    break
                conn = self._conn
                assert conn is not None
                batch = await SessionRequests(conn).reserve_inodes(RESERVE_BATCH)
                if conn is self._conn:  # else reserved by a session that is gone
                    batch.reverse()
                    self._pool = batch
        return self._pool.pop()

    async def _queued(self, change: _Change) -> None:
        if len(self._queue) >= MAX_QUEUE:
            await self.send()
        change.caller = current_caller()
        self._queue.append(change)
        if change.ino:
            self.unsent.add(change.ino)

    def _add(self, parent: int, directory: LeasedDir, name: str, attr: Attr) -> None:
        directory.entries[name] = attr
        self.located[attr.ino] = (parent, name)

    def _forget_entries_of(self, dirs: set[int]) -> None:
        for ino in [i for i, (d, _) in self.located.items() if d in dirs]:
            del self.located[ino]

    @staticmethod
    def _check_free(directory: LeasedDir, name: str) -> None:
        if name in directory.entries:
            raise pyfuse3.FUSEError(errno.EEXIST)

    def _new_attr(self, directory: LeasedDir, kind: FileKind, ino: int, mode: int) -> Attr:
        """What the namenode will make of it: owned as the directory the mount made,
        with the mode asked (the kernel applied the umask)."""
        d = directory.attr
        now = time.time_ns()
        is_dir = kind is FileKind.DIRECTORY
        mode = mode | (d.mode & stat.S_ISGID if is_dir else 0)
        return Attr(
            ino, kind, mode, d.uid, d.gid, 0, now, now, 2 if is_dir else 1,
            self.replication or d.replication, d.blocksize, 1,
        )  # fmt: skip


async def _second(first: Awaitable[object], second: Awaitable[Attr]) -> Attr:
    """The answer of `second`, once `first` (sent before it) succeeded too."""
    _, answer = await asyncio.gather(first, second)
    return answer


async def _quietly(release: Awaitable[None]) -> None:
    try:
        await release
    except PlasmaError as exc:
        log.info("releasing leases failed: %s", exc)


def _as_plasma_error(exc: BaseException) -> PlasmaError:
    if isinstance(exc, PlasmaError):
        return exc
    return ConnectionLostError(f"write-behind send failed: {exc}")
