"""The asyncio client: a connection to the namenode, transactions, and one-shot helpers.

One `Client` holds one multiplexed connection; any number of transactions and
requests may be in flight on it at once. If the connection is lost, the transactions
open on it fail with ConnectionLostError and the next transaction reconnects. If the
namenode refuses the credential, every call raises AuthenticationError until close().
Given several namenode addresses, it connects to the active one and, while a standby
takes over, waits for it; reads are sent again across a failover (`failover.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Sequence,
)
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypeVar

from plasmafs.client import config
from plasmafs.client.connection import Connection
from plasmafs.client.failover import NamenodeRole, connect_to_active, namenode_roles, retrying
from plasmafs.client.file_locks import ClientLocks
from plasmafs.client.session_requests import SessionRequests
from plasmafs.client.transaction import (
    DEFAULT_PAGE,
    CommittedReads,
    Transaction,
    tree_entries,
)
from plasmafs.client.xattr_ops import ClientXattrs
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
    ConfigError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
)
from plasmafs.core.paths import At, Where
from plasmafs.core.proto import namenode_pb2 as pb

if TYPE_CHECKING:
    from plasmafs.client.accounts import Accounts
    from plasmafs.client.admin import (
        Admin,
        BalanceStatus,
        DatanodeStatus,
        FsckFile,
        FsckSummary,
        LoadSummary,
    )
    from plasmafs.client.datapath import DataChannels
    from plasmafs.client.editing import FileEditor
    from plasmafs.client.file_reader import FileReader
    from plasmafs.client.file_writer import FileWriter
    from plasmafs.client.s3_keys import S3Keys
    from plasmafs.client.snapshots import Snapshots
    from plasmafs.core.tls import ChannelTLS

T = TypeVar("T")
DEFAULT_FAILOVER_TIMEOUT = 30.0  # seconds a client of several namenodes waits for one
ROLE_TIMEOUT = 3.0  # seconds a namenode has to answer what its role is
INODE_BATCH = 256  # inode numbers begin_with_inode reserves at a time
RESIZE_ATTEMPTS = 5  # size changes decided again when the size changed meanwhile
MAKEDIRS_LOCK_WAIT = 10.0  # seconds mkdir with parents waits for a name being made


class Client(ClientXattrs, ClientLocks):
    """A plasmafs client of one cluster's namenodes."""

    def __init__(
        self,
        address: str,
        *,
        connect_timeout: float = 10.0,
        local_reads: bool | None = None,
        local_writes: bool | None = None,
        tls: ChannelTLS | Literal[False] | None = None,
        token: str | None = None,
        token_file: Path | None = None,
        lock_wait: float = 0.0,
        durable_commits: bool = True,
        failover_timeout: float | None = None,
    ) -> None:
        """A client of the namenode at `address`. `tls`: the CA (and certificate) to
        verify the cluster with; None finds them as `pfs` does (PFS_CLIENT_CA, or the
        local cluster's); False speaks plaintext to an insecure cluster. The client
        acts as the user of `token` (or of the token in `token_file`, PFS_TOKEN_FILE or
        the local cluster's token file, in that order); a token travels only over TLS.
        `lock_wait`: how long the one-shot changes (mkdir, create, rename, ...) wait for
        a lock another transaction holds before they fail with ConflictError.
        `durable_commits=False` makes commits relaxed (answered before the namenode's
        WAL flush, durable within about a second or at `sync()`). `local_reads`,
        `local_writes`: data through shared memory with datanodes on this host (None:
        yes, unless PFS_LOCAL_READS=0 or PFS_LOCAL_WRITES=0). `address` may list
        several namenodes, comma-separated: the client finds the active one, and
        waits up to `failover_timeout` seconds (default 30 with several addresses,
        0 with one) for a standby to take over before it gives up."""
        if lock_wait < 0:
            raise InvalidArgumentError("lock_wait must be >= 0")
        self.address = address
        self.addresses = config.split_addresses(address)
        if failover_timeout is None:
            failover_timeout = DEFAULT_FAILOVER_TIMEOUT if len(self.addresses) > 1 else 0.0
        if failover_timeout < 0:
            raise InvalidArgumentError("failover_timeout must be >= 0")
        self.failover_timeout = failover_timeout
        self.lock_wait = lock_wait
        self.durable_commits = durable_commits
        self.connect_timeout = connect_timeout
        self.tls = config.client_tls(address) if tls is None else (tls or None)
        if token is None:
            token = config.client_token(address, token_file) if self.tls else None
        elif self.tls is None:
            raise ConfigError("a token is never sent in plaintext: give the cluster's CA")
        self.token = token
        self._conn: Connection | None = None
        self._inodes: list[int] = []  # reserved by the connection `_inodes_of`
        self._inodes_of: Connection | None = None
        self._connecting = asyncio.Lock()
        self._refused: AuthenticationError | None = None
        self._local_reads = local_reads
        self._local_writes = local_writes
        self._data: DataChannels | None = None

    @property
    def data(self) -> DataChannels:
        """Channels to the datanodes, made on first use: a client that only works with
        the namespace never loads the data path."""
        if self._data is None:
            from plasmafs.client.datapath import DataChannels

            self._data = DataChannels(self._local_reads, self.tls, self._local_writes)
        return self._data

    async def __aenter__(self) -> Client:
        await self.connection()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def connection(self) -> Connection:
        """The live connection, reconnecting if the previous one was lost (but not if
        the namenode refused the credential: AuthenticationError)."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        async with self._connecting:
            if self._conn is not None and self._conn.closed:
                old, self._conn = self._conn, None
                await old.close()
                if isinstance(old.ended_by, AuthenticationError):
                    self._refused = old.ended_by
            if self._refused is not None:
                # The same credential would be refused again: reconnecting cannot help.
                raise AuthenticationError(str(self._refused))
            if self._conn is None:
                try:
                    self._conn = await connect_to_active(
                        self.addresses,
                        self.connect_timeout,
                        self.tls,
                        self.token,
                        self.failover_timeout,
                    )
                except AuthenticationError as exc:
                    self._refused = exc
                    raise
            return self._conn

    async def _drop(self, conn: Connection) -> None:
        """Let go of `conn` if it is still the client's (its namenode stopped being the
        active one): the next call connects to whichever is active then."""
        async with self._connecting:
            if self._conn is conn:
                self._conn = None
                await conn.close()

    async def close(self) -> None:
        """Close the connection; open transactions are aborted by the namenode. The
        next call connects again, even after a refused credential."""
        self._refused = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        if self._data is not None:
            await self._data.close()

    async def ping(self) -> str:
        """The namenode's version string."""
        return (await (await self.connection()).ping()).version

    async def namenodes(self) -> list[NamenodeRole]:
        """The role of every namenode this client knows: active (its term, since when),
        standby, or not answering."""
        timeout = min(self.connect_timeout, ROLE_TIMEOUT)
        return await namenode_roles(self.addresses, timeout, self.tls, self.token)

    async def request_counts(self) -> dict[str, int]:
        """How many requests of each operation the namenode has served (all clients)."""
        return dict((await (await self.connection()).ping()).requests)

    async def session_requests(self) -> SessionRequests:
        """Inode reservations and directory leases of the current connection's session
        (they end with it: a reconnect starts a new session)."""
        return SessionRequests(await self.connection())

    async def begin(self, *, lock_wait: float = 0.0) -> Transaction:
        """A new transaction; end it with commit() or abort()."""
        return Transaction(
            await self.connection(), lock_wait=lock_wait, durable=self.durable_commits
        )

    async def begin_with_inode(self) -> tuple[Transaction, int]:
        """A new transaction and an inode number its connection reserved, for a file
        it creates (`Transaction.create(..., ino=)`): the requests that fill the file
        can then go with the create, unanswered, and everything commits in one round
        trip. The numbers are reserved in batches."""
        conn = await self.connection()
        if self._inodes_of is not conn:
            self._inodes, self._inodes_of = [], conn
        if not self._inodes:
            inodes = await SessionRequests(conn).reserve_inodes(INODE_BATCH)
            if self._inodes_of is conn:  # callers that refilled meanwhile keep theirs
                self._inodes.extend(inodes[::-1])
            else:
                self._inodes, self._inodes_of = inodes[::-1], conn
        return Transaction(conn, durable=self.durable_commits), self._inodes.pop()

    def transaction(self, *, lock_wait: float = 0.0) -> _TransactionScope:
        """`async with client.transaction() as t:` commits on success, aborts on error.

        `lock_wait` is how long an operation waits for a lock held by another
        transaction before the transaction fails with ConflictError.
        """
        return _TransactionScope(self, lock_wait)

    async def run(
        self,
        body: Callable[[Transaction], Awaitable[T]],
        *,
        attempts: int = 5,
        lock_wait: float = 0.0,
    ) -> T:
        """Run `body` in a transaction and commit, retrying on ConflictError."""
        for attempt in range(1, attempts + 1):
            try:
                async with self.transaction(lock_wait=lock_wait) as t:
                    return await body(t)
            except ConflictError:
                if attempt == attempts:
                    raise
                await asyncio.sleep(0.005 * 2**attempt)
        raise AssertionError("unreachable")

    async def _reads(self) -> CommittedReads:
        return CommittedReads(await self.connection())

    async def _read(self, read: Callable[[CommittedReads], Awaitable[T]]) -> T:
        """`read` of committed state, sent again after a failover."""

        async def on(conn: Connection) -> T:
            return await read(CommittedReads(conn))

        return await retrying(self.connection, self._drop, on, self.failover_timeout)

    async def _one_shot(self, op: Callable[[Transaction], Awaitable[T]]) -> T:
        # begin, the operation and commit leave in one frame: one round trip. If the
        # operation fails, the commit that follows it commits nothing.
        t = Transaction(
            await self.connection(), lock_wait=self.lock_wait, durable=self.durable_commits
        )
        result = op(t)
        committed = t.commit()
        try:
            value = await result
        except BaseException:
            await asyncio.gather(committed, return_exceptions=True)
            raise
        await committed
        return value

    # --- reads of committed state -------------------------------------------------------

    async def lookup(self, path: Where, *, follow: bool = False) -> Attr:
        """Attributes at `path` (a symlink itself unless follow=True)."""
        return await self._read(lambda r: r.lookup(path, follow=follow))

    async def lookup_for_reading(
        self, path: Where, *, within: int
    ) -> tuple[Attr, BlockList | None]:
        """Attributes at `path` (a symlink itself), with the block list of a regular
        file of at most `within` bytes the caller may read (else None); `reader_of`
        opens it without another request."""
        return await self._read(lambda r: r.lookup_for_reading(path, within=within))

    async def reader_of(self, blocks: BlockList) -> FileReader:
        """A reader of the file version `blocks` describes (from `lookup_for_reading`
        or another reader), opened without a request: check first that it is still
        the file's current version if the open must see the latest."""
        from plasmafs.client.file_reader import FileReader

        if blocks.attr is None:
            raise InvalidArgumentError("a block list without attributes cannot be opened")
        reader = FileReader(CommittedReads(await self.connection()), self.data, blocks.attr.ino)
        return reader.opened_with(blocks)

    async def stat(self, path: str) -> Attr:
        """Attributes at `path`, following symbolic links."""
        return await self._read(lambda r: r.stat(path))

    async def sync(self) -> None:
        """Make every commit acknowledged so far durable, this client's relaxed ones
        (`durable_commits=False`) and everyone else's."""
        await self._read(lambda reads: reads.sync())

    async def getattr(self, ino: int) -> Attr:
        """Attributes of inode `ino`."""
        return await self._read(lambda r: r.getattr(ino))

    async def exists(self, path: str) -> bool:
        """True if something exists at `path` (following symlinks)."""
        try:
            await self.stat(path)
        except NotFoundError:
            return False
        return True

    async def readlink(self, path: str | int) -> str:
        """The target of the symbolic link at `path` (or of inode number `path`)."""
        return await self._read(lambda r: r.readlink(path))

    async def readdir(
        self, path: str | int, *, after: str = "", limit: int = DEFAULT_PAGE, plus: bool = False
    ) -> tuple[list[DirEntry], bool]:
        """One page of a directory listing."""
        return await self._read(lambda r: r.readdir(path, after=after, limit=limit, plus=plus))

    async def scandir(
        self, path: str | int, *, plus: bool = False, page: int = DEFAULT_PAGE
    ) -> AsyncGenerator[DirEntry, None]:
        """Every entry of a directory (a path or an inode number) in name order; memory
        stays at one page."""
        async for entry in (await self._reads()).scandir(path, plus=plus, page=page):
            yield entry

    async def listdir(self, path: str) -> list[str]:
        """All names in a directory (for small directories; prefer scandir)."""
        return [e.name async for e in self.scandir(path)]

    async def fsstat(self) -> FsStat:
        """Namespace counts and cluster space."""
        return await self._read(lambda r: r.fsstat())

    async def summarize(self, path: str) -> Summary:
        """Files, directories, symbolic links, bytes and space with replication of the
        subtree at `path`, in one round trip (what `du -s` and `count` print)."""
        return await self._read(lambda r: r.summarize(path))

    async def walk(
        self,
        path: str | int,
        *,
        page: int = 0,
        depth: int = 0,
        key_order: bool = False,
        after: str = "",
    ) -> AsyncGenerator[TreeEntry, None]:
        """The subtree at `path` (or of directory inode number `path`) a page at a time:
        the root first (path ""), then every entry below it depth first by name, with
        attributes (`depth` N > 0: only those at most N levels below the root). Each
        page is one round trip and one snapshot; an entry present for the whole walk
        comes once. The next page is asked for as soon as a page arrives, while this
        one is decoded.

        `key_order`: in the order of an object store's keys, where each entry sorts by
        its path with "/" after a directory's name ("a.txt" before the entries of
        directory "a", "a0" after them). `after`: start after this path (in key
        order: this key, "d/" for directory d; it need not exist), without the root."""
        reads = await self._reads()

        def ask(cursor: str) -> asyncio.Future[pb.WalkPage]:
            return asyncio.ensure_future(
                reads.walk_request(path, after=cursor, limit=page, depth=depth, key_order=key_order)
            )

        asked: asyncio.Future[pb.WalkPage] | None = ask(after)
        while asked is not None:
            raw = await asked
            asked = None
            if raw.more and raw.path:
                cursor = raw.path[-1].decode("utf-8")
                if key_order and raw.kind[-1] == pb.KIND_DIRECTORY:
                    cursor += "/"
                asked = ask(cursor)
            try:
                for entry in tree_entries(raw):
                    yield entry
            except BaseException:
                if asked is not None:
                    asked.cancel()
                raise

    async def blocks(self, path: str) -> BlockList:
        """The block list of the file at `path` (following symlinks)."""
        reads = await self._reads()
        return await reads.blocks((await reads.stat(path)).ino)

    # --- file data ------------------------------------------------------------------------

    async def open(
        self,
        path: str | int | At,
        mode: str = "rb",
        *,
        replication: int = 0,
        blocksize: int = 0,
        size_hint: int | None = None,
        commit_every: int | None = None,
        known: Attr | None = None,
        empty: bool = False,
        new: bool = False,
        inline: bool = True,
    ) -> FileReader | FileWriter | FileEditor:
        """A file object: "rb" reads, "wb" creates or truncates and writes, "r+b" changes
        an existing file in place (`FileEditor`: writes at any offset, truncate,
        commit); a file may be given by inode number.

        For "wb": `replication` (0: the cluster default), `blocksize` (of a file it
        creates; 0: the cluster default; an existing file keeps its own), `size_hint`
        (lets the namenode place the data in fewer, longer runs), `commit_every` (bytes
        between commits, default 1 GiB), `known` (a file given by inode number, with its
        attributes as last seen: opening does not wait for the namenode), `empty` (with
        `known`: a file the caller created and nobody else writes, nothing to
        truncate; see `FileWriter.open`), `new` (with `known` and a name: the writer
        creates the file `known` describes, with the inode number the connection
        reserved for it, in the transaction its content commits in), `inline` (False:
        a small content goes to blocks too, not into the namenode's inode: for files
        to be concatenated).
        """
        from plasmafs.client.file_reader import FileReader
        from plasmafs.client.file_writer import COMMIT_EVERY, FileWriter

        if mode == "wb":
            return await FileWriter(
                self.begin,
                self.data,
                path,
                replication=replication,
                blocksize=blocksize,
                size_hint=size_hint,
                commit_every=COMMIT_EVERY if commit_every is None else commit_every,
                inline=inline,
            ).open(known=known, empty=empty, new=new)
        if isinstance(path, At):
            raise InvalidArgumentError("a file is read by path or inode number")
        if mode == "r+b":
            from plasmafs.client.editing import FileEditor

            ino = path if isinstance(path, int) else (await self.stat(path)).ino
            return await FileEditor(self.begin, self._reads, self.data, ino).open()
        if mode == "rb":
            where = path
            return await self._read(lambda reads: FileReader(reads, self.data, where).open())
        raise InvalidArgumentError(f"mode must be 'rb', 'wb' or 'r+b', not {mode!r}")

    async def read_file(self, path: str) -> bytes:
        """The whole content of a (small) file."""
        from plasmafs.client.file_reader import FileReader

        reader = await self.open(path, "rb")
        assert isinstance(reader, FileReader)
        return await reader.read()

    async def write_file(
        self, path: str, data: bytes, *, replication: int = 0, blocksize: int = 0
    ) -> Attr:
        """Create or replace a file with `data` (`blocksize`: of a new file)."""
        from plasmafs.client.file_writer import FileWriter

        writer = await self.open(
            path, "wb", replication=replication, blocksize=blocksize, size_hint=len(data)
        )
        assert isinstance(writer, FileWriter)
        async with writer:
            await writer.write(data)
        assert writer.attr is not None
        return writer.attr

    # --- one-shot changes, each its own transaction -------------------------------------

    async def mkdir(self, path: Where, mode: int = 0o755, *, parents: bool = False) -> Attr:
        """Create a directory (with parents=True: and its parents, existing ones are fine)."""
        if parents:
            if not isinstance(path, str):
                raise InvalidArgumentError("parents=True takes a path")
            # Creators of one tree at once (fsspec's put of many files, several mkdir
            # -p) meet on its directories: a name another one is creating is waited
            # for, not failed on, and then found made, as on a local disk.
            wait = max(self.lock_wait, MAKEDIRS_LOCK_WAIT)
            return await self.run(lambda t: t.makedirs(path, mode), lock_wait=wait)
        return await self._one_shot(lambda t: t.mkdir(path, mode))

    async def create(
        self, path: Where, mode: int = 0o644, *, replication: int = 0, blocksize: int = 0
    ) -> Attr:
        """Create an empty file."""
        return await self._one_shot(
            lambda t: t.create(path, mode, replication=replication, blocksize=blocksize)
        )

    async def touch(self, path: str, mtime_ns: int | None = None) -> Attr:
        """Create an empty file, or set the modification time of an existing one (by
        default to now, by the namenode's clock, which a writer may do, not only the
        owner)."""
        now = mtime_ns is None
        try:
            return await self._one_shot(lambda t: t.setattr(path, mtime_ns=mtime_ns, mtime_now=now))
        except NotFoundError:
            pass
        return await self.create(path)

    async def symlink(self, path: Where, target: str) -> Attr:
        """Create a symbolic link."""
        return await self._one_shot(lambda t: t.symlink(path, target))

    async def mknod(self, path: Where, kind: FileKind, mode: int = 0o644, rdev: int = 0) -> Attr:
        """Create a special file: a FIFO or socket, or (as a superuser) a character or
        block device with number `rdev`. Its content is no one's: the kernel of the
        host that opens it serves it (a mount shows it as such)."""
        return await self._one_shot(lambda t: t.mknod(path, kind, mode, rdev))

    async def link(self, target: str | int, path: Where) -> Attr:
        """A hard link: the new name `path` for `target` (a path, its last component not
        followed, or an inode number; not a directory). The file's attributes, with
        one more link."""
        return await self._one_shot(lambda t: t.link(target, path))

    async def concat(self, target: str, sources: Sequence[str]) -> Attr:
        """Append files `sources` to file `target` in order, then remove them, without
        copying their data: their blocks become the target's (HDFS's concat). The
        target's size and every source's but the last must be whole blocks (a
        multiple of the blocksize); the sources must be regular files with one link
        and their content in blocks (files written with `inline=False`, or larger
        than the inline limit). The target's new attributes."""
        names = list(sources)
        return await self._one_shot(lambda t: t.concat(target, names))

    async def remove(
        self, path: str, *, recursive: bool = False, skip_trash: bool = False
    ) -> str | None:
        """Remove `path` as `pfs rm` does (a directory with `recursive`): into the
        caller's trash, returning its path there, or for good (None) with
        `skip_trash`, when the cluster keeps no trash, or what is in a trash already
        (client/trash.py). `unlink` and `rmdir` delete at once."""
        from plasmafs.client.trash import remove

        return await remove(self, path, recursive=recursive, skip_trash=skip_trash)

    async def unlink(self, path: Where) -> None:
        """Remove a file or symbolic link."""
        await self._one_shot(lambda t: t.unlink(path))

    async def rmdir(self, path: Where) -> None:
        """Remove an empty directory."""
        await self._one_shot(lambda t: t.rmdir(path))

    async def rename(
        self, src: Where, dst: Where, *, replace: bool = True, exchange: bool = False
    ) -> None:
        """Move `src` to `dst` atomically (replace=False: EEXIST if `dst` exists);
        exchange=True swaps the two, which must both exist (Linux's RENAME_EXCHANGE)."""
        await self._one_shot(lambda t: t.rename(src, dst, replace=replace, exchange=exchange))

    async def setattr(self, target: str | int, **changes: int | None) -> Attr:
        """Change attributes (mode, uid, gid, mtime_ns, size, replication). A size
        beyond the end reads as zeros up to the new end (POSIX), as `truncate` makes
        it; `Transaction.setattr` changes the size alone, without that care. All in
        one commit, but for a size that needs a block rewritten (see `truncate`):
        then the other changes follow in a second."""
        size = changes.get("size")
        if size is None:
            return await self._one_shot(lambda t: t.setattr(target, **changes))
        rest = {k: v for k, v in changes.items() if k != "size"}
        attr, done = await self._resize(target, size, rest)
        if done or not any(v is not None and v is not False for v in rest.values()):
            return attr
        return await self._one_shot(lambda t: t.setattr(target, **rest))

    async def truncate(self, target: str | int, size: int) -> Attr:
        """Set the size of a file (a path, symlinks followed, or an inode number):
        what is past the new end is gone, and what an extension adds reads as zeros
        however the file was cut before. A file growing past an end inside a block has
        that block rewritten with zeros after its end (an edit); other size changes
        are one namenode request (two for an extension)."""
        return (await self._resize(target, size, {}))[0]

    async def _resize(
        self, target: str | int, size: int, more: dict[str, int | None]
    ) -> tuple[Attr, bool]:
        """`truncate`, with the changes `more` in the same commit when the size change
        is one request; the attributes and whether `more` went with it."""
        from plasmafs.client.editing import FileEditor

        reads = await self._reads()
        for attempt in range(1, RESIZE_ATTEMPTS + 1):
            attr = (
                await reads.getattr(target) if isinstance(target, int) else await self.stat(target)
            )
            raw = (
                size <= attr.size
                or attr.size % attr.blocksize == 0
                or attr.kind is not FileKind.FILE
            )
            if not raw:
                # Only a block holding the end needs it: not a hole, not an inline content
                # (that reads as zeros past its bytes already).
                end = await reads.blocks(attr.ino, attr.size // attr.blocksize, 1)
                raw = end.inline is not None or not end.extents
            if not raw:
                break
            # Decided from the size read above: if another writer changed it meanwhile,
            # decide again (a growth might now start inside a block with data).
            known = attr.size if attr.kind is FileKind.FILE else None
            try:
                changed = await self._one_shot(
                    partial(_set_size, target=target, size=size, if_size=known, more=more)
                )
            except ConflictError:
                if attempt == RESIZE_ATTEMPTS:
                    raise
                continue
            return changed, True
        editor = await self.open(attr.ino, "r+b")
        assert isinstance(editor, FileEditor)
        try:
            editor.truncate(size)
            return await editor.close(), False
        except BaseException:
            await editor.abort()
            raise

    async def chmod(self, path: str, mode: int) -> Attr:
        """Change permission bits."""
        return await self.setattr(path, mode=mode)

    async def chown(self, path: str, uid: int | None = None, gid: int | None = None) -> Attr:
        """Change owner and/or group."""
        return await self.setattr(path, uid=uid, gid=gid)

    # --- replication and administration ---------------------------------------------

    async def setrep(
        self, path: str, replication: int, *, wait: bool = False, poll: float = 0.5
    ) -> list[str]:
        """Set the replication of a file, or of every file below a directory (as
        `hdfs dfs -setrep`); returns the files changed. The namenode adds or removes
        replicas; with `wait`, return only once every block of those files has exactly
        `replication` live replicas, looking every `poll` seconds. A replication above
        the live datanodes is refused by the namenode."""
        from plasmafs.client import replication_change as rep

        files = await rep.set_replication(self, path, replication)
        if wait:
            await rep.wait_for_replication(self, files, replication, poll=poll)
        return files

    async def wait_replication(
        self, files: list[str], replication: int, *, poll: float = 0.5
    ) -> None:
        """Wait until every block of `files` has exactly `replication` live replicas."""
        from plasmafs.client import replication_change as rep

        await rep.wait_for_replication(self, files, replication, poll=poll)

    async def accounts(self) -> Accounts:
        """The namenode's users, groups and credentials (changes need a superuser)."""
        from plasmafs.client.accounts import Accounts

        return Accounts(await self.connection())

    async def s3_keys(self) -> S3Keys:
        """The namenode's S3 access keys (see plasmafs.client.s3_keys)."""
        from plasmafs.client.s3_keys import S3Keys

        return S3Keys(await self.connection())

    async def snapshots(self) -> Snapshots:
        """Taking, deleting, listing and comparing snapshots (plasmafs.client.snapshots)."""
        from plasmafs.client.snapshots import Snapshots

        return Snapshots(await self.connection(), lambda path: self.walk(path))

    async def _admin(self) -> Admin:
        from plasmafs.client.admin import Admin

        conn = await self.connection()
        return Admin(conn.channel, conn.address, conn.metadata)

    async def dump(self) -> AsyncIterator[bytes]:
        """The namespace and accounts as one consistent snapshot, in pieces to write
        out as they come (for `load`; a superuser's)."""
        async for piece in (await self._admin()).dump():
            yield piece

    async def load(self, pieces: AsyncIterable[bytes]) -> LoadSummary:
        """Load a dump into this cluster, whose namespace must be empty (a superuser's);
        the namenode starts over afterwards, as in a failover."""
        return await (await self._admin()).load(pieces)

    async def datanodes(self) -> list[DatanodeStatus]:
        """Every datanode the namenode knows, with its state, space and copy work."""
        return await (await self._admin()).datanodes()

    async def decommission(self, datanode_id: int) -> DatanodeStatus:
        """Stop placing data on a datanode and copy its replicas elsewhere; it becomes
        decommissioned once none of its replicas is needed any more."""
        return await (await self._admin()).decommission(datanode_id)

    async def balance(
        self, threshold: float = 0.0, bandwidth: int = 0, *, stop: bool = False,
        status_only: bool = False,
    ) -> BalanceStatus:  # fmt: skip
        """Start a balancing run (replica groups move from fuller to emptier datanodes
        until every one is within `threshold`, a fraction of capacity, default 0.10, of
        the mean; at most `bandwidth` bytes/s, 0: unlimited), retune it, `stop` it, or
        with `status_only` just report how it stands."""
        return await (await self._admin()).balance(
            threshold, bandwidth, stop=stop, status_only=status_only
        )

    async def recommission(self, datanode_id: int) -> DatanodeStatus:
        """Undo a decommission: the datanode takes new data again."""
        return await (await self._admin()).recommission(datanode_id)

    async def remove_datanode(self, datanode_id: int) -> list[DatanodeStatus]:
        """Forget a dead or decommissioned datanode; returns the datanodes left."""
        return await (await self._admin()).remove_datanode(datanode_id)

    async def set_quota(
        self, path: str, *, entries: int | None = None, space: int | None = None
    ) -> Quota:
        """Limit the entries (the directory itself and every name below it) and the
        space (bytes with replication) of the tree at directory `path`; None keeps that
        limit as it is (a superuser's). A change that would pass a limit raises
        QuotaExceededError (EDQUOT on a mount). Returns the quota and the tree's usage."""
        return await (await self._admin()).set_quota(path, entries=entries, space=space)

    async def clear_quota(self, path: str) -> None:
        """Remove directory `path`'s quota (a superuser's)."""
        await (await self._admin()).clear_quota(path)

    async def fsck(
        self, path: str = "/", *, all_files: bool = False, list_corrupt: bool = False
    ) -> AsyncIterator[FsckFile | FsckSummary]:
        """Check the replicas of every file under `path`: yields the files with problems
        (every file with `all_files`; only those with missing or corrupt blocks with
        `list_corrupt`), then one FsckSummary, last."""
        async for item in (await self._admin()).fsck(
            path, all_files=all_files, list_corrupt=list_corrupt
        ):
            yield item


class _TransactionScope:
    """The async context manager `Client.transaction()` returns."""

    def __init__(self, client: Client, lock_wait: float) -> None:
        self._client = client
        self._lock_wait = lock_wait
        self._txn: Transaction | None = None

    async def __aenter__(self) -> Transaction:
        self._txn = await self._client.begin(lock_wait=self._lock_wait)
        return self._txn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._txn is not None
        await self._txn.__aexit__(exc_type, exc, tb)


async def connect(address: str | None = None, *, connect_timeout: float = 10.0) -> Client:
    """Connect to the namenode at `address` (default: PFS_CLIENT_NAMENODE or the local
    cluster's config under PFS_HOME), over TLS when configured (config.client_tls)."""
    client = Client(config.namenode_address(address), connect_timeout=connect_timeout)
    await client.connection()
    return client


def _set_size(
    t: Transaction,
    *,
    target: str | int,
    size: int,
    if_size: int | None,
    more: dict[str, int | None],
) -> Awaitable[Attr]:
    """The size change `Client._resize` decided, with the other changes `more`."""
    return t.setattr(target, size=size, if_size=if_size, **more)
