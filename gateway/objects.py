"""Object reads and removals: GetObject, HeadObject, DeleteObject, DeleteObjects
(writes are puts.py's, copies copies.py's).

A GET streams from the datanodes with the library's reader, one piece at a time, so
memory stays bounded whatever the size; a DELETE removes the directories it leaves
empty, as a prefix disappears in S3.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from aiohttp import web

from plasmafs.client.file_reader import FileReader
from plasmafs.core import errors as pfs
from plasmafs.core.attributes import Attr
from plasmafs.gateway.conditions import NotModified, byte_range, check_conditions
from plasmafs.gateway.object_keys import bucket_path, key_parts, object_path
from plasmafs.gateway.object_meta import EMPTY_MD5, ObjectMeta, read_meta
from plasmafs.gateway.s3_errors import (
    S3Error,
    from_plasma,
    invalid_argument,
    invalid_request,
    no_such_key,
)
from plasmafs.gateway.xml_replies import element, http_time, result

if TYPE_CHECKING:
    from plasmafs.gateway.requests import S3Request

MAX_DELETE_BODY = 2 * 1024 * 1024
MAX_DELETE_KEYS = 1000
MAX_PART_NUMBER = 10_000
_RESPONSE_OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}


def _headers(attr: Attr, meta: ObjectMeta, s3: S3Request) -> dict[str, str]:
    headers = {
        "ETag": meta.etag_of(attr),
        "Last-Modified": http_time(attr.mtime_ns),
        "Accept-Ranges": "bytes",
        "Content-Type": "binary/octet-stream",
    }
    if meta.current(attr):
        headers.update(meta.headers)
        headers.update({f"x-amz-meta-{k}": v for k, v in meta.user.items()})
    query = s3.request.query
    for parameter, header in _RESPONSE_OVERRIDES.items():
        if parameter in query:
            headers[header] = query[parameter]
    return headers


async def get_object(s3: S3Request, bucket: str, key: str, *, head: bool) -> web.StreamResponse:
    """GetObject and HeadObject (with Range and conditions)."""
    fs = s3.gateway.fs
    path = object_path(s3.gateway.root, bucket, key)
    if key.endswith("/"):
        return await _get_directory(s3, bucket, key, path)
    try:
        reader = await fs.open(path, "rb")
    except pfs.NotFoundError:
        await s3.bucket_exists(bucket)
        raise no_such_key(key) from None
    except (pfs.IsDirectoryError, pfs.NotDirectoryError, pfs.InvalidArgumentError):
        raise no_such_key(key) from None
    assert isinstance(reader, FileReader) and reader.attr is not None
    async with reader:
        attr = reader.attr
        meta = await read_meta(fs, attr)
        headers = _headers(attr, meta, s3)
        try:
            check_conditions(s3.request.headers, headers["ETag"], attr.mtime_ns, read=True)
        except NotModified:
            return web.Response(
                status=304, headers={k: headers[k] for k in ("ETag", "Last-Modified")}
            )
        wanted = _wanted(s3, attr, meta, headers)
        first, end = wanted if wanted is not None else (0, attr.size)
        status = 206 if wanted is not None else 200
        if wanted is not None:
            headers["Content-Range"] = f"bytes {first}-{end - 1}/{attr.size}"
        elif meta.checksum and meta.current(attr) and _checksum_mode(s3):
            headers[f"x-amz-checksum-{meta.checksum[0]}"] = meta.checksum[1]
            headers["x-amz-checksum-type"] = meta.checksum_type or "FULL_OBJECT"
        response = web.StreamResponse(status=status, headers=headers)
        response.content_length = end - first
        await response.prepare(s3.request)
        if head:
            await response.write_eof()
            return response
        async for piece in reader.stream(first, end - first):
            await response.write(bytes(piece) if isinstance(piece, memoryview) else piece)
        await response.write_eof()
        return response


def _wanted(
    s3: S3Request, attr: Attr, meta: ObjectMeta, headers: dict[str, str]
) -> tuple[int, int] | None:
    """The bytes a GET asks for: a Range, or one part of a multipart object (with its
    number of parts in `headers`); None: the whole object."""
    asked = s3.request.query.get("partNumber")
    if asked is None:
        return byte_range(s3.request.headers.get("Range"), attr.size)
    if "Range" in s3.request.headers:
        raise invalid_request("Cannot specify both Range header and partNumber query parameter")
    number = part_number(asked)
    if meta.parts and meta.current(attr):
        headers["x-amz-mp-parts-count"] = str(meta.parts_count)
        wanted = meta.part_range(number)
    else:  # one part: the whole object
        wanted = (0, attr.size) if number == 1 else None
    if wanted is None:
        raise S3Error(
            "InvalidPart", 400, "The requested partnumber is not satisfiable",
            PartNumber=str(number),
        )  # fmt: skip
    return None if wanted == (0, attr.size) and not meta.parts else wanted


def part_number(text: str | None) -> int:
    """A partNumber parameter: 1 to 10,000."""
    try:
        number = int(text or "")
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_PART_NUMBER:
        raise invalid_argument(f"Part number must be an integer between 1 and {MAX_PART_NUMBER}")
    return number


def _checksum_mode(s3: S3Request) -> bool:
    return s3.request.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED"


async def _get_directory(s3: S3Request, bucket: str, key: str, path: str) -> web.StreamResponse:
    """A key ending with "/" is an empty directory's object (a non-empty directory is
    no object: its keys are)."""
    fs = s3.gateway.fs
    try:
        attr = await fs.stat(path)
        empty = attr.is_dir and not (await fs.readdir(path, limit=1))[0]
    except (pfs.NotFoundError, pfs.NotDirectoryError):
        await s3.bucket_exists(bucket)
        raise no_such_key(key) from None
    if not empty:
        raise no_such_key(key)
    headers = {
        "ETag": f'"{EMPTY_MD5}"',
        "Last-Modified": http_time(attr.mtime_ns),
        "Content-Type": "application/x-directory",
    }
    check_conditions(s3.request.headers, headers["ETag"], attr.mtime_ns, read=True)
    response = web.StreamResponse(status=200, headers=headers)
    response.content_length = 0
    await response.prepare(s3.request)
    await response.write_eof()
    return response


async def delete_object(s3: S3Request, bucket: str, key: str) -> web.Response:
    """DeleteObject: a missing key is no error (as S3)."""
    await s3.bucket_exists(bucket)
    await _delete(s3, bucket, key)
    return web.Response(status=204)


async def _delete(s3: S3Request, bucket: str, key: str) -> None:
    """Remove the object `key` and then the directories it leaves empty up to the
    bucket (S3 has no directories: an emptied prefix is gone)."""
    fs = s3.gateway.fs
    parts = key_parts(key)
    top = bucket_path(s3.gateway.root, bucket)
    path = "/".join([top, *parts])
    try:
        if key.endswith("/"):
            await fs.rmdir(path)
        else:
            await fs.unlink(path)
    except (pfs.NotFoundError, pfs.NotDirectoryError, pfs.IsDirectoryError, pfs.NotEmptyError):
        return
    for depth in range(len(parts) - 1, 0, -1):
        try:
            await fs.rmdir("/".join([top, *parts[:depth]]))
        except pfs.PlasmaError:
            return


async def delete_objects(s3: S3Request, bucket: str) -> web.Response:
    """DeleteObjects: up to 1,000 keys, each answered Deleted or with its Error."""
    await s3.bucket_exists(bucket)
    body = await s3.read_body(MAX_DELETE_BODY)
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        raise S3Error("MalformedXML", 400, "The XML you provided was not well-formed") from None
    namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    quiet = (root.findtext(f"{namespace}Quiet") or "").strip().lower() == "true"
    objects = root.findall(f"{namespace}Object")
    keys = [o.findtext(f"{namespace}Key") for o in objects]
    versions = [o.findtext(f"{namespace}VersionId") for o in objects]
    if not keys or len(keys) > MAX_DELETE_KEYS or any(k is None for k in keys):
        raise S3Error("MalformedXML", 400, "Give 1 to 1000 Object elements, each with a Key")
    out = []
    for key, version in zip(keys, versions, strict=True):
        assert key is not None
        try:
            if version not in (None, "null"):
                raise S3Error("NoSuchVersion", 404, "The specified version does not exist.")
            await _delete(s3, bucket, key)
        except (S3Error, pfs.PlasmaError) as exc:
            error = exc if isinstance(exc, S3Error) else from_plasma(exc, bucket=bucket, key=key)
            fields = element("Key", key) + element("Code", error.code)
            out.append(f"<Error>{fields}{element('Message', error.message)}</Error>")
            continue
        if not quiet:
            out.append(f"<Deleted>{element('Key', key)}</Deleted>")
    return web.Response(body=result("DeleteResult", "".join(out)), content_type="application/xml")
