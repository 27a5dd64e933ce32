"""A client transaction: operations that see committed state plus their own changes,
made durable together by commit.

Every operation puts its request into the connection's next frame at the moment it
is called and returns an awaitable of the result, so requests issued together travel
together: begin rides with the first operation, and a one-shot helper sends begin,
operation and commit in one frame. An operation that fails leaves the transaction as
it was, except ConflictError, which aborts it: retry the whole transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections.abc import AsyncIterator, Awaitable, Sequence
from types import TracebackType
from typing import Any

from plasmafs.client.connection import Connection
from plasmafs.client.xattr_ops import XattrChanges, XattrReads
from plasmafs.core import paths
from plasmafs.core.attributes import (
    Attr,
    BlockList,
    DirEntry,
    FileKind,
    FsStat,
    Quota,
    Summary,
    TreeEntry,
)
from plasmafs.core.errors import (
    AuthenticationError,
    ConnectionLostError,
    ExistsError,
    InvalidArgumentError,
    NotDirectoryError,
    NotFoundError,
    TransactionError,
    error_from_wire,
)
from plasmafs.core.paths import Where
from plasmafs.core.proto import namenode_pb2 as pb

DEFAULT_PAGE = 1024
_KIND_OF = {int(kind): kind for kind in FileKind}
Pending = asyncio.Future[pb.Response]


def _u32(**values: int | None) -> None:
    for name, value in values.items():
        if value is not None and not 0 <= value <= 0xFFFFFFFF:
            raise InvalidArgumentError(f"{name} {value} is out of range")


def _u64(**values: int) -> None:
    for name, value in values.items():
        if not 0 <= value < 2**64:
            raise InvalidArgumentError(f"{name} {value} is out of range")


class Reads(XattrReads):
    """The read operations, shared by transactions and by reads of committed state."""

    def _new(self) -> tuple[pb.Request, Pending]:
        raise NotImplementedError

    async def _result(self, future: Pending) -> pb.Response:
        response = await future
        if response.HasField("error"):
            raise error_from_wire(response.error.code, response.error.message)
        return response

    async def _attr(self, future: Pending) -> Attr:
        return Attr.from_wire((await self._result(future)).attr)

    async def _nothing(self, future: Pending) -> None:
        await self._result(future)

    def lookup(self, path: Where, *, follow: bool = False) -> Awaitable[Attr]:
        """Attributes of the inode at `path` (a symlink itself unless follow=True; an
        `At` place never follows)."""
        raw, directory = paths.wire_place(path)
        if directory and follow:
            raise InvalidArgumentError("symbolic links are followed only on paths")
        request, future = self._new()
        q = request.lookup
        q.path, q.dir, q.follow = raw, directory, follow
        return self._attr(future)

    def lookup_for_reading(
        self, path: Where, *, within: int
    ) -> Awaitable[tuple[Attr, BlockList | None]]:
        """Attributes of the inode at `path` (never followed), and the block list of a
        regular file of at most `within` bytes that the caller may read (None
        otherwise, and from a namenode that does not send one): an open that follows
        may begin reading without asking again."""
        raw, directory = paths.wire_place(path)
        _u64(within=within)
        request, future = self._new()
        q = request.lookup
        q.path, q.dir, q.blocks_within = raw, directory, within
        return self._attr_and_blocks(future)

    async def _attr_and_blocks(self, future: Pending) -> tuple[Attr, BlockList | None]:
        response = await self._result(future)
        if response.HasField("block_list"):
            blocks = BlockList.from_wire(response.block_list)
            return Attr.from_wire(response.block_list.attr), blocks
        return Attr.from_wire(response.attr), None

    def stat(self, path: str) -> Awaitable[Attr]:
        """Attributes of the inode at `path`, following symbolic links."""
        return self.lookup(path, follow=True)

    def getattr(self, ino: int) -> Awaitable[Attr]:
        """Attributes of inode number `ino`."""
        request, future = self._new()
        request.getattr.ino = ino
        return self._attr(future)

    async def readlink(self, path: str | int) -> str:
        """The target of the symbolic link at `path`, or of inode number `path`."""
        request, future = self._new()
        if isinstance(path, int):
            _u64(ino=path)
            request.readlink.ino = path
        else:
            request.readlink.path = paths.encode(path)
        return (await self._result(future)).target.decode()

    async def readdir(
        self, path: str | int, *, after: str = "", limit: int = DEFAULT_PAGE, plus: bool = False
    ) -> tuple[list[DirEntry], bool]:
        """One page of entries sorting after `after`, and whether more may follow, of
        the directory at `path` or of directory inode number `path`."""
        raw, directory = (b"", path) if isinstance(path, int) else (paths.encode(path), 0)
        _u64(dir=directory)
        try:
            cursor = after.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(f"readdir cursor is not encodable: {after!r}") from exc
        _u32(limit=max(0, limit))
        request, future = self._new()
        q = request.readdir
        q.path, q.dir, q.after, q.limit, q.plus = raw, directory, cursor, max(0, limit), plus
        page = (await self._result(future)).dir_page
        entries = [
            DirEntry(
                e.name.decode("utf-8"),
                e.ino,
                FileKind(e.kind),
                Attr.from_wire(e.attr) if plus else None,
            )
            for e in page.entries
        ]
        return entries, page.more

    async def scandir(
        self, path: str | int, *, plus: bool = False, page: int = DEFAULT_PAGE
    ) -> AsyncIterator[DirEntry]:
        """Every entry of a directory, in name order, fetched a page at a time."""
        after = ""
        while True:
            entries, more = await self.readdir(path, after=after, limit=page, plus=plus)
            for entry in entries:
                yield entry
            if not more or not entries:
                return
            after = entries[-1].name

    def blocks(self, ino: int, file_index: int = 0, count: int = 0) -> Awaitable[BlockList]:
        """A file's extents from `file_index` (count 0: to the end) with read tickets."""
        _u64(ino=ino, file_index=file_index, count=count)
        request, future = self._new()
        q = request.blocks
        q.ino, q.file_index, q.count = ino, file_index, count
        return self._block_list(future)

    async def _block_list(self, future: Pending) -> BlockList:
        return BlockList.from_wire((await self._result(future)).block_list)

    def report_corrupt(
        self, datanode_id: int, block_start: int, block_count: int, reason: str = ""
    ) -> Awaitable[None]:
        """Tell the namenode that blocks of a datanode failed their checksum on a read; it
        has the datanode verify them (and, if confirmed, replaces the replica)."""
        _u32(datanode_id=datanode_id)
        _u64(block_start=block_start, block_count=block_count)
        request, future = self._new()
        q = request.report_corrupt
        q.datanode_id, q.block_start, q.block_count, q.reason = (
            datanode_id, block_start, block_count, reason[:1000],
        )  # fmt: skip
        return self._nothing(future)

    async def fsstat(self) -> FsStat:
        """Namespace counts and cluster space."""
        request, future = self._new()
        request.fsstat.SetInParent()
        f = (await self._result(future)).fsstat
        return FsStat(
            f.files,
            f.directories,
            f.symlinks,
            f.capacity_bytes,
            f.used_bytes,
            f.live_datanodes,
            f.blocksize,
            f.held_bytes,
            f.under_replicated_blocks,
            f.missing_blocks,
            f.corrupt_blocks,
        )


