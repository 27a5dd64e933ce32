"""Object writes: PutObject (and an empty directory's object), what it keeps of the
request (standard headers, user metadata) and how a new file takes the key's place.

A PUT streams the body to every replica through the library's file writer, checking
it as it goes (payload_checks.py), and commits the content with its S3 attributes
(object_meta.py) only once every check passed: a failed or interrupted upload leaves
the previous object, or none, never a part. The file is written in the staging
directory and renamed over the key (making the key's directories first if needed),
so the last upload to finish wins and a reader sees the old object or the new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from plasmafs.client import Client
from plasmafs.client.file_writer import FileWriter
from plasmafs.client.transaction import answers
from plasmafs.core import errors as pfs
from plasmafs.core.attributes import FileKind
from plasmafs.gateway.aws_chunked import STREAMING, ChunkedBody
from plasmafs.gateway.conditions import check_conditions
from plasmafs.gateway.object_keys import bucket_path, key_parts, object_path, staging_path
from plasmafs.gateway.object_meta import (
    EMPTY_MD5,
    MAX_USER_METADATA,
    STORED_HEADERS,
    XATTR,
    ObjectMeta,
    read_meta,
)
from plasmafs.gateway.payload_checks import PayloadChecks
from plasmafs.gateway.s3_errors import S3Error, invalid_request, no_such_key
from plasmafs.gateway.sigv4 import UNSIGNED

if TYPE_CHECKING:
    from plasmafs.gateway.requests import S3Request

READ_PIECE = 1024 * 1024
NO_COMMIT_STEPS = 1 << 62  # one commit, at the end
PARENT_ATTEMPTS = 3


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
    declared, checks = _payload_checks(s3, None)
    if declared is not None and declared <= (await fs.connection()).inline_limit:
        await _put_small(s3, bucket, key, path, meta, declared, checks)
        return web.Response(status=200, headers=written_headers(meta))
    staged = staging_path(s3.gateway.root, uuid.uuid4().hex)
    await receive(s3, staged, meta, checks=(declared, checks))
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
    checks: tuple[int | None, PayloadChecks] | None = None,
) -> None:
    """Write the request's body to the new file `staged`, checking it as it streams,
    and commit it with `meta` completed (ETag, size, time, checksum) as its S3
    attributes once every check passed; nothing is committed otherwise. `inline`
    False: a small body goes to blocks too (a part to be concatenated); `algorithm`:
    the checksum computed if the request sends none (see PayloadChecks); `checks`:
    the declared length and the checks, if the caller made them already."""
    declared, checking = checks or _payload_checks(s3, algorithm)
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
            digesting = loop.run_in_executor(None, checking.update, piece)
            try:
                await writer.write(piece)
            finally:
                await digesting
        _complete(meta, checking, declared, body)
        await writer.setattr(mtime_ns=meta.mtime_ns)
        await writer.close(xattrs={XATTR: meta.to_bytes()})
    except BaseException:
        await writer.abort()
        raise


def _payload_checks(s3: S3Request, algorithm: str | None) -> tuple[int | None, PayloadChecks]:
    """The body's declared length (None: not known before its end) and the checks it
    must pass."""
    payload_hash = s3.signature.payload_hash
    declared = _declared_length(s3.request, payload_hash)
    return declared, PayloadChecks(s3.request.headers, _payload_sha256(payload_hash), algorithm)


def _complete(
    meta: ObjectMeta,
    checks: PayloadChecks,
    declared: int | None,
    body: ChunkedBody | AsyncIterator[bytes],
) -> None:
    """Fill in `meta` once the whole body passed its checks: ETag, checksum, size and
    the time the content is committed with."""
    if declared is not None and checks.size != declared:
        raise S3Error("IncompleteBody", 400, "You did not provide the number of bytes specified")
    trailers = body.trailers if isinstance(body, ChunkedBody) else None
    meta.checksum = checks.finish(trailers)
    meta.etag = checks.md5.hexdigest()
    meta.size, meta.mtime_ns = checks.size, time.time_ns()


async def _put_small(
    s3: S3Request,
    bucket: str,
    key: str,
    path: str,
    meta: ObjectMeta,
    declared: int,
    checks: PayloadChecks,
) -> None:
    """A body no larger than the namenode keeps inline: read whole and checked first,
    then created, filled, given its attributes and renamed over the key in one
    transaction, sent at once: one round trip and one commit."""
    body = _body(s3)
    data = bytearray()
    async for piece in body:
        checks.update(piece)
        data += piece
        if len(data) > declared:
            break  # the declared length is wrong: IncompleteBody below
    _complete(meta, checks, declared, body)
    replace = await put_conditions(s3, key, path)
    fs = s3.gateway.fs

    async def create_in_place() -> None:
        t, ino = await fs.begin_with_inode()
        staged = staging_path(s3.gateway.root, uuid.uuid4().hex)
        try:
            sent = [
                t.create(staged, ino=ino),
                *([t.write_inline(ino, bytes(data))] if data else []),
                t.setattr(ino, mtime_ns=meta.mtime_ns),
                t.setxattr(ino, XATTR, meta.to_bytes()),
                t.rename(staged, path, replace=replace),
            ]
        except BaseException:  # refused before it left (a limit): nothing stays open
            await t.abort()
            raise
        await answers(*sent, t.commit(unless_failed=True))

    await into_place(fs, s3.gateway.root, bucket, key, create_in_place)


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
    await into_place(fs, root, bucket, key, lambda: fs.rename(staged, path, replace=replace))


async def into_place(
    fs: Client, root: str, bucket: str, key: str, place: Callable[[], Awaitable[None]]
) -> None:
    """Run `place`, which puts a file at the key's path, making the key's directories
    first if it finds none; its failures as S3's errors."""
    parts = key_parts(key)
    for attempt in range(PARENT_ATTEMPTS):
        try:
            await place()
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
