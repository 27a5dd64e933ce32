"""Server-side copies: CopyObject, and the source side of UploadPartCopy.

The source is opened for reading as the caller (the namenode checks the right to read
it) and the new file is filled by the datanodes from the source's blocks
(FileWriter.copy_blocks): no byte of a content in blocks passes through the gateway.
Two cases do pass through it, bounded as a GET is: a content the namenode keeps inline
(at most its inline limit, 4 KiB by default), and a part copied from a range that does
not start on a block boundary, or from a source of another blocksize.

ETags: a copied object keeps its source's ETag — the same bytes, as Ceph's RGW does —
with its checksum and part sizes. A part copied from a whole single-part object has
the object's MD5 as its ETag; a part copied from a range gets an MD5 of the source's
ETag and the range (reading the bytes to hash them is what the copy avoids; clients
hand part ETags back to Complete and do not recompute them).
"""

from __future__ import annotations

import hashlib
import re
import time
import urllib.parse
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from plasmafs.client import Client
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.core import errors as pfs
from plasmafs.gateway.conditions import NotModified, check_conditions, precondition_failed
from plasmafs.gateway.object_keys import object_path, staging_path
from plasmafs.gateway.object_meta import XATTR, ObjectMeta, read_meta
from plasmafs.gateway.puts import (
    NO_COMMIT_STEPS,
    move_into_place,
    put_conditions,
    stored_headers,
    unlink_quietly,
    user_metadata,
)
from plasmafs.gateway.s3_errors import (
    S3Error,
    invalid_argument,
    invalid_request,
    no_such_key,
    not_implemented,
)
from plasmafs.gateway.xml_replies import element, iso_time, result

if TYPE_CHECKING:
    from plasmafs.gateway.requests import S3Request

COPY_SOURCE = "x-amz-copy-source"
_SOURCE_CONDITIONS = {
    "x-amz-copy-source-if-match": "If-Match",
    "x-amz-copy-source-if-none-match": "If-None-Match",
    "x-amz-copy-source-if-modified-since": "If-Modified-Since",
    "x-amz-copy-source-if-unmodified-since": "If-Unmodified-Since",
}
_COPY_RANGE = re.compile(r"bytes=([0-9]+)-([0-9]+)")


@dataclass(frozen=True, slots=True)
class CopySource:
    """The object an x-amz-copy-source header names."""

    bucket: str
    key: str


def copy_source(headers: Mapping[str, str]) -> CopySource:
    """The source a copy names: "[/]bucket/key", URL-encoded, optionally with
    "?versionId=null" (the only version an object has here)."""
    raw = headers[COPY_SOURCE]
    path, _, query = raw.partition("?")  # before decoding: a key may hold an encoded "?"
    if query:
        version = urllib.parse.parse_qs(query, keep_blank_values=True).get("versionId")
        if version is None:
            raise invalid_argument("x-amz-copy-source takes no parameter but versionId")
        if version != ["null"]:
            raise S3Error("NoSuchVersion", 404, "The specified version does not exist.")
    bucket, _, key = urllib.parse.unquote(path).lstrip("/").partition("/")
    if not bucket or not key:
        raise invalid_argument("x-amz-copy-source must name a bucket and a key: bucket/key")
    return CopySource(bucket, key)


async def open_source(s3: S3Request, source: CopySource) -> tuple[FileReader, ObjectMeta]:
    """The source object opened for reading as the caller, with its S3 attributes,
    once the request's x-amz-copy-source-if-* conditions held."""
    fs = s3.gateway.fs
    if source.key.endswith("/"):
        raise invalid_request("a key ending with '/' is a directory: it has no content to copy")
    path = object_path(s3.gateway.root, source.bucket, source.key)
    try:
        reader = await fs.open(path, "rb")
    except pfs.NotFoundError:
        await s3.bucket_exists(source.bucket)
        raise no_such_key(source.key) from None
    except (pfs.IsDirectoryError, pfs.NotDirectoryError, pfs.InvalidArgumentError):
        raise no_such_key(source.key) from None
    assert isinstance(reader, FileReader) and reader.attr is not None
    try:
        meta = await read_meta(fs, reader.attr)
        conditions = {
            header: s3.request.headers[name]
            for name, header in _SOURCE_CONDITIONS.items()
            if name in s3.request.headers
        }
        try:
            check_conditions(conditions, meta.etag_of(reader.attr), reader.attr.mtime_ns, read=True)
        except NotModified as unmet:  # a copy has no 304: every failed condition is a 412
            raise precondition_failed(f"x-amz-copy-source-{unmet.condition}") from None
        except S3Error as failed:  # named by the copy's own header
            condition = failed.fields.get("Condition")
            if condition is not None:
                failed.fields["Condition"] = f"x-amz-copy-source-{condition}"
            raise
    except BaseException:
        await reader.close()
        raise
    return reader, meta


async def copy_content(
    fs: Client,
    reader: FileReader,
    staged: str,
    meta: ObjectMeta,
    *,
    first: int = 0,
    length: int | None = None,
    inline: bool = True,
) -> None:
    """Write the new file `staged` with the source's bytes [first, first+length)
    (default: all of them) and commit it with `meta` (size and time completed) as its
    S3 attributes. `inline` False: a small content goes to blocks too (a part)."""
    blocks = reader.blocks
    assert blocks is not None
    length = blocks.size - first if length is None else length
    writer = await fs.open(
        staged, "wb", size_hint=length, commit_every=NO_COMMIT_STEPS, inline=inline
    )
    assert isinstance(writer, FileWriter) and writer.attr is not None
    try:
        await writer.copy_from(reader, first, length)
        meta.size, meta.mtime_ns = length, time.time_ns()
        await writer.setattr(mtime_ns=meta.mtime_ns)
        await writer.close(xattrs={XATTR: meta.to_bytes()})
    except BaseException:
        await writer.abort()
        raise


