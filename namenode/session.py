"""One client connection: its multiplexed request stream and its open transactions.

Requests of different transactions run concurrently; requests of one transaction
run in the order they arrived, one after another in one task (a batch of them runs
without a scheduling round between two, and their responses leave together).
Responses that are ready together leave in one frame. When the stream ends, for
whatever reason, every open transaction of the connection is aborted. A client ends
its side of the stream when it is done with the connection: requests still running
then are cancelled, not answered, and the namenode ends the stream at once. The
stream belongs to the user authenticated when it opened; it is cut when that user's
credential is revoked or expires. A request may be made for a local caller of the
client's host (local_callers): it then acts as that caller, if the user may.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any

from plasmafs.core.attributes import Extent, FileKind
from plasmafs.core.errors import (
    AccessDeniedError,
    BusyError,
    InvalidArgumentError,
    NotFoundError,
    PlasmaError,
    StorageError,
    TransactionError,
)
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.namenode import directory_leases, lock_requests, xattr_requests
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.cluster_status import ClusterStatus
from plasmafs.namenode.cursor_checks import check_key_cursor, check_walk_cursor
from plasmafs.namenode.fair_use import FairUse
from plasmafs.namenode.inode_records import Inode
from plasmafs.namenode.local_callers import CallerRights
from plasmafs.namenode.metrics import NamenodeMetrics
from plasmafs.namenode.principals import Principal
from plasmafs.namenode.request_tasks import start_eagerly
from plasmafs.namenode.settings import NamenodeSettings
from plasmafs.namenode.startup import NamespaceParts
from plasmafs.namenode.subtree import WALK_PAGE_MAX
from plasmafs.namenode.transaction import Txn

log = logging.getLogger(__name__)

Handler = Callable[["Session", Txn | None, pb.Request, pb.Response], Awaitable[None]]
# Requests of one transaction run back to back; after this many the task lets the loop
# serve other transactions (and send the responses so far).
YIELD_EVERY = 64
ENDINGS = frozenset(["commit", "abort"])  # the last request of a transaction
# The local caller the request being handled was made for (each request task has its
# own context; one transaction's requests run one after another).
_acting: ContextVar[Principal | None] = ContextVar("plasmafs_acting", default=None)


class Session:
    """The namenode's side of one client connection."""

    def __init__(
        self,
        parts: NamespaceParts,
        status: ClusterStatus,
        settings: NamenodeSettings,
        peer: str,
        counters: Counter[str],
        metrics: NamenodeMetrics,
        user: Principal,
        rights: CallerRights,
        fair: FairUse,
    ) -> None:
        self.user = user
        self.fair = fair
        self.load = fair.join(user.name)
        self.rights = rights
        self._cut: PlasmaError | None = None
        self._closed = False
        self.ns = parts.namespace
        self.files = parts.files
        self.attributes = parts.attributes
        self.xattrs = parts.xattrs
        self.locks = parts.locks
        self.transactions = parts.transactions
        self.inode_numbers = parts.inode_numbers
        self.leases = parts.leases
        self.subtrees = parts.subtrees
        self.quotas = parts.quotas
        self.status = status
        self.settings = settings
        self.peer = peer
        self.counters = counters
        self.metrics = metrics
        self.txns: dict[int, Txn] = {}
        # Requests of a transaction id waiting for those before them (one task each).
        self._queues: dict[int, deque[pb.Request]] = {}
        self._out: list[pb.Response] = []
        self._out_ready = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._inflight = 0
        self._room = asyncio.Event()
        self._room.set()
        self.reserved: set[int] = set()  # inode numbers given out for creates to come

    @property
    def who(self) -> Principal:
        """Who the request being handled acts as: the connection's user, or the local
        caller it was made for."""
        return _acting.get() or self.user

    def cut(self, reason: PlasmaError) -> None:
        """End the stream with `reason` (the user may no longer use it): running
        requests are cancelled and open transactions aborted."""
        self._cut = reason
        self._out_ready.set()

    async def run(
        self,
        frames: AsyncIterator[pb.ClientFrame],
        write: Callable[[pb.ServerFrame], Awaitable[None]],
    ) -> None:
        """Serve the stream until the client closes it or goes away, or raise the
        PlasmaError it was cut with."""
        # Every request task starts from this context: leases know whose request it is.
        directory_leases.serving.set(self)
        reader = asyncio.create_task(self._read(frames))
        try:
            while True:
                await self._out_ready.wait()
                self._out_ready.clear()
                if self._cut is not None:
                    raise self._cut
                if reader.done():
                    # The client closed: nobody reads what is still running (a lock wait
                    # may last long), and a prompt end lets it close without cutting.
                    reader.result()
                    return
                if self._out:
                    batch, self._out = self._out, []
                    await write(pb.ServerFrame(responses=batch))
                    self.fair.frame(self.load)
                    # A response stays in flight until written: when the client stops
                    # reading, write() waits on HTTP/2 flow control, the bound is reached
                    # and the reader stops taking requests, so the client's writes block.
                    self._inflight -= len(batch)
                    self.fair.answered(self.load, len(batch))
                    if not self._room.is_set():
                        self._room.set()
        finally:
            self._closed = True
            reader.cancel()
            for task in list(self._tasks):
                task.cancel()
            for txn in self.txns.values():
                self.transactions.abort(txn, "the client connection closed")
                self.fair.ended(self.load, txn.writing)
            self.txns.clear()
            # Requests read but not answered: queued for a turn, running, or answered
            # and not written.
            self.fair.answered(self.load, self._inflight)
            self._inflight = 0
            self.fair.leave(self.load, self)
            self.leases.end_session(self)
            self.locks.end_session(self)

    async def _read(self, frames: AsyncIterator[pb.ClientFrame]) -> None:
        fair, load, dispatch = self.fair, self.load, self._dispatch
        try:
            async for frame in frames:
                fair.frame(load)
                for request in frame.requests:
                    while self._inflight >= self.settings.max_inflight_per_session:
                        self._room.clear()
                        await self._room.wait()
                    if not fair.admitted(load):
                        await fair.room(load)
                    self._inflight += 1
                    fair.start(load, dispatch, request)
        finally:
            self._out_ready.set()

    def _dispatch(self, request: pb.Request) -> None:
        if self._cut is not None or self._closed:
            return  # queued for a turn while the stream ended: nobody waits for it
        if request.txn == 0:
            self._start(self._handle(request))
            return
        queue = self._queues.get(request.txn)
        if queue is not None:  # its task takes it after the ones before it
            queue.append(request)
            return
        queue = self._queues[request.txn] = deque([request])
        self._start(self._handle_in_order(request.txn, queue))

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = start_eagerly(work)
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._task_done)

    async def _handle_in_order(self, txn_id: int, queue: deque[pb.Request]) -> None:
        """Handle the requests of transaction `txn_id` in arrival order, including
        those that arrive meanwhile."""
        try:
            handled = 0
            while queue:
                # With the commit already here, the answers before it wait for its own:
                # the client sent them all together, and one frame carries them back.
                ends = len(queue) > 1 and queue[-1].WhichOneof("op") in ENDINGS
                await self._handle(queue[0], hold=ends)
                queue.popleft()
                handled += 1
                if handled % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        finally:
            if self._queues.get(txn_id) is queue:
                del self._queues[txn_id]

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._out_ready.set()

    async def _handle(self, request: pb.Request, *, hold: bool = False) -> None:
        response = pb.Response(id=request.id)
        op = request.WhichOneof("op")
        started = time.perf_counter()
        try:
            if op is None:
                raise TransactionError("request without an operation")
            self.counters[op] += 1
            await self.fair.metered(self.load, self._execute(op, request, response))
        except PlasmaError as exc:
            _fail(response, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not take the whole connection down
            log.exception("request %s failed", op)
            _fail(response, StorageError(f"internal error: {exc.__class__.__name__}: {exc}"))
        self.metrics.observe(op or "none", time.perf_counter() - started)
        if response.HasField("error"):
            self.metrics.error(op or "none", response.error.code)
        self._out.append(response)
        if not hold:
            self._out_ready.set()

    async def _execute(self, op: str, request: pb.Request, response: pb.Response) -> None:
        self.transactions.check_serving()
        if request.HasField("caller"):
            _acting.set(self.rights.acting(self.user, request.caller))
        elif _acting.get() is not None:
            _acting.set(None)
        handler = HANDLERS.get(op)
        if op == "begin":
            self._begin(request)
            response.done.SetInParent()
            return
        assert handler is not None
        if request.txn == 0:
            if op not in READ_ONLY and op not in SESSION_OPS:
                raise TransactionError(f"{op} needs a transaction")
            await handler(self, None, request, response)
            return
        if op in SESSION_OPS:
            raise TransactionError(f"{op} is sent outside transactions")
        txn = self.txns.get(request.txn)
        if txn is None:
            raise TransactionError(f"no open transaction {request.txn}")
        txn.who = self.who
        try:
            await handler(self, txn, request, response)
        except PlasmaError:
            txn.failed_ops += 1
            raise
        finally:
            if op in ("commit", "abort") and self.txns.pop(request.txn, None) is not None:
                self.fair.ended(self.load, txn.writing)

    def _begin(self, request: pb.Request) -> None:
        if request.txn == 0:
            raise TransactionError("transaction id 0 is reserved")
        if request.txn in self.txns:
            raise TransactionError(f"transaction {request.txn} is already open")
        if len(self.txns) >= self.settings.max_transactions_per_session:
            raise BusyError(f"too many open transactions on this connection ({len(self.txns)})")
        self.fair.begin(self.load)
        wait = request.begin.lock_wait_ms / 1000.0
        txn = self.transactions.begin(request.txn, self.peer, wait, self.who)
        self.txns[request.txn] = txn


def _fail(response: pb.Response, exc: PlasmaError) -> None:
    response.ClearField("result")
    response.error.code = exc.code  # type: ignore[assignment]
    response.error.message = str(exc)


# --- handlers: translate one request into a namespace call and its result -------------


async def _commit(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    assert t is not None
    unseen = t.failed_ops - r.commit.failures_seen
    if r.commit.unless_failed and unseen > 0:
        s.transactions.abort(t)
        raise TransactionError(
            f"transaction {t.txn_id} was aborted: {unseen} of its operations failed"
        )
    await s.transactions.commit(t, durable=not r.commit.relaxed)
    s.fair.charge(s.load, t.cs.database_seconds)
    out.done.SetInParent()


async def _sync(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    await s.transactions.sync()
    out.done.SetInParent()


async def _abort(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    assert t is not None
    s.transactions.abort(t)
    out.done.SetInParent()


async def _lookup(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.lookup
    attr = await s.ns.lookup(t, Place.of(q.path, q.dir), q.follow, who=s.who)
    if q.blocks_within and attr.kind is FileKind.FILE and attr.size <= q.blocks_within:
        try:
            inode, grants = await s.files.blocks(t, attr.ino, 0, 0, who=s.who)
        except (AccessDeniedError, NotFoundError):
            pass  # not readable by the caller, or removed since: the attributes only
        else:
            _reading_list(s, out, inode, grants)
            return
    attr.to_wire(out.attr)


async def _getattr(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    (await s.ns.getattr(t, r.getattr.ino, who=s.who)).to_wire(out.attr)


async def _readdir(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.readdir
    entries, more = await s.ns.readdir(
        t,
        Place.directory(q.path, q.dir),
        q.after,
        q.limit,
        s.settings.max_readdir_page,
        plus=q.plus,
        who=s.who,
    )
    page = out.dir_page
    page.more = more
    for name, inode in entries:
        item = page.entries.add(name=name.encode(), ino=inode.ino, kind=inode.kind)
        if q.plus:
            inode.attr.to_wire(item.attr)
    page.SetInParent()


async def _mkdir(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.mkdir
    where, ino = Place.of(q.path, q.dir), _reserved(s, q.ino)
    (await s.ns.mkdir(t, where, q.mode, ino=ino, lease=q.lease)).to_wire(out.attr)
    out.attr.leased = q.lease and s.leases.held_by_caller(out.attr.ino)


async def _create(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.create
    where, ino = Place.of(q.path, q.dir), _reserved(s, q.ino)
    attr = await s.ns.create(t, where, q.mode, q.replication, q.blocksize, ino=ino)
    attr.to_wire(out.attr)


def _reserved(s: Session, ino: int) -> int:
    """`ino` (0: the namenode chooses) once checked to be one this session reserved
    and has not used; it is used from now on, whatever becomes of the request."""
    if ino == 0:
        return 0
    if ino not in s.reserved:
        raise InvalidArgumentError(f"inode number {ino} was not reserved by this session")
    s.reserved.discard(ino)
    return ino


MAX_RESERVE = 65536


async def _reserve_inodes(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    count = r.reserve_inodes.count
    if not 0 < count <= MAX_RESERVE:
        raise InvalidArgumentError(f"reserve 1 to {MAX_RESERVE} inode numbers, not {count}")
    if len(s.reserved) + count > s.settings.max_transactions_per_session:
        raise BusyError(f"this connection holds {len(s.reserved)} unused inode numbers")
    inos = await s.inode_numbers.reserve(count)
    s.reserved.update(inos)
    out.inodes.inos.extend(inos)
    out.inodes.SetInParent()


async def _release_leases(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    s.leases.release(list(r.release_leases.dirs))
    out.done.SetInParent()


MAX_NEWS_WAIT_MS = 60_000


async def _lease_dir(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    await s.ns.lease_dir(r.lease_dir.dir, s.who)
    out.done.SetInParent()


async def _lease_news(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    wait = min(r.lease_news.wait_ms, MAX_NEWS_WAIT_MS) / 1000.0
    recalled, revoked = await s.leases.news(wait)
    out.lease_news.recalled.extend(recalled)
    out.lease_news.revoked.extend(revoked)
    out.lease_news.SetInParent()


async def _unlink(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    await s.ns.unlink(t, Place.of(r.unlink.path, r.unlink.dir))
    out.done.SetInParent()


async def _rmdir(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    await s.ns.rmdir(t, Place.of(r.rmdir.path, r.rmdir.dir))
    out.done.SetInParent()


async def _rename(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.rename
    src, dst = Place.of(q.src, q.src_dir), Place.of(q.dst, q.dst_dir)
    await s.ns.rename(t, src, dst, q.noreplace, exchange=q.exchange)
    out.done.SetInParent()


async def _setattr(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.setattr
    which = q.WhichOneof("target")
    attr = await s.attributes.setattr(
        t,
        raw=q.path if which == "path" else None,
        ino=q.ino if which == "ino" else None,
        mode=q.mode if q.HasField("mode") else None,
        uid=q.uid if q.HasField("uid") else None,
        gid=q.gid if q.HasField("gid") else None,
        mtime_ns=q.mtime_ns if q.HasField("mtime_ns") else None,
        size=q.size if q.HasField("size") else None,
        replication=q.replication if q.HasField("replication") else None,
        mtime_now=q.mtime_now,
        if_size=q.if_size if q.HasField("if_size") else None,
    )
    attr.to_wire(out.attr)


async def _symlink(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.symlink
    (await s.ns.symlink(t, Place.of(q.path, q.dir), q.target)).to_wire(out.attr)


async def _mknod(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.mknod
    try:
        kind = FileKind(q.kind)
    except ValueError:
        raise InvalidArgumentError(f"no file kind {q.kind}") from None
    (await s.ns.mknod(t, Place.of(q.path, q.dir), kind, q.mode, q.rdev)).to_wire(out.attr)


async def _link(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.link
    if bool(q.target_ino) == bool(q.target_path):
        raise InvalidArgumentError("name the link's target by its path or its inode, not both")
    target = q.target_ino or Place.of(q.target_path)
    (await s.ns.link(t, target, Place.of(q.path, q.dir))).to_wire(out.attr)


async def _concat(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.concat
    sources = [Place.of(raw) for raw in q.sources]
    (await s.ns.concat(t, Place.of(q.target), sources)).to_wire(out.attr)


async def _readlink(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.readlink
    if q.ino and q.path:
        raise InvalidArgumentError("name a symbolic link by its path or its inode, not both")
    where = q.ino or Place.of(q.path)
    out.target = (await s.ns.readlink(t, where, who=s.who)).encode()


async def _fsstat(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    st = s.status.fsstat()
    out.fsstat.files = st.files
    out.fsstat.directories = st.directories
    out.fsstat.symlinks = st.symlinks
    out.fsstat.capacity_bytes = st.capacity_bytes
    out.fsstat.used_bytes = st.used_bytes
    out.fsstat.live_datanodes = st.live_datanodes
    out.fsstat.blocksize = st.blocksize
    out.fsstat.held_bytes = st.held_bytes
    out.fsstat.under_replicated_blocks = st.under_replicated_blocks
    out.fsstat.missing_blocks = st.missing_blocks
    out.fsstat.corrupt_blocks = st.corrupt_blocks
    out.fsstat.SetInParent()


async def _report_corrupt(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.report_corrupt
    s.status.report_corrupt(q.datanode_id, q.block_start, q.block_count)
    out.done.SetInParent()


async def _allocate(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.allocate
    assert t is not None
    fresh = q.ino not in t.cs.extents_changed
    if fresh:
        s.fair.check_writing(s.load)
    inode, grants = await s.files.allocate(t, q.ino, q.file_index, q.count)
    if fresh and q.ino in t.cs.extents_changed:
        t.writing += 1
        s.load.writing += 1
    _block_list(out.block_list, inode, grants)


async def _write_inline(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.write_inline
    (await s.files.write_inline(t, q.ino, q.data)).to_wire(out.attr)


async def _blocks(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    q = r.blocks
    inode, grants = await s.files.blocks(t, q.ino, q.file_index, q.count, who=s.who)
    _reading_list(s, out, inode, grants)


def _reading_list(s: Session, out: pb.Response, inode: Inode, grants: list[Extent]) -> None:
    """A block list for a reader: with whether another session holds a lock on it."""
    _block_list(out.block_list, inode, grants)
    out.block_list.locked_elsewhere = s.locks.locked_by_others(inode.ino, s)


async def _summarize(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    _outside_transactions(t, "summarize")
    totals = await s.subtrees.summarize(s.who, Place.of(r.summarize.path))
    summary = out.summary
    summary.files, summary.directories, summary.symlinks = (
        totals.files, totals.directories, totals.symlinks,
    )  # fmt: skip
    summary.bytes, summary.space, summary.unreadable = (
        totals.bytes, totals.space, totals.unreadable,
    )  # fmt: skip
    await s.quotas.fill(totals.root, summary.quota)
    summary.SetInParent()


async def _walk(s: Session, t: Txn | None, r: pb.Request, out: pb.Response) -> None:
    _outside_transactions(t, "walk")
    q = r.walk
    limit = max(1, min(q.limit or WALK_PAGE_MAX, WALK_PAGE_MAX))
    where = Place.directory(q.path, q.dir)
    if q.key_order:
        after, directory = check_key_cursor(q.after)
        items, more = await s.subtrees.walk(
            s.who, where, after, limit, q.depth, key_order=True, after_directory=directory
        )
    else:
        after = check_walk_cursor(q.after)
        items, more = await s.subtrees.walk(s.who, where, after, limit, q.depth)
    page = out.walk_page
    page.more = more
    page.path.extend([item.path.encode() for item in items])
    columns = (
        page.ino, page.kind, page.mode, page.uid, page.gid, page.size, page.mtime_ns,
        page.ctime_ns, page.nlink, page.replication, page.blocksize, page.version,
    )  # fmt: skip
    for column, values in zip(columns, zip(*[i.inode for i in items], strict=True), strict=False):
        column.extend(values)
    for index, item in enumerate(items):
        if item.inode.target is not None:
            page.target[index] = item.inode.target.encode()
        if item.unreadable:
            page.unreadable.append(index)
        if item.inode.inline:
            page.inline.append(index)
        if item.inode.rdev:
            page.rdev[index] = item.inode.rdev
        if item.inode.has_xattrs:
            page.with_xattrs.append(index)
    page.SetInParent()


def _outside_transactions(t: Txn | None, what: str) -> None:
    if t is not None:
        raise InvalidArgumentError(f"{what} reads committed state: send it outside a transaction")


def _block_list(out: pb.BlockList, inode: Inode, grants: list[Extent]) -> None:
    inode.attr.to_wire(out.attr)  # a reader opening the file needs no getattr
    out.blocksize = inode.attr.blocksize
    out.size = inode.attr.size
    out.replication = inode.attr.replication
    if inode.data is not None:
        out.inline = inode.data
    for grant in grants:
        extent = out.extents.add(file_index=grant.file_index, block_count=grant.block_count)
        for rep in grant.replicas:
            replica = extent.replicas.add(
                datanode_id=rep.datanode_id,
                address=rep.address,
                block_start=rep.block_start,
                host=rep.host,
                local_socket=rep.local_socket,
                state=int(rep.state),
                plaintext=rep.plaintext,
            )
            replica.ticket.MergeFromString(rep.ticket)
    out.SetInParent()


HANDLERS: dict[str, Handler] = {
    "commit": _commit,
    "abort": _abort,
    "lookup": _lookup,
    "getattr": _getattr,
    "sync": _sync,
    "readdir": _readdir,
    "mkdir": _mkdir,
    "create": _create,
    "unlink": _unlink,
    "rmdir": _rmdir,
    "rename": _rename,
    "setattr": _setattr,
    "symlink": _symlink,
    "mknod": _mknod,
    "link": _link,
    "concat": _concat,
    "readlink": _readlink,
    "fsstat": _fsstat,
    "allocate": _allocate,
    "write_inline": _write_inline,
    "blocks": _blocks,
    "report_corrupt": _report_corrupt,
    "summarize": _summarize,
    "walk": _walk,
    "reserve_inodes": _reserve_inodes,
    "release_leases": _release_leases,
    "lease_news": _lease_news,
    "lease_dir": _lease_dir,
    **xattr_requests.HANDLERS,
    **lock_requests.HANDLERS,
}
# Requests about the session itself: never inside a transaction.
SESSION_OPS = frozenset(
    ["reserve_inodes", "release_leases", "lease_news", "lease_dir", *lock_requests.SESSION_OPS]
)
READ_ONLY = frozenset(
    [
        "lookup",
        "getattr",
        "readdir",
        "readlink",
        "fsstat",
        "blocks",
        "report_corrupt",
        "sync",
        "summarize",
        "walk",
        *xattr_requests.READ_ONLY,
    ]
)
