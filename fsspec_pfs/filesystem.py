"""`pfs://` for the Python data stack: an fsspec `AsyncFileSystem` over the asyncio
client, registered as protocol "pfs" (entry point `fsspec.specs`).

`fsspec.filesystem("pfs")` and `pfs:///path` reach the cluster `pfs` would (the
environment's or the local cluster's client configuration, credentials included);
`pfs://host:port/path` or the `namenode` storage option name another. The other
storage options: `replication` and `blocksize` of new files (0: the cluster's),
`local_reads` (shared memory from datanodes on this host; None: as `PFS_LOCAL_READS`),
`token_file` (act as that credential's user), `auto_mkdir` (default True: writing a
file creates its missing parent directories, as HDFS's create does).

Every method is the library's operation under fsspec's name: listings page through
readdir with attributes, `find`/`du`/`walk` are one walk or summary of the subtree,
`rm -r` removes a tree in batches, copies stream inside the cluster, and a file opened
for reading fetches its block list once, then reads ranges from the datanodes alone.
A client (and its gRPC channel) is made for each event loop the methods run on:
fsspec's I/O thread for the synchronous API, the caller's loop with
`asynchronous=True`. Errors are the built-in OSErrors fsspec expects
(FileNotFoundError, FileExistsError, ...), each with the plasmafs error as its cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from fsspec.asyn import AsyncFileSystem, sync
from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.utils import stringify_path

from plasmafs.client import config
from plasmafs.client.client import Client
from plasmafs.client.copying import copy_file
from plasmafs.client.editing import FileEditor
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.client.ranges import read_ranges, slice_limits
from plasmafs.core import paths
from plasmafs.core.attributes import Attr, FileKind, TreeEntry
from plasmafs.core.errors import PlasmaError
from plasmafs.fsspec.conversions import (
    answer,
    describe,
    gather_children,
    iterate,
    os_error,
    walk_triples,
)
from plasmafs.fsspec.file import PlasmaFile

T = TypeVar("T")
PROTOCOL = "pfs"
CHUNK = 4 * 1024 * 1024  # bytes per read of a local file in put, and per write in get


class PlasmaFileSystem(AsyncFileSystem):
    """plasmafs as an fsspec file system. `rm` moves into the caller's trash as `pfs rm`
    does, unless `skip_trash=True` (a storage option) or the cluster keeps no trash."""

    protocol = PROTOCOL
    root_marker = "/"

    def __init__(
        self,
        namenode: str | None = None,
        *,
        replication: int = 0,
        blocksize: int = 0,
        local_reads: bool | None = None,
        token_file: str | os.PathLike[str] | None = None,
        auto_mkdir: bool = True,
        skip_trash: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.auto_mkdir = auto_mkdir
        self.skip_trash = skip_trash
        self.namenode = namenode
        self.replication = replication
        self.blocksize = blocksize
        self.local_reads = local_reads
        self.token_file = Path(token_file) if token_file is not None else None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = (
            weakref.WeakKeyDictionary()
        )

    # --- the client of the running loop ---------------------------------------------------

    async def _client(self) -> Client:
        """The client for the running loop, made on first use there."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            address = config.namenode_address(self.namenode)
            client = Client(address, local_reads=self.local_reads, token_file=self.token_file)
            self._clients[loop] = client
        return client

    async def _close(self) -> None:
        """Close the running loop's client (the next call connects again)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def close(self) -> None:
        """Close the client of fsspec's I/O loop (synchronous use)."""
        if self.loop is not None and self.loop.is_running():
            sync(self.loop, self._close)

    # fsspec makes synchronous twins only of the coroutines it knows; these it does not.

    def modified(self, path: str) -> datetime:
        """When the file at `path` last changed."""
        return sync(self.loop, self._modified, path)

    def created(self, path: str) -> datetime:
        """The last change of the inode (plasmafs keeps no creation time)."""
        return sync(self.loop, self._created, path)

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        """Create an empty file, or (truncate=False) update an existing one's mtime."""
        sync(self.loop, self._touch, path, truncate, **kwargs)

    def rmdir(self, path: str) -> None:
        """Remove an empty directory."""
        sync(self.loop, self._rmdir, path)

    def mv(self, path1: str, path2: str, recursive: bool = False, **kwargs: Any) -> None:
        """Rename in the namespace (into `path2` if it is a directory)."""
        sync(self.loop, self._mv, path1, path2, recursive, **kwargs)

    def getxattr(self, path: str, name: str) -> bytes:
        """The value of extended attribute `name` (OSError ENODATA if unset)."""
        return sync(self.loop, self._getxattr, path, name)

    def listxattr(self, path: str) -> list[str]:
        """The names of the extended attributes the caller may see."""
        return sync(self.loop, self._listxattr, path)

    def setxattr(self, path: str, name: str, value: bytes, flags: int = 0) -> None:
        """Set extended attribute `name` (flags: os.XATTR_CREATE or os.XATTR_REPLACE)."""
        sync(self.loop, self._setxattr, path, name, value, flags)

    def removexattr(self, path: str, name: str) -> None:
        """Remove extended attribute `name` (OSError ENODATA if unset)."""
        sync(self.loop, self._removexattr, path, name)

    # --- paths ----------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        """The absolute plasmafs path of `pfs:///a`, `pfs://host:port/a`, `/a` or `a`."""
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = stringify_path(path)
        if path.startswith(f"{PROTOCOL}://"):
            path = path[len(PROTOCOL) + 3 :]
            if not path.startswith("/"):  # host:port/path
                path = "/" + path.partition("/")[2]
        path = "/" + path.strip("/")
        return posixpath.normpath(path) if path != "/" else path

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict[str, Any]:
        """`pfs://host:port/...` names its namenode."""
        rest = stringify_path(path)
        if rest.startswith(f"{PROTOCOL}://") and not rest.startswith(f"{PROTOCOL}:///"):
            address = rest[len(PROTOCOL) + 3 :].partition("/")[0]
            if address:
                return {"namenode": address}
        return {}

    # --- metadata -------------------------------------------------------------------------

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        fs = await self._client()
        attr = await answer(fs.lookup(path), path)
        if attr.kind is not FileKind.SYMLINK:
            return describe(path, attr)
        target = await answer(fs.readlink(path), path)
        try:
            followed: Attr | None = await fs.stat(path)
        except PlasmaError:
            followed = None  # dangling or looping
        return describe(path, followed, attr, target)

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        listing: list[dict[str, Any]] = []
        links: list[tuple[int, str]] = []
        # A walk one level deep: pages of thousands, column by column.
        async for full, entry in self._tree(path, depth=1):
            if not entry.path and entry.attr.kind is FileKind.DIRECTORY:
                continue  # the directory itself
            if entry.attr.kind is FileKind.SYMLINK:
                links.append((len(listing), full))
            listing.append(describe(full, entry.attr))
        if links:
            for position, info in zip(
                (p for p, _ in links),
                await asyncio.gather(*(self._info(full) for _, full in links)),
                strict=True,
            ):
                listing[position] = info
        return listing if detail else [info["name"] for info in listing]

    async def _exists(self, path: str, **kwargs: Any) -> bool:
        try:
            await self._info(path)
        except FileNotFoundError:
            return False
        return True

    async def _modified(self, path: str) -> datetime:
        return datetime.fromtimestamp((await self._info(path))["mtime"], UTC)

    async def _created(self, path: str) -> datetime:
        """plasmafs keeps no creation time: the last change of the inode stands for it."""
        return datetime.fromtimestamp((await self._info(path))["ctime"], UTC)

    # --- whole subtrees -------------------------------------------------------------------

    async def _tree(self, path: str, depth: int = 0) -> AsyncIterator[tuple[str, TreeEntry]]:
        """Every entry of the subtree at `path` (to `depth` levels below it, if set) with
        its full path, from one walk. A directory below the root that may not be read is
        listed without its contents (fsspec's walks omit what they cannot list); the
        root itself is a PermissionError."""
        fs = await self._client()
        async for entry in iterate(fs.walk(path, depth=depth), path):
            if entry.unreadable and not entry.path:
                raise PermissionError(13, "permission denied (directory not read)", path)
            yield (paths.join(path, entry.path) if entry.path else path), entry

    async def _find(
        self, path: str, maxdepth: int | None = None, withdirs: bool = False, **kwargs: Any
    ) -> Any:
        path = self._strip_protocol(path)
        detail = kwargs.pop("detail", False)
        if maxdepth is not None and maxdepth < 1:
            raise ValueError("maxdepth must be at least 1")
        found: dict[str, dict[str, Any]] = {}
        try:
            async for full, entry in self._tree(path, depth=maxdepth or 0):
                depth = entry.path.count("/") + 1 if entry.path else 0
                is_dir = entry.attr.kind is FileKind.DIRECTORY
                if depth == 0 and is_dir and not withdirs:
                    continue
                if not is_dir or withdirs:
                    found[full] = describe(full, entry.attr)
        except FileNotFoundError:
            return {} if detail else []
        names = sorted(found)
        return {name: found[name] for name in names} if detail else names

    async def _walk(
        self,
        path: str,
        maxdepth: int | None = None,
        topdown: bool = True,
        on_error: str | Callable[[OSError], None] = "omit",
        **kwargs: Any,
    ) -> AsyncIterator[tuple[str, Any, Any]]:
        """os.walk's triples from one walk of the subtree (gathered first: a walk
        interleaves a directory's entries with its subdirectories' contents)."""
        if maxdepth is not None and maxdepth < 1:
            raise ValueError("maxdepth must be at least 1")
        path = self._strip_protocol(path)
        detail = kwargs.pop("detail", False)
        try:
            children = await gather_children(self._tree(path, depth=maxdepth or 0))
        except OSError as exc:
            if on_error == "raise":
                raise
            if callable(on_error):
                on_error(exc)
            return
        if path not in children:
            return  # a file
        async for triple in walk_triples(path, children, maxdepth, topdown, detail):
            yield triple

    async def _du(
        self, path: str, total: bool = True, maxdepth: int | None = None, **kwargs: Any
    ) -> Any:
        path = self._strip_protocol(path)
        if total and maxdepth is None:
            fs = await self._client()
            return (await answer(fs.summarize(path), path)).bytes
        sizes = {
            name: info["size"]
            for name, info in (await self._find(path, maxdepth=maxdepth, detail=True)).items()
        }
        return sum(sizes.values()) if total else sizes

    # --- contents -------------------------------------------------------------------------

    async def _creating(self, path: str, make: Callable[[], Awaitable[T]]) -> T:
        """`make()`, which creates the file at `path`; with auto_mkdir, a missing parent
        is made and `make()` tried again."""
        try:
            return await answer(make(), path)
        except FileNotFoundError:
            if not self.auto_mkdir:
                raise
        parent = paths.parent_and_name(path)[0]
        fs = await self._client()
        await answer(fs.mkdir(parent, parents=True), parent)
        return await answer(make(), path)

    async def open_reader(self, path: str) -> FileReader:
        """A reader of the file at `path`, its block list fetched (for PlasmaFile)."""
        fs = await self._client()
        reader = await answer(fs.open(path, "rb"), path)
        assert isinstance(reader, FileReader)
        return reader

    async def open_writer(self, path: str, mode: str = "wb") -> FileWriter:
        """A writer replacing the file at `path` (for PlasmaFile)."""
        fs = await self._client()
        writer = await self._creating(
            path,
            lambda: fs.open(path, "wb", replication=self.replication, blocksize=self.blocksize),
        )
        assert isinstance(writer, FileWriter)
        return writer

    async def open_editor(self, path: str) -> FileEditor:
        """An editor of the file at `path`, created empty if missing (for appending)."""
        fs = await self._client()
        with contextlib.suppress(FileExistsError):
            await self._creating(path, lambda: fs.create(path, replication=self.replication))
        editor = await answer(fs.open(path, "r+b"), path)
        assert isinstance(editor, FileEditor)
        return editor

    async def create_exclusive(self, path: str) -> None:
        """Create an empty file at `path`; FileExistsError if the name is taken."""
        fs = await self._client()
        await self._creating(path, lambda: fs.create(path, replication=self.replication))

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | str | None = None,
        autocommit: bool = True,
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> PlasmaFile:
        path = self._strip_protocol(path)
        if mode == "xb":
            sync(self.loop, self.create_exclusive, path)
        return PlasmaFile(
            self,
            path,
            mode,
            block_size=block_size or "default",
            autocommit=autocommit,
            cache_options=cache_options,
            **kwargs,
        )

    async def _cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        path = self._strip_protocol(path)
        reader = await self.open_reader(path)
        try:
            first, last = slice_limits(start, end, reader.size)
            return await answer(reader.pread(first, last - first), path)
        finally:
            await reader.close()

    async def _cat_ranges(
        self,
        paths: list[str],
        starts: int | list[int | None] | None,
        ends: int | list[int | None] | None,
        max_gap: int | None = None,
        batch_size: int | None = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> list[Any]:
        """Each file's block list is fetched once; its ranges then go to the datanodes
        alone, several at once."""
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        count = len(paths)
        starts_list = starts if isinstance(starts, list) else [starts] * count
        ends_list = ends if isinstance(ends, list) else [ends] * count
        if len(starts_list) != count or len(ends_list) != count:
            raise ValueError("starts and ends must match paths")
        stripped = [self._strip_protocol(p) for p in paths]
        fs = await self._client()
        wanted = list(zip(stripped, starts_list, ends_list, strict=True))
        results = [
            os_error(r, path) if isinstance(r, PlasmaError) else r
            for r, (path, _, _) in zip(await read_ranges(fs, wanted), wanted, strict=True)
        ]
        if on_error != "return":
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        return results

    async def _pipe_file(
        self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any
    ) -> None:
        path = self._strip_protocol(path)
        fs = await self._client()
        if mode == "create":
            await self.create_exclusive(path)
        await self._creating(
            path,
            lambda: fs.write_file(
                path, value, replication=self.replication, blocksize=self.blocksize
            ),
        )

    async def _put_file(
        self,
        lpath: str,
        rpath: str,
        callback: Callback = DEFAULT_CALLBACK,
        mode: str = "overwrite",
        **kwargs: Any,
    ) -> None:
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            await self._makedirs(rpath, exist_ok=True)
            return
        if mode == "create":
            await self.create_exclusive(rpath)
        size = os.path.getsize(lpath)
        callback.set_size(size)
        writer = await self.open_writer(rpath)
        with open(lpath, "rb") as local:  # noqa: ASYNC230 - read in a thread below
            try:
                while chunk := await asyncio.to_thread(local.read, CHUNK):
                    await answer(writer.write(chunk), rpath)
                    callback.relative_update(len(chunk))
                await answer(writer.close(), rpath)
            except BaseException:
                await writer.abort()
                raise

    async def _get_file(
        self, rpath: str, lpath: str, callback: Callback = DEFAULT_CALLBACK, **kwargs: Any
    ) -> None:
        rpath = self._strip_protocol(rpath)
        if await self._isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        reader = await self.open_reader(rpath)
        try:
            callback.set_size(reader.size)
            with open(lpath, "wb") as local:  # noqa: ASYNC230 - written in a thread below
                async for piece in iterate(reader.stream(), rpath):
                    await asyncio.to_thread(local.write, piece)
                    callback.relative_update(len(piece))
        finally:
            await reader.close()

    # --- namespace changes ----------------------------------------------------------------

    async def _mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        fs = await self._client()
        if not create_parents:
            await answer(fs.mkdir(path), path)
            return
        if await self._exists(path):
            raise FileExistsError(17, "file exists", path)
        await answer(fs.mkdir(path, parents=True), path)

    async def _makedirs(self, path: str, exist_ok: bool = False) -> None:
        path = self._strip_protocol(path)
        if not exist_ok and await self._exists(path):
            raise FileExistsError(17, "file exists", path)
        fs = await self._client()
        await answer(fs.mkdir(path, parents=True), path)

    async def _rmdir(self, path: str) -> None:
        path = self._strip_protocol(path)
        fs = await self._client()
        await answer(fs.rmdir(path), path)

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        fs = await self._client()
        attr = await answer(fs.lookup(path), path)
        if attr.kind is FileKind.DIRECTORY:
            raise IsADirectoryError(21, "is a directory", path)
        await answer(fs.remove(path, skip_trash=self.skip_trash), path)

    async def _rm(
        self,
        path: str | list[str],
        recursive: bool = False,
        batch_size: int | None = None,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        if maxdepth is not None:  # removal to a depth: fsspec's own, path by path
            await super()._rm(path, recursive, batch_size, maxdepth, **kwargs)
            return
        fs = await self._client()
        for target in await self._expand_path(path):
            attr = await answer(fs.lookup(target), target)
            if attr.kind is FileKind.DIRECTORY and not recursive:
                raise IsADirectoryError(21, "is a directory (use recursive=True)", target)
            with contextlib.suppress(FileNotFoundError):  # gone with a directory before it
                removal = fs.remove(target, recursive=True, skip_trash=self.skip_trash)
                await answer(removal, target)

    async def _cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        fs = await self._client()
        if await self._isdir(path1):  # FileNotFoundError for a missing source
            await self._makedirs(path2, exist_ok=True)
            return
        replication = self.replication or None
        await self._creating(path2, lambda: copy_file(fs, path1, path2, replication=replication))

    async def _mv(self, path1: str, path2: str, recursive: bool = True, **kwargs: Any) -> None:
        """A rename in the namespace (into `path2` if it is a directory); globs and lists
        move each match."""
        if isinstance(path1, str) and not any(c in path1 for c in "*?["):
            src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
            if await self._isdir(dst) and not await self._same(src, dst):
                dst = paths.join(dst, paths.parent_and_name(src)[1])
            fs = await self._client()
            await answer(fs.rename(src, dst), src)
            return
        await self._copy(path1, path2, recursive=recursive, **kwargs)
        await self._rm(path1, recursive=recursive)

    async def _same(self, a: str, b: str) -> bool:
        try:
            return bool((await self._info(a))["ino"] == (await self._info(b))["ino"])
        except FileNotFoundError:
            return False

    async def _touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        fs = await self._client()
        if truncate or not await self._exists(path):
            await self._creating(
                path, lambda: fs.write_file(path, b"", replication=self.replication)
            )
        else:
            await answer(fs.touch(path), path)

    async def _getxattr(self, path: str, name: str) -> bytes:
        path = self._strip_protocol(path)
        return await answer((await self._client()).getxattr(path, name), path)

    async def _listxattr(self, path: str) -> list[str]:
        path = self._strip_protocol(path)
        return await answer((await self._client()).listxattr(path), path)

    async def _setxattr(self, path: str, name: str, value: bytes, flags: int = 0) -> None:
        path = self._strip_protocol(path)
        await answer((await self._client()).setxattr(path, name, value, flags), path)

    async def _removexattr(self, path: str, name: str) -> None:
        path = self._strip_protocol(path)
        await answer((await self._client()).removexattr(path, name), path)
