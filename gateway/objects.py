"""Object operations: PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects.

A PUT streams the body to every replica through the library's file writer, checking
it as it goes (payload_checks.py), and commits the content with its S3 attributes
(object_meta.py) only once every check passed: a failed or interrupted upload leaves
the previous object, or none, never a part. A GET streams from the datanodes with
the library's reader, one piece at a time, so memory stays bounded whatever the size.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from aiohttp import web

from plasmafs.client import Client
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.core import errors as pfs
from plasmafs.core.attributes import Attr, FileKind
from plasmafs.gateway.aws_chunked import STREAMING, ChunkedBody
from plasmafs.gateway.conditions import NotModified, byte_range, check_conditions
from plasmafs.gateway.object_keys import bucket_path, key_parts, object_path, staging_path
from plasmafs.gateway.object_meta import (
    MAX_USER_METADATA,
    STORED_HEADERS,
    XATTR,
    ObjectMeta,
    read_meta,
)
from plasmafs.gateway.payload_checks import PayloadChecks
from plasmafs.gateway.s3_errors import (
    S3Error,
    from_plasma,
    invalid_argument,
    invalid_request,
    no_such_key,
)
from plasmafs.gateway.sigv4 import UNSIGNED
from plasmafs.gateway.xml_replies import element, http_time, result

if TYPE_CHECKING:
    from plasmafs.gateway.requests import S3Request

READ_PIECE = 1024 * 1024
NO_COMMIT_STEPS = 1 << 62  # one commit, at the end
PARENT_ATTEMPTS = 3
MAX_DELETE_BODY = 2 * 1024 * 1024
MAX_DELETE_KEYS = 1000
MAX_PART_NUMBER = 10_000
EMPTY_MD5 = hashlib.md5(b"", usedforsecurity=False).hexdigest()
_RESPONSE_OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}


def path_conflict(key: str) -> S3Error:
    """409: a key needs a directory where an object is, or the reverse."""
    return S3Error(
        "PathConflict",
        409,
        "this key and another one need the same name as a file and as a directory "
        "(a key 'a' and a key 'a/b' cannot both exist)",
        Key=key,
    )


async def put_object(s3: S3Request, bucket: str, key: str) -> web.StreamResponse:
    """PutObject: the body goes to a new file in the staging directory, committed with
    its S3 attributes once every check passed, then renamed over the key (so the last
    upload to finish wins, and a reader sees the old object or the new one whole)."""
    fs, request = s3.gateway.fs, s3.request
    path = object_path(s3.gateway.root, bucket, key)
    await s3.bucket_exists(bucket)
    if key.endswith("/"):
        return await _put_directory(s3, bucket, key, path)
    meta = ObjectMeta(headers=stored_headers(request), user=user_metadata(request))
    staged = staging_path(s3.gateway.root, uuid.uuid4().hex)
    await receive(s3, staged, meta)
    try:
        replace = await put_conditions(s3, key, path)
        await move_into_place(fs, s3.gateway.root, bucket, key, staged, path, replace)
    except BaseException:
        await unlink_quietly(fs, staged)
        raise
    return web.Response(status=200, headers=written_headers(meta))


async def unlink_quietly(fs: Client, path: str) -> None:
    """Remove a staged file that will not be used (gone already, or the cluster out of
    reach: the gateway's sweep removes it later)."""
    with contextlib.suppress(pfs.PlasmaError):
        await fs.unlink(path)


def written_headers(meta: ObjectMeta) -> dict[str, str]:
    """The headers answering a PUT of content `meta` describes: its ETag, and the
    checksum it was sent with."""
    headers = {"ETag": f'"{meta.etag}"'}
    if meta.checksum is not None:
        headers[f"x-amz-checksum-{meta.checksum[0]}"] = meta.checksum[1]
    return headers


async def receive(
    s3: S3Request,
    staged: str,
    meta: ObjectMeta,
    *,
    inline: bool = True,
    algorithm: str | None = None,
) -> None:
    """Write the request's body to the new file `staged`, checking it as it streams,
    and commit it with `meta` completed (ETag, size, time, checksum) as its S3
    attributes once every check passed; nothing is committed otherwise. `inline`
    False: a small body goes to blocks too (a part to be concatenated); `algorithm`:
    the checksum computed if the request sends none (see PayloadChecks)."""
    request = s3.request
    declared = _declared_length(request, s3.signature.payload_hash)
    payload_sha256 = _payload_sha256(s3.signature.payload_hash)
    checks = PayloadChecks(request.headers, payload_sha256, algorithm)
    writer = await s3.gateway.fs.open(
        staged, "wb", size_hint=declared, commit_every=NO_COMMIT_STEPS, inline=inline
    )
    assert isinstance(writer, FileWriter)
    try:
        body = _body(s3)
        loop = asyncio.get_running_loop()
        async for piece in body:
            # The digests (MD5 above all) run on another core while the piece streams
            # to the replicas: hashlib and zlib let go of the GIL for large buffers.
            digesting = loop.run_in_executor(None, checks.update, piece)
            try:
                await writer.write(piece)
            finally:
                await digesting
        if declared is not None and checks.size != declared:
            raise S3Error(
                "IncompleteBody", 400, "You did not provide the number of bytes specified"
            )
        trailers = body.trailers if isinstance(body, ChunkedBody) else None
        meta.checksum = checks.finish(trailers)
        meta.etag = checks.md5.hexdigest()
        meta.size, meta.mtime_ns = checks.size, time.time_ns()
        await writer.setattr(mtime_ns=meta.mtime_ns)
        await writer.close(xattrs={XATTR: meta.to_bytes()})
    except BaseException:
        await writer.abort()
        raise


async def put_conditions(s3: S3Request, key: str, path: str) -> bool:
    """Check a PUT's If-Match and If-None-Match against the object there now (S3's
    conditional writes); False: the key must not exist when the new one goes in
    (If-None-Match: *, made atomic by the rename)."""
    headers = s3.request.headers
    if_match, if_none_match = headers.get("If-Match"), headers.get("If-None-Match")
    if if_match is None and if_none_match is None:
        return True
    etag = None
    try:
        attr = await s3.gateway.fs.stat(path)
        if attr.kind is FileKind.FILE:
            etag = (await read_meta(s3.gateway.fs, attr)).etag_of(attr)
    except (pfs.NotFoundError, pfs.NotDirectoryError):
        pass
    if etag is None:
        if if_match is not None:
            raise no_such_key(key)
    else:
        check_conditions(headers, etag, 0, read=False)
    return not (if_none_match is not None and if_none_match.strip() == "*")


async def move_into_place(
    fs: Client, root: str, bucket: str, key: str, staged: str, path: str, replace: bool
) -> None:
    """Rename the staged file to `path` (over an object there if `replace`), making
    its directories first if needed."""
    parts = key_parts(key)
    for attempt in range(PARENT_ATTEMPTS):
        try:
            await fs.rename(staged, path, replace=replace)
            return
        except pfs.ExistsError:
            raise S3Error(
                "PreconditionFailed", 412,
                "At least one of the pre-conditions you specified did not hold",
                Condition="If-None-Match",
            ) from None  # fmt: skip
        except (pfs.IsDirectoryError, pfs.NotDirectoryError, pfs.NotEmptyError):
            raise path_conflict(key) from None
        except pfs.NotFoundError:
            # No directory for it yet (or an emptied prefix was just removed): make it.
            if len(parts) == 1 or attempt + 1 == PARENT_ATTEMPTS:
                raise
        try:
            await fs.mkdir("/".join([bucket_path(root, bucket), *parts[:-1]]), parents=True)
        except (pfs.NotDirectoryError, pfs.ExistsError):
            raise path_conflict(key) from None


async def _put_directory(s3: S3Request, bucket: str, key: str, path: str) -> web.Response:
    body = s3.request.content
    if await body.read(1):
        raise invalid_request("an object whose key ends with '/' is a directory: it has no content")
    try:
        await s3.gateway.fs.mkdir(path, parents=True)
    except (pfs.NotDirectoryError, pfs.ExistsError):
        raise path_conflict(key) from None
    return web.Response(status=200, headers={"ETag": f'"{EMPTY_MD5}"'})


def _body(s3: S3Request) -> ChunkedBody | AsyncIterator[bytes]:
    if s3.signature.payload_hash in STREAMING:
        return ChunkedBody(s3.request.content, s3.signature, s3.signing_key)
    return s3.request.content.iter_chunked(READ_PIECE)


def _payload_sha256(payload_hash: str) -> str | None:
    if payload_hash == UNSIGNED or payload_hash.startswith("STREAMING-"):
        return None
    if len(payload_hash) != 64 or any(c not in "0123456789abcdef" for c in payload_hash):
        raise S3Error(
            "InvalidArgument", 400, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a "
            "STREAMING- mode or a SHA-256 in hex"
        )  # fmt: skip
    return payload_hash


def _declared_length(request: web.Request, payload_hash: str) -> int | None:
    if payload_hash in STREAMING:
        decoded = request.headers.get("x-amz-decoded-content-length")
        if decoded is None:
            return None
        try:
            return int(decoded)
        except ValueError:
            raise invalid_request("x-amz-decoded-content-length is not a number") from None
    if payload_hash.startswith("STREAMING-"):
        raise S3Error("NotImplemented", 501, f"{payload_hash} is not implemented")
    if request.content_length is None and "chunked" not in request.headers.get(
        "Transfer-Encoding", ""
    ):
        raise S3Error(
            "MissingContentLength", 411, "You must provide the Content-Length HTTP header."
        )
    return request.content_length


def stored_headers(request: web.Request) -> dict[str, str]:
    stored = {h: request.headers[h] for h in STORED_HEADERS if h in request.headers}
    # aws-chunked is how this request's body was sent, not what the object is.
    encodings = [e.strip() for e in stored.get("Content-Encoding", "").split(",") if e.strip()]
    kept = [e for e in encodings if e.lower() != "aws-chunked"]
    if kept:
        stored["Content-Encoding"] = ", ".join(kept)
    else:
        stored.pop("Content-Encoding", None)
    return stored


def _text(value: str) -> str:
    """A header value as sent: HTTP hands over its bytes as Latin-1, clients send
    UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def user_metadata(request: web.Request) -> dict[str, str]:
    found = {
        name.lower().removeprefix("x-amz-meta-"): _text(value)
        for name, value in request.headers.items()
        if name.lower().startswith("x-amz-meta-")
    }
    if sum(len(k) + len(v) for k, v in found.items()) > MAX_USER_METADATA:
        raise S3Error(
            "MetadataTooLarge",
            400,
            "Your metadata headers exceed the maximum allowed metadata size.",
        )
    return found


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
