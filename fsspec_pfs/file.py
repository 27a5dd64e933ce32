"""The file objects `fsspec.open("pfs://...")` returns: fsspec's buffered file over the
library's readers and writers.

Reading opens one `FileReader` (the block list and its tickets fetched once, at open);
every range fsspec's cache asks for afterwards goes straight to the datanodes, with no
namenode request. Writing ("wb", "xb") streams each buffered chunk into one
`FileWriter`, committed at close; appending ("ab") goes through a `FileEditor`, which
commits the new tail at close. Every call runs on the loop of the file system that
opened the file (fsspec's own I/O thread).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

from fsspec.asyn import sync
from fsspec.spec import AbstractBufferedFile

from plasmafs.client.editing import FileEditor
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter

if TYPE_CHECKING:
    from plasmafs.fsspec.filesystem import PlasmaFileSystem


class PlasmaFile(AbstractBufferedFile):
    """A plasmafs file opened through fsspec."""

    def __init__(
        self,
        fs: PlasmaFileSystem,
        path: str,
        mode: str = "rb",
        block_size: int | str = "default",
        autocommit: bool = True,
        cache_type: str = "readahead",
        cache_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.reader: FileReader | None = None
        self.writer: FileWriter | None = None
        self.editor: FileEditor | None = None
        size = None
        if mode == "rb":
            self.reader = sync(fs.loop, fs.open_reader, path)
            size = self.reader.size
        super().__init__(
            fs,
            path,
            mode=mode,
            block_size=block_size,
            autocommit=autocommit,
            cache_type=cache_type,
            cache_options=cache_options,
            size=size,
            **kwargs,
        )
        if mode == "ab":
            self.editor = sync(fs.loop, fs.open_editor, path)
            self.loc = self.offset = self.editor.size

    def _fetch_range(self, start: int, end: int) -> bytes:
        assert self.reader is not None
        return sync(self.fs.loop, self.reader.pread, start, end - start)

    def _initiate_upload(self) -> None:
        if self.editor is None:
            self.writer = sync(self.fs.loop, self.fs.open_writer, self.path, self.mode)

    def _upload_chunk(self, final: bool = False) -> bool:
        data = self.buffer.getvalue()
        if self.editor is None and self.writer is None:
            self._initiate_upload()  # a file closed before its first chunk filled
        sync(self.fs.loop, self._send, data, final)
        return True

    async def _send(self, data: bytes, final: bool) -> None:
        if self.editor is not None:
            await self.editor.pwrite(self.offset, data)
            if final:
                await self.editor.commit()
                await self.editor.close()
            return
        assert self.writer is not None
        if data:
            await self.writer.write(data)
        if final:
            await self.writer.close()

    def close(self) -> None:
        """Commit what was written (a file being read: let go of its reader)."""
        if self.closed:  # type: ignore[has-type]  # fsspec's untyped property
            return
        if sys.is_finalizing():
            # A file still open as the interpreter ends: fsspec's I/O thread runs no
            # more, and waiting for it would hang the exit. Nothing is committed (the
            # namenode aborts the writer's transaction with the lost connection).
            self.closed = True
            return
        try:
            super().close()
        finally:
            reader, self.reader = self.reader, None
            if reader is not None:
                _close_reader(self.fs.loop, reader)

    def discard(self) -> None:
        """Give up what was written and not committed."""
        writer, self.writer = self.writer, None
        editor, self.editor = self.editor, None
        if writer is not None:
            sync(self.fs.loop, writer.abort)
        if editor is not None:
            sync(self.fs.loop, editor.abort)


def _close_reader(loop: asyncio.AbstractEventLoop, reader: FileReader) -> None:
    """Close `reader` on `loop`, also from a finalizer that runs on that loop's own
    thread (a file object the garbage collector ends), where waiting would deadlock."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        loop.create_task(reader.close())
    else:
        sync(loop, reader.close)