async def copy_object(s3: S3Request, bucket: str, key: str) -> web.Response:
    """CopyObject: a new object with the source's content (copied by the datanodes)
    and its attributes (COPY) or the request's (REPLACE), put in place as a PUT is."""
    fs, root, headers = s3.gateway.fs, s3.gateway.root, s3.request.headers
    source = copy_source(headers)
    directive = headers.get("x-amz-metadata-directive", "COPY").upper()
    if directive not in ("COPY", "REPLACE"):
        raise invalid_argument("x-amz-metadata-directive must be COPY or REPLACE")
    await s3.bucket_exists(bucket)
    if key.endswith("/"):
        raise invalid_request("an object whose key ends with '/' is a directory: no content")
    path = object_path(root, bucket, key)
    reader, source_meta = await open_source(s3, source)
    async with reader:
        meta = _copied_meta(s3, reader, source_meta, directive)
        if path == object_path(root, source.bucket, source.key):
            if directive != "REPLACE":
                raise invalid_request(
                    "This copy request is illegal because it is trying to copy an object "
                    "to itself without changing the object's metadata, storage class, "
                    "website redirect location or encryption attributes."
                )
            await _replace_meta(fs, reader, meta)
        else:
            staged = staging_path(root, uuid.uuid4().hex)
            await copy_content(fs, reader, staged, meta)
            try:
                replace = await put_conditions(s3, key, path)
                await move_into_place(fs, root, bucket, key, staged, path, replace)
            except BaseException:
                await unlink_quietly(fs, staged)
                raise
    inner = element("ETag", f'"{meta.etag}"') + element("LastModified", iso_time(meta.mtime_ns))
    if meta.checksum is not None:
        inner += element(f"Checksum{meta.checksum[0].upper()}", meta.checksum[1])
    return web.Response(body=result("CopyObjectResult", inner), content_type="application/xml")


def _copied_meta(
    s3: S3Request, reader: FileReader, source: ObjectMeta, directive: str
) -> ObjectMeta:
    """The attributes of the copy: the source's ETag, checksum and parts, and its
    headers and user metadata (COPY) or the request's (REPLACE)."""
    attr = reader.attr
    assert attr is not None
    current = source.current(attr)
    meta = ObjectMeta(etag=source.etag_of(attr).strip('"'))
    if current:
        meta.checksum, meta.checksum_type, meta.parts = (
            source.checksum, source.checksum_type, source.parts,
        )  # fmt: skip
    asked = s3.request.headers.get("x-amz-checksum-algorithm")
    if asked is not None and (meta.checksum is None or meta.checksum[0] != asked.lower()):
        raise not_implemented("a copy with a checksum algorithm other than its source's")
    if directive == "REPLACE":
        meta.headers, meta.user = stored_headers(s3.request), user_metadata(s3.request)
    elif current:
        meta.headers, meta.user = dict(source.headers), dict(source.user)
    return meta


async def _replace_meta(fs: Client, reader: FileReader, meta: ObjectMeta) -> None:
    """An object copied onto itself: new attributes and time, the same content."""
    attr = reader.attr
    assert attr is not None
    async with fs.transaction() as t:
        now = await t.getattr(attr.ino)
        if (now.size, now.mtime_ns) != (attr.size, attr.mtime_ns):
            raise S3Error("OperationAborted", 409, "The object changed during the copy.")
        meta.size, meta.mtime_ns = attr.size, time.time_ns()
        await t.setattr(attr.ino, mtime_ns=meta.mtime_ns)
        await t.setxattr(attr.ino, XATTR, meta.to_bytes())


def copy_range(header: str | None, size: int) -> tuple[int, int]:
    """The (first, end) of the source an UploadPartCopy takes: the whole object, or
    x-amz-copy-source-range "bytes=first-last" inside it."""
    if header is None:
        return 0, size
    match = _COPY_RANGE.fullmatch(header.strip())
    if match is None or int(match[1]) > int(match[2]):
        raise invalid_argument("x-amz-copy-source-range must be bytes=first-last")
    first, last = int(match[1]), int(match[2])
    if last >= size:
        raise S3Error(
            "InvalidRange", 416, "The requested range is not satisfiable",
            ActualObjectSize=str(size),
        )  # fmt: skip
    return first, last + 1


async def copy_part(s3: S3Request, staged: str) -> ObjectMeta:
    """UploadPartCopy's source side: the new part file `staged` (content in blocks)
    with the bytes the request names, committed with its ETag; its attributes."""
    reader, source_meta = await open_source(s3, copy_source(s3.request.headers))
    async with reader:
        attr = reader.attr
        assert attr is not None
        first, end = copy_range(s3.request.headers.get("x-amz-copy-source-range"), attr.size)
        etag = source_meta.etag_of(attr).strip('"')
        if (first, end) != (0, attr.size) or "-" in etag:
            stamp = f"{etag}:{first}-{end}".encode()
            etag = hashlib.md5(stamp, usedforsecurity=False).hexdigest()
        meta = ObjectMeta(etag=etag)
        await copy_content(
            s3.gateway.fs, reader, staged, meta, first=first, length=end - first, inline=False
        )
    return meta


def copy_part_reply(meta: ObjectMeta) -> web.Response:
    """UploadPartCopy's answer."""
    inner = element("ETag", f'"{meta.etag}"') + element("LastModified", iso_time(meta.mtime_ns))
    return web.Response(body=result("CopyPartResult", inner), content_type="application/xml")