def tree_entries(page: pb.WalkPage) -> list[TreeEntry]:
    """The entries of a walk's page (its columns made rows)."""
    kinds = [_KIND_OF[k] for k in page.kind]
    attrs = list(map(
        Attr,
        page.ino, kinds, page.mode, page.uid, page.gid, page.size, page.mtime_ns,
        page.ctime_ns, page.nlink, page.replication, page.blocksize, page.version,
    ))  # fmt: skip
    targets, unreadable, inline = page.target, set(page.unreadable), set(page.inline)
    for index in page.with_xattrs:  # few entries have either
        attrs[index] = dataclasses.replace(attrs[index], has_xattrs=True)
    for index, rdev in page.rdev.items():
        attrs[index] = dataclasses.replace(attrs[index], rdev=rdev)
    return [
        TreeEntry(
            path.decode("utf-8"),
            attr,
            targets[index].decode("utf-8") if index in targets else None,
            index in unreadable,
            index in inline,
        )
        for index, (path, attr) in enumerate(zip(page.path, attrs, strict=True))
    ]


class CommittedReads(Reads):
    """Reads of committed state outside any transaction (transaction id 0)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def _new(self) -> tuple[pb.Request, Pending]:
        return self._conn.new_request()

    def sync(self) -> Awaitable[None]:
        """Make every commit acknowledged so far durable (relaxed ones included)."""
        request, future = self._new()
        request.sync.SetInParent()
        return self._nothing(future)

    async def summarize(self, path: str) -> Summary:
        """The totals of the subtree at `path` (a symbolic link at its end followed),
        from one snapshot, in one round trip."""
        request, future = self._new()
        request.summarize.path = paths.encode(path)
        s = (await self._result(future)).summary
        return Summary(
            s.files, s.directories, s.symlinks, s.bytes, s.space, s.unreadable,
            quota_from_wire(s.quota) if s.HasField("quota") else None,
        )  # fmt: skip

    async def walk_page(
        self, path: str | int, *, after: str = "", limit: int = 0, depth: int = 0
    ) -> tuple[list[TreeEntry], bool]:
        """One page of the subtree at `path` (or of directory inode number `path`): the
        root first (path ""), then each entry
        below it depth first by name, following the entry at relative path `after`;
        and whether more may follow. limit 0: the namenode's page size; depth N > 0:
        only entries at most N levels below the root (1: a directory listing)."""
        page = await self.walk_request(path, after=after, limit=limit, depth=depth)
        return tree_entries(page), page.more

    def walk_request(
        self,
        path: str | int,
        *,
        after: str = "",
        limit: int = 0,
        depth: int = 0,
        key_order: bool = False,
    ) -> Awaitable[pb.WalkPage]:
        """Ask for one page of a walk now (see walk_page); the awaitable answers it.
        `key_order`: in the order of an object store's keys, `after` such a key (see
        Client.walk)."""
        raw, directory = (b"", path) if isinstance(path, int) else (paths.encode(path), 0)
        _u64(dir=directory)
        _u32(limit=limit, depth=depth)
        request, future = self._new()
        q = request.walk
        q.path, q.dir, q.after, q.limit = raw, directory, after.encode("utf-8"), limit
        q.depth, q.key_order = depth, key_order
        return self._walk_page(future)

    async def _walk_page(self, future: Pending) -> pb.WalkPage:
        return (await self._result(future)).walk_page


class Transaction(Reads, XattrChanges):
    """A namenode transaction on one connection (use `async with`)."""

    def __init__(self, conn: Connection, *, lock_wait: float = 0.0, durable: bool = True) -> None:
        if lock_wait < 0:
            raise InvalidArgumentError("lock_wait must be >= 0")
        self._conn = conn
        self.durable = durable  # commit() waits for the WAL flush (else: relaxed)
        self.txn_id = conn.next_txn_id()
        self._lock_wait_ms = min(int(lock_wait * 1000), 2**32 - 1)
        self._begin: Pending | None = None
        self._finished = False
        self._failures_seen = 0  # operations answered with an error

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._finished:
            return
        if exc_type is None:
            await self.commit()
        else:
            await self.abort()

    def _new(self) -> tuple[pb.Request, Pending]:
        if self._finished:
            raise TransactionError(f"transaction {self.txn_id} has already ended")
        if self._begin is None:
            begin, self._begin = self._conn.new_request()
            begin.txn = self.txn_id
            begin.begin.lock_wait_ms = self._lock_wait_ms
        request, future = self._conn.new_request()
        request.txn = self.txn_id
        return request, future

    async def _result(self, future: Pending) -> pb.Response:
        response = await future
        if response.HasField("error"):
            self._failures_seen += 1
            begin = self._begin
            if begin is not None and begin.done() and begin.exception() is None:
                began = begin.result()
                if began.HasField("error"):  # the real cause of the failure
                    raise error_from_wire(began.error.code, began.error.message)
            raise error_from_wire(response.error.code, response.error.message)
        return response

    # --- ending ------------------------------------------------------------------------------

    def commit(
        self, *, durable: bool | None = None, unless_failed: bool = False
    ) -> Awaitable[None]:
        """Make every change of this transaction visible, atomically, and durable; with
        durable=False (default: the transaction's `durable`) the namenode answers
        before PostgreSQL's WAL flush, which follows within about a second (or at the
        next `Client.sync()`); a crash before it loses the commit whole, never half.
        `unless_failed`: if an operation failed whose failure was not awaited yet,
        abort instead (TransactionError), so operations can go with the commit."""
        if self._begin is None and not self._finished:
            self._finished = True
            return _nothing_to_do()
        request, future = self._new()
        request.commit.SetInParent()
        request.commit.relaxed = not (self.durable if durable is None else durable)
        request.commit.unless_failed = unless_failed
        request.commit.failures_seen = self._failures_seen
        self._finished = True
        return self._nothing(future)

    async def abort(self) -> None:
        """Drop every change of this transaction (a lost connection already did)."""
        if self._finished:
            return
        if self._begin is None or self._conn.closed:
            self._finished = True
            return
        request, future = self._new()
        request.abort.SetInParent()
        self._finished = True
        with contextlib.suppress(AuthenticationError, ConnectionLostError, TransactionError):
            await self._result(future)

    # --- changes -----------------------------------------------------------------------------

    def allocate(self, ino: int, file_index: int, count: int) -> Awaitable[BlockList]:
        """Reserve new blocks for file blocks [file_index, file_index + count), with write
        tickets; they replace what the range held when the transaction commits."""
        _u64(ino=ino, file_index=file_index, count=count)
        request, future = self._new()
        q = request.allocate
        q.ino, q.file_index, q.count = ino, file_index, count
        return self._block_list(future)

    @property
    def inline_limit(self) -> int:
        """The largest content `write_inline` takes (0: the namenode keeps none)."""
        return self._conn.inline_limit

    def write_inline(self, ino: int, data: bytes) -> Awaitable[Attr]:
        """Replace the whole content of file `ino` with `data` (at most `inline_limit`
        bytes), kept by the namenode: no blocks, no datanode. Its blocks are released."""
        _u64(ino=ino)
        if len(data) > self.inline_limit:
            raise InvalidArgumentError(
                f"inline content is at most {self.inline_limit} bytes, not {len(data)}"
            )
        request, future = self._new()
        q = request.write_inline
        q.ino, q.data = ino, bytes(data)
        return self._attr(future)

    def mkdir(
        self, path: Where, mode: int = 0o755, *, ino: int = 0, lease: bool = False
    ) -> Awaitable[Attr]:
        """Create a directory; `ino`: an inode number the connection reserved for it;
        `lease`: the connection's session leases it (see `SessionRequests`), unless
        the namenode refuses (`mkdir_leasing` says whether it did)."""
        return self._attr(self._mkdir(path, mode, ino, lease))

    def mkdir_leasing(
        self, path: Where, mode: int = 0o755, *, ino: int = 0
    ) -> Awaitable[tuple[Attr, bool]]:
        """Create a directory for the connection's session to lease: its attributes
        and whether the lease was granted (never in a tree with a quota)."""
        return self._leased(self._mkdir(path, mode, ino, True))

    def _mkdir(self, path: Where, mode: int, ino: int, lease: bool) -> Pending:
        raw, directory = paths.wire_place(path)
        _u32(mode=mode)
        _u64(ino=ino)
        request, future = self._new()
        q = request.mkdir
        q.path, q.dir, q.mode, q.ino, q.lease = raw, directory, mode, ino, lease
        return future

    async def _leased(self, future: Pending) -> tuple[Attr, bool]:
        wire = (await self._result(future)).attr
        return Attr.from_wire(wire), wire.leased

    async def makedirs(self, path: str, mode: int = 0o755) -> Attr:
        """Create a directory and its missing parents; an existing directory is fine."""
        canonical = paths.normalize(path)
        parts = canonical.strip("/").split("/") if canonical != "/" else []
        attr = await self.stat("/")
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            try:
                attr = await self.stat(prefix)
            except NotFoundError:
                try:
                    attr = await self.mkdir(prefix, mode)
                    continue
                except ExistsError:  # another transaction made it since: fine if a directory
                    attr = await self.stat(prefix)
            if attr.kind is not FileKind.DIRECTORY:
                raise NotDirectoryError(f"{prefix} exists and is not a directory")
        return attr

    def create(
        self,
        path: Where,
        mode: int = 0o644,
        *,
        replication: int = 0,
        blocksize: int = 0,
        ino: int = 0,
    ) -> Awaitable[Attr]:
        """Create an empty file (ExistsError if the name is taken); 0 means the default;
        `ino`: an inode number the connection reserved for it."""
        raw, directory = paths.wire_place(path)
        _u32(mode=mode, replication=replication, blocksize=blocksize)
        _u64(ino=ino)
        request, future = self._new()
        q = request.create
        q.path, q.dir, q.mode = raw, directory, mode
        q.replication, q.blocksize, q.ino = replication, blocksize, ino
        return self._attr(future)

    def symlink(self, path: Where, target: str) -> Awaitable[Attr]:
        """Create a symbolic link at `path` pointing to `target`."""
        raw, directory = paths.wire_place(path)
        try:
            raw_target = target.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError("symlink target is not encodable as UTF-8") from exc
        request, future = self._new()
        q = request.symlink
        q.path, q.dir, q.target = raw, directory, raw_target
        return self._attr(future)

    def mknod(
        self, path: Where, kind: FileKind, mode: int = 0o644, rdev: int = 0
    ) -> Awaitable[Attr]:
        """Create a special file at `path`: a FIFO or socket, or (as a superuser) a
        character or block device with number `rdev` (as os.makedev makes it)."""
        raw, directory = paths.wire_place(path)
        request, future = self._new()
        q = request.mknod
        q.path, q.dir, q.kind, q.mode, q.rdev = raw, directory, int(kind), mode, rdev  # type: ignore[assignment]
        return self._attr(future)

    def link(self, target: str | int, path: Where) -> Awaitable[Attr]:
        """A new name `path` for the file, symlink or special file `target` (a path,
        its last component not followed, or an inode number): a hard link."""
        raw, directory = paths.wire_place(path)
        request, future = self._new()
        q = request.link
        if isinstance(target, int):
            q.target_ino = target
        else:
            q.target_path = paths.encode(target)
        q.path, q.dir = raw, directory
        return self._attr(future)

    def concat(self, target: str, sources: Sequence[str]) -> Awaitable[Attr]:
        """Append the blocks of files `sources` to file `target` in order and remove
        the sources, copying no data (see Client.concat)."""
        request, future = self._new()
        q = request.concat
        q.target = paths.encode(target)
        q.sources.extend(paths.encode(s) for s in sources)
        return self._attr(future)

    def unlink(self, path: Where) -> Awaitable[None]:
        """Remove a file or symbolic link."""
        raw, directory = paths.wire_place(path)
        request, future = self._new()
        request.unlink.path, request.unlink.dir = raw, directory
        return self._nothing(future)

    def rmdir(self, path: Where) -> Awaitable[None]:
        """Remove an empty directory."""
        raw, directory = paths.wire_place(path)
        request, future = self._new()
        request.rmdir.path, request.rmdir.dir = raw, directory
        return self._nothing(future)

    def rename(
        self, src: Where, dst: Where, *, replace: bool = True, exchange: bool = False
    ) -> Awaitable[None]:
        """Move `src` to `dst` atomically; replace=False refuses an existing `dst`;
        exchange=True swaps the two, which must both exist."""
        raw_src, src_dir = paths.wire_place(src)
        raw_dst, dst_dir = paths.wire_place(dst)
        request, future = self._new()
        q = request.rename
        q.src, q.dst, q.noreplace = raw_src, raw_dst, not replace
        q.src_dir, q.dst_dir, q.exchange = src_dir, dst_dir, exchange
        return self._nothing(future)

    def setattr(
        self,
        target: str | int,
        *,
        mode: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
        mtime_ns: int | None = None,
        size: int | None = None,
        replication: int | None = None,
        # A flag, typed as the other changes are: callers pass them all as **changes.
        mtime_now: bool | int | None = False,
        if_size: int | None = None,
    ) -> Awaitable[Attr]:
        """Change attributes of a path (symlinks followed) or an inode number.
        `mtime_now` sets the mtime to the namenode's clock: a user who may write the
        file may do that, while only its owner may set any other mtime. With `if_size`
        the change is refused (ConflictError) unless the file's size is that when it
        is made: for a change decided from a size read earlier."""
        raw = paths.encode(target) if isinstance(target, str) else None
        if mtime_now and mtime_ns is not None:
            raise InvalidArgumentError("set the mtime to a time or to now, not both")
        _u32(mode=mode, uid=uid, gid=gid, replication=replication)
        for name, value in (("size", size), ("if_size", if_size)):
            if value is not None and not 0 <= value < 2**63:
                raise InvalidArgumentError(f"{name} {value} is out of range")
        if mtime_ns is not None and not -(2**63) <= mtime_ns < 2**63:
            raise InvalidArgumentError(f"mtime_ns {mtime_ns} is out of range")
        if raw is None and not 0 < int(target) < 2**64:
            raise InvalidArgumentError(f"inode number {target} is out of range")
        request, future = self._new()
        q = request.setattr
        if raw is not None:
            q.path = raw
        else:
            q.ino = int(target)
        changes = {
            "mode": mode,
            "uid": uid,
            "gid": gid,
            "mtime_ns": mtime_ns,
            "size": size,
            "replication": replication,
            "if_size": if_size,
        }
        for name, value in changes.items():
            if value is not None:
                setattr(q, name, value)
        q.mtime_now = bool(mtime_now)
        return self._attr(future)


async def answers(*sent: Awaitable[Any]) -> list[Any]:
    """The results of requests sent together, once every one is answered (none is left
    unawaited); the first failure among them is raised."""
    results = await results_of(*sent)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


async def results_of(*answers: Awaitable[object]) -> list[object]:
    """The result or the exception of each of `answers`, awaited one after another in
    this task: the requests left already, and asyncio.gather would make (and
    schedule) a task for each (a write-behind send carries thousands)."""
    results: list[object] = []
    try:
        for answer in answers:
            try:
                results.append(await answer)
            except Exception as exc:
                results.append(exc)
    finally:
        for unawaited in answers[len(results) + 1 :]:  # cancelled: close the rest
            if inspect.iscoroutine(unawaited):
                unawaited.close()
    return results


async def _nothing_to_do() -> None:
    return None


def quota_from_wire(q: pb.Quota) -> Quota:
    """A directory's quota as the namenode sent it."""
    return Quota(
        q.max_entries if q.HasField("max_entries") else None,
        q.max_space if q.HasField("max_space") else None,
        q.entries,
        q.space,
    )
