"""Multipart uploads: CreateMultipartUpload, UploadPart, ListParts,
CompleteMultipartUpload, AbortMultipartUpload and ListMultipartUploads.

An upload is a directory in the staging directory, `mpu.<upload id>` (mode 0700: its
initiator's), whose attribute `user.s3.upload` keeps the bucket, the key and what the
object will carry (headers, user metadata). Each part is a file in it named by its
number, received as a PUT's body is (checked as it streams, its MD5 its ETag, its
content in blocks even when small) and renamed over that number once complete, so a
part sent again replaces the earlier one whole.

Completing concatenates the parts named (namenode's concat): their blocks become the
first part's, so no byte is read or written again, and the object's attributes are
committed in the same transaction; the file is then renamed over the key as a PUT's
is. Only parts that end on a block boundary can be concatenated (all but the last):
an upload whose parts do not (S3 allows any size from 5 MiB) is copied once, through
the gateway, into a new file instead. A completed upload's directory is renamed
`done.<upload id>`, its attribute noting what it completed with, so that the same
request sent again gets the same answer (as S3 gives), until the gateway's sweep
removes it a day later.

An upload may name a checksum algorithm: every part then has that checksum (checked
when sent, computed when not) and the object the COMPOSITE or FULL_OBJECT checksum of
them (multipart_checksums.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import secrets
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiohttp import web

from plasmafs.client import Client
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.client.removing import remove_tree
from plasmafs.client.transaction import answers
from plasmafs.core import errors as pfs
from plasmafs.core.attributes import Attr
from plasmafs.gateway import copies
from plasmafs.gateway import multipart_checksums as checksums
from plasmafs.gateway.buckets import bounded_count, url_encoding
from plasmafs.gateway.listing import common_prefix
from plasmafs.gateway.object_keys import key_parts, object_path, staging_path
from plasmafs.gateway.object_meta import XATTR, ObjectMeta, part_runs, read_meta
from plasmafs.gateway.objects import part_number
from plasmafs.gateway.payload_checks import ALGORITHMS
from plasmafs.gateway.puts import (
    NO_COMMIT_STEPS,
    into_place,
    move_into_place,
    put_conditions,
    receive,
    stored_headers,
    unlink_quietly,
    user_metadata,
    written_headers,
)
from plasmafs.gateway.s3_errors import S3Error, invalid_argument, invalid_request, not_implemented
from plasmafs.gateway.xml_replies import element, encoded, iso_time, owner, result

if TYPE_CHECKING:
    from plasmafs.gateway.requests import S3Request

UPLOAD_XATTR = b"user.s3.upload"
UPLOAD_PREFIX = "mpu."
DONE_PREFIX = "done."
MAX_COMPLETE_BODY = 4 * 1024 * 1024  # 10,000 parts with their checksums fit
MAX_LISTED = 1000
META_READS = 64  # part or upload attributes read at once
_UPLOAD_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
_PART_NAME = re.compile(r"[0-9]{5}")


@dataclass(slots=True)
class Upload:
    """One multipart upload, as its directory's attribute keeps it."""

    upload_id: str
    bucket: str
    key: str
    initiator: str
    initiated_ns: int
    headers: dict[str, str] = field(default_factory=dict)
    user: dict[str, str] = field(default_factory=dict)
    checksum: tuple[str, str] | None = None  # (algorithm, type)
    # Once completed: the parts' digest (_parts_digest) and the reply's fields.
    completed: dict[str, str] | None = None

    def to_bytes(self) -> bytes:
        """The attribute's value."""
        blob: dict[str, object] = {
            "bucket": self.bucket, "key": self.key, "initiator": self.initiator,
            "initiated": self.initiated_ns, "headers": self.headers, "user": self.user,
        }  # fmt: skip
        if self.checksum is not None:
            blob["checksum"] = list(self.checksum)
        if self.completed is not None:
            blob["completed"] = self.completed
        return json.dumps(blob, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, upload_id: str, raw: bytes) -> Upload | None:
        """The upload an attribute value describes (None: not one)."""
        try:
            blob = json.loads(raw)
            checksum, completed = blob.get("checksum"), blob.get("completed")
            return cls(
                upload_id,
                str(blob["bucket"]),
                str(blob["key"]),
                str(blob.get("initiator", "")),
                int(blob["initiated"]),
                {str(k): str(v) for k, v in dict(blob.get("headers", {})).items()},
                {str(k): str(v) for k, v in dict(blob.get("user", {})).items()},
                (str(checksum[0]), str(checksum[1])) if checksum else None,
                {str(k): str(v) for k, v in dict(completed).items()} if completed else None,
            )
        except (ValueError, TypeError, KeyError, AttributeError, IndexError):
            return None


@dataclass(slots=True)
class Part:
    """A received part: its number, file attributes and S3 attributes."""

    number: int
    attr: Attr
    meta: ObjectMeta


def upload_directory(root: str, upload_id: str, *, done: bool = False) -> str:
    """The staging directory of upload `upload_id` (`done`: once completed)."""
    return staging_path(root, (DONE_PREFIX if done else UPLOAD_PREFIX) + upload_id)


def part_path(directory: str, number: int) -> str:
    """The file of part `number` in an upload's directory (the name _PART_NAME reads)."""
    return f"{directory}/{number:05d}"


def no_such_upload(upload_id: str) -> S3Error:
    """404 NoSuchUpload."""
    return S3Error(
        "NoSuchUpload", 404,
        "The specified upload does not exist. The upload ID may be invalid, or the upload "
        "may have been aborted or completed.",
        UploadId=upload_id,
    )  # fmt: skip


async def create_upload(s3: S3Request, bucket: str, key: str) -> web.Response:
    """CreateMultipartUpload: the upload's directory and attribute, in one commit."""
    if key.endswith("/"):
        raise invalid_request("an object whose key ends with '/' is a directory: no upload")
    key_parts(key)
    await s3.bucket_exists(bucket)
    request = s3.request
    upload = Upload(
        secrets.token_urlsafe(24), bucket, key, s3.user.user, time.time_ns(),
        stored_headers(request), user_metadata(request), checksums.requested(request.headers),
    )  # fmt: skip
    directory = upload_directory(s3.gateway.root, upload.upload_id)
    async with s3.gateway.fs.transaction() as t:
        await t.mkdir(directory, 0o700)
        await t.setxattr(directory, UPLOAD_XATTR, upload.to_bytes())
    inner = element("Bucket", bucket) + element("Key", key) + element("UploadId", upload.upload_id)
    headers = {}
    if upload.checksum is not None:
        headers["x-amz-checksum-algorithm"] = upload.checksum[0].upper()
        headers["x-amz-checksum-type"] = upload.checksum[1]
    return _xml(result("InitiateMultipartUploadResult", inner), headers)


async def upload_part(s3: S3Request, bucket: str, key: str) -> web.Response:
    """UploadPart: the body becomes part N of the upload, replacing an earlier one;
    UploadPartCopy: so does a range of another object, copied by the datanodes."""
    copying = copies.COPY_SOURCE in s3.request.headers
    number = part_number(s3.request.query.get("partNumber"))
    upload = await _open(s3, bucket, key)
    directory = upload_directory(s3.gateway.root, upload.upload_id)
    staged = f"{part_path(directory, number)}.{uuid.uuid4().hex}"
    meta = ObjectMeta()
    fs = s3.gateway.fs
    if copying and upload.checksum is not None:
        raise not_implemented("UploadPartCopy into an upload with a checksum algorithm")
    try:
        if copying:
            meta = await copies.copy_part(s3, staged)
        else:
            algorithm = upload.checksum[0] if upload.checksum else None
            await receive(s3, staged, meta, inline=False, algorithm=algorithm)
        await fs.rename(staged, part_path(directory, number))
    except pfs.NotFoundError:
        raise no_such_upload(upload.upload_id) from None  # aborted or completed meanwhile
    except BaseException:
        await unlink_quietly(fs, staged)
        raise
    if copying:
        return copies.copy_part_reply(meta)
    return web.Response(status=200, headers=written_headers(meta))


async def list_parts(s3: S3Request, bucket: str, key: str) -> web.Response:
    """ListParts, from part-number-marker on, max-parts at a time."""
    upload = await _open(s3, bucket, key)
    query = s3.request.query
    limit = bounded_count(query, "max-parts", MAX_LISTED)
    try:
        marker = int(query.get("part-number-marker", "0"))
    except ValueError:
        raise invalid_argument("part-number-marker is not a number") from None
    parts = [p for p in await _parts(s3.gateway.fs, s3.gateway.root, upload) if p.number > marker]
    shown, truncated = parts[:limit], len(parts) > limit
    items = "".join(
        f"<Part>{element('PartNumber', p.number)}"
        f"{element('LastModified', iso_time(p.attr.mtime_ns))}"
        f"{element('ETag', p.meta.etag_of(p.attr))}{element('Size', p.attr.size)}"
        f"{_checksum_element(p.meta.checksum)}</Part>"
        for p in shown
    )
    inner = (
        element("Bucket", bucket) + element("Key", key) + element("UploadId", upload.upload_id)
        + owner(upload.initiator, "Initiator") + owner(upload.initiator)
        + element("StorageClass", "STANDARD")
        + element("PartNumberMarker", marker)
        + element("NextPartNumberMarker", shown[-1].number if shown else marker)
        + element("MaxParts", limit) + element("IsTruncated", truncated) + items
    )  # fmt: skip
    return _xml(result("ListPartsResult", inner))


async def abort_upload(s3: S3Request, bucket: str, key: str) -> web.Response:
    """AbortMultipartUpload: the upload and its parts are removed."""
    upload = await _open(s3, bucket, key)
    await remove_tree(s3.gateway.fs, upload_directory(s3.gateway.root, upload.upload_id))
    return web.Response(status=204)


async def complete_upload(s3: S3Request, bucket: str, key: str) -> web.Response:
    """CompleteMultipartUpload: the parts named, in order, become the object."""
    upload_id = s3.request.query.get("uploadId", "")
    asked = _asked_parts(await s3.read_body(MAX_COMPLETE_BODY, checksum_headers=False))
    try:
        upload = await _open(s3, bucket, key)
    except S3Error as exc:
        if exc.code != "NoSuchUpload":
            raise
        return await _completed_before(s3, bucket, key, upload_id, asked)
    fs, root = s3.gateway.fs, s3.gateway.root
    chosen = _chosen(asked, await _parts(fs, root, upload), upload, s3.gateway.min_part_size)
    digests = b"".join(bytes.fromhex(p.meta.etag) for p in chosen)
    meta = ObjectMeta(
        etag=f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(chosen)}",
        headers=upload.headers,
        user=upload.user,
        parts=part_runs([p.attr.size for p in chosen]),
    )
    if upload.checksum is not None:
        meta.checksum, meta.checksum_type = _object_checksum(s3, upload.checksum, chosen)
    path = object_path(root, bucket, key)
    replace = await put_conditions(s3, key, path)
    directory = upload_directory(root, upload.upload_id)
    try:
        await _assemble(fs, (root, bucket, key), directory, chosen, meta, replace)
    except pfs.NotFoundError:
        raise no_such_upload(upload.upload_id) from None  # completed or aborted meanwhile
    reply = _completion_reply(s3, bucket, key, meta)
    upload.completed = {"parts": _parts_digest(asked), "reply": reply.decode()}
    with contextlib.suppress(pfs.PlasmaError):  # a retry then finds NoSuchUpload
        await _retire(fs, root, upload, directory)
    return _xml(reply)


async def _completed_before(
    s3: S3Request, bucket: str, key: str, upload_id: str, asked: list[_Asked]
) -> web.Response:
    """The answer to a completion sent again: the first one's, if it named the same
    parts; NoSuchUpload otherwise."""
    try:
        raw = await s3.gateway.fs.getxattr(
            upload_directory(s3.gateway.root, upload_id, done=True), UPLOAD_XATTR
        )
    except pfs.PlasmaError:
        raise no_such_upload(upload_id) from None
    upload = Upload.from_bytes(upload_id, raw)
    if (
        upload is None
        or upload.completed is None
        or (upload.bucket, upload.key) != (bucket, key)
        or upload.completed.get("parts") != _parts_digest(asked)
    ):
        raise no_such_upload(upload_id)
    return _xml(upload.completed["reply"].encode())


def _chosen(
    asked: list[_Asked], received: list[Part], upload: Upload, min_part_size: int
) -> list[Part]:
    """The received parts a completion names, each checked against what it says."""
    by_number = {p.number: p for p in received}
    chosen = []
    for wanted in asked:
        part = by_number.get(wanted.number)
        checksum = part.meta.checksum if part is not None else None
        if (
            part is None
            or not part.meta.etag
            or part.meta.etag != wanted.etag.strip().strip('"')
            or (wanted.checksum is not None and (checksum is None or wanted.checksum != checksum))
        ):
            raise S3Error(
                "InvalidPart", 400,
                "One or more of the specified parts could not be found. The part may not have "
                "been uploaded, or the specified entity tag may not have matched the part's "
                "entity tag.",
                PartNumber=str(wanted.number), ETag=wanted.etag,
            )  # fmt: skip
        if upload.checksum is not None and checksum is None:
            raise S3Error(
                "InvalidPart", 400, f"part {part.number} has no {upload.checksum[0].upper()}",
                PartNumber=str(part.number),
            )  # fmt: skip
        chosen.append(part)
    for part in chosen[:-1]:
        if part.attr.size < min_part_size:
            raise S3Error(
                "EntityTooSmall", 400,
                "Your proposed upload is smaller than the minimum allowed object size.",
                PartNumber=str(part.number), ProposedSize=str(part.attr.size),
                MinSizeAllowed=str(min_part_size),
            )  # fmt: skip
    return chosen


def _object_checksum(
    s3: S3Request, checksum: tuple[str, str], parts: list[Part]
) -> tuple[tuple[str, str], str]:
    """The object's checksum, ((algorithm, value), type), compared with the one the
    completion sends if it sends one (BadDigest if they differ)."""
    algorithm, kind = checksum
    values = []
    for p in parts:
        assert p.meta.checksum is not None  # _chosen made sure
        values.append((p.meta.checksum[1], p.attr.size))
    value = checksums.combined(algorithm, kind, values)
    sent = s3.request.headers.get(f"x-amz-checksum-{algorithm}")
    if sent is not None and sent.strip() != value:
        raise S3Error(
            "BadDigest", 400,
            f"The {algorithm.upper()} you specified did not match the calculated checksum.",
        )  # fmt: skip
    return (algorithm, value), kind


def _completion_reply(s3: S3Request, bucket: str, key: str, meta: ObjectMeta) -> bytes:
    location = f"{s3.request.scheme}://{s3.request.host}/{bucket}/{key}"
    inner = (
        element("Location", location) + element("Bucket", bucket) + element("Key", key)
        + element("ETag", f'"{meta.etag}"') + _checksum_element(meta.checksum)
        + (element("ChecksumType", meta.checksum_type) if meta.checksum_type else "")
    )  # fmt: skip
    return result("CompleteMultipartUploadResult", inner)


def _checksum_element(checksum: tuple[str, str] | None) -> str:
    if checksum is None:
        return ""
    return element(f"Checksum{checksum[0].upper()}", checksum[1])


async def _retire(fs: Client, root: str, upload: Upload, directory: str) -> None:
    """Note the completion in the upload's attribute, remove the parts not named, and
    rename the directory out of the uploads in progress."""
    await fs.setxattr(directory, UPLOAD_XATTR, upload.to_bytes())
    async for entry in fs.scandir(directory):
        with contextlib.suppress(pfs.NotFoundError):
            await fs.unlink(f"{directory}/{entry.name}")
    await fs.rename(directory, upload_directory(root, upload.upload_id, done=True))


async def _assemble(
    fs: Client,
    where: tuple[str, str, str],
    directory: str,
    parts: list[Part],
    meta: ObjectMeta,
    replace: bool,
) -> None:
    """The object made of `parts`, with `meta` as its S3 attributes, put at the key
    (`where`: root, bucket, key): the first part with the others' blocks appended, its
    attributes set and renamed over the key in one transaction, so that a completion
    that fails (a condition, a conflicting key) leaves the upload whole for another
    try. Parts not ending on block boundaries are copied into a new file instead."""
    root, bucket, key = where
    path = object_path(root, bucket, key)
    first = part_path(directory, parts[0].number)
    blocksize = parts[0].attr.blocksize
    meta.size = sum(p.attr.size for p in parts)
    meta.mtime_ns = time.time_ns()
    if any(p.attr.size % blocksize for p in parts[:-1]):
        staged = await _copy(fs, root, directory, parts, meta)
        try:
            await move_into_place(fs, root, bucket, key, staged, path, replace)
        except BaseException:
            await unlink_quietly(fs, staged)
            raise
        return

    async def concatenate_in_place() -> None:
        t = await fs.begin()
        rest = [part_path(directory, p.number) for p in parts[1:]]
        try:
            sent = [
                *([t.concat(first, rest)] if rest else []),
                t.setattr(first, mtime_ns=meta.mtime_ns),
                t.setxattr(first, XATTR, meta.to_bytes()),
                t.rename(first, path, replace=replace),
            ]
        except BaseException:  # refused before it left: nothing stays open
            await t.abort()
            raise
        await answers(*sent, t.commit(unless_failed=True))

    await into_place(fs, root, bucket, key, concatenate_in_place)


async def _copy(fs: Client, root: str, directory: str, parts: list[Part], meta: ObjectMeta) -> str:
    """A new staging file holding the parts' bytes in order, committed with `meta`."""
    staged = staging_path(root, uuid.uuid4().hex)
    writer = await fs.open(staged, "wb", size_hint=meta.size, commit_every=NO_COMMIT_STEPS)
    assert isinstance(writer, FileWriter)
    try:
        for part in parts:
            reader = await fs.open(part_path(directory, part.number), "rb")
            assert isinstance(reader, FileReader)
            async with reader:
                async for piece in reader.stream(0, part.attr.size):
                    await writer.write(piece)
        await writer.setattr(mtime_ns=meta.mtime_ns)
        await writer.close(xattrs={XATTR: meta.to_bytes()})
    except BaseException:
        await writer.abort()
        raise
    return staged


async def list_uploads(s3: S3Request, bucket: str) -> web.Response:
    """ListMultipartUploads of `bucket`: the caller's own (another user's upload
    directory is theirs alone), in key order then initiation order."""
    await s3.bucket_exists(bucket)
    query = s3.request.query
    limit = bounded_count(query, "max-uploads", MAX_LISTED)
    url = url_encoding(query)
    prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
    key_marker, id_marker = query.get("key-marker", ""), query.get("upload-id-marker", "")
    uploads = [u for u in await _uploads(s3) if u.bucket == bucket and u.key.startswith(prefix)]
    uploads.sort(key=lambda u: (u.key, u.initiated_ns, u.upload_id))
    if key_marker:
        uploads = uploads[_after_marker(uploads, key_marker, id_marker) :]
    items: list[str] = []
    prefixes: set[str] = set()
    next_key, next_id, truncated = "", "", False
    for upload in uploads:
        common = common_prefix(upload.key, prefix, delimiter)
        if common in prefixes:
            continue
        if len(items) == limit:
            truncated = True
            break
        if common:
            prefixes.add(common)
            items.append(
                f"<CommonPrefixes>{element('Prefix', encoded(common, url))}</CommonPrefixes>"
            )
            next_key, next_id = common, ""
            continue
        items.append(
            f"<Upload>{element('Key', encoded(upload.key, url))}"
            f"{element('UploadId', upload.upload_id)}{owner(upload.initiator, 'Initiator')}"
            f"{owner(upload.initiator)}{element('StorageClass', 'STANDARD')}"
            f"{element('Initiated', iso_time(upload.initiated_ns))}</Upload>"
        )
        next_key, next_id = upload.key, upload.upload_id
    inner = (
        element("Bucket", bucket) + element("KeyMarker", encoded(key_marker, url))
        + element("UploadIdMarker", id_marker)
        + element("NextKeyMarker", encoded(next_key, url) if truncated else "")
        + element("NextUploadIdMarker", next_id if truncated else "")
        + element("Prefix", encoded(prefix, url))
        + (element("Delimiter", encoded(delimiter, url)) if delimiter else "")
        + element("MaxUploads", limit) + element("IsTruncated", truncated)
        + (element("EncodingType", "url") if url else "") + "".join(items)
    )  # fmt: skip
    return _xml(result("ListMultipartUploadsResult", inner))


def _after_marker(uploads: list[Upload], key_marker: str, id_marker: str) -> int:
    """The index of the first upload listed after key-marker and upload-id-marker."""
    for k, upload in enumerate(uploads):
        if upload.key > key_marker:
            return k
        if upload.key == key_marker and id_marker and upload.upload_id == id_marker:
            return k + 1
    return len(uploads)


async def _uploads(s3: S3Request) -> list[Upload]:
    """The uploads whose attributes the caller may read."""
    fs = s3.gateway.fs
    staging = staging_path(s3.gateway.root, "").rstrip("/")
    names = [e.name async for e in fs.scandir(staging) if e.name.startswith(UPLOAD_PREFIX)]
    limit = asyncio.Semaphore(META_READS)

    async def read(name: str) -> Upload | None:
        async with limit:
            try:
                raw = await fs.getxattr(f"{staging}/{name}", UPLOAD_XATTR)
            except pfs.PlasmaError:  # another user's, or gone meanwhile
                return None
        return Upload.from_bytes(name.removeprefix(UPLOAD_PREFIX), raw)

    found = await asyncio.gather(*(read(name) for name in names))
    return [u for u in found if u is not None]


async def _open(s3: S3Request, bucket: str, key: str) -> Upload:
    """The upload the request's uploadId names, for this bucket and key."""
    upload_id = s3.request.query.get("uploadId", "")
    if not _UPLOAD_ID.fullmatch(upload_id):
        raise no_such_upload(upload_id)
    key_parts(key)
    directory = upload_directory(s3.gateway.root, upload_id)
    try:
        raw = await s3.gateway.fs.getxattr(directory, UPLOAD_XATTR)
    except (pfs.NotFoundError, pfs.NotDirectoryError, pfs.NoDataError):
        await s3.bucket_exists(bucket)
        raise no_such_upload(upload_id) from None
    upload = Upload.from_bytes(upload_id, raw)
    if upload is None or upload.completed or (upload.bucket, upload.key) != (bucket, key):
        raise no_such_upload(upload_id)
    return upload


async def _parts(fs: Client, root: str, upload: Upload) -> list[Part]:
    """The upload's received parts in number order, with their S3 attributes."""
    directory = upload_directory(root, upload.upload_id)
    found = [
        (int(e.name), e.attr)
        async for e in fs.scandir(directory, plus=True)
        if _PART_NAME.fullmatch(e.name) and e.attr is not None
    ]
    limit = asyncio.Semaphore(META_READS)

    async def with_meta(number: int, attr: Attr) -> Part:
        async with limit:
            return Part(number, attr, await read_meta(fs, attr))

    return list(await asyncio.gather(*(with_meta(n, a) for n, a in sorted(found))))


@dataclass(slots=True)
class _Asked:
    """One part a completion names."""

    number: int
    etag: str
    checksum: tuple[str, str] | None  # (algorithm, base64 value), if it gives one


def _asked_parts(body: bytes) -> list[_Asked]:
    """The parts a CompleteMultipartUpload body names, in order (a part number named
    twice in a row: the last, as the part sent last replaced the others)."""
    malformed = S3Error(
        "MalformedXML", 400, "The XML you provided was not well-formed or did not validate "
        "against our published schema"
    )  # fmt: skip
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        raise malformed from None
    namespace = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    asked: list[_Asked] = []
    for part in root.findall(f"{namespace}Part"):
        number, etag = part.findtext(f"{namespace}PartNumber"), part.findtext(f"{namespace}ETag")
        if number is None or etag is None:
            raise malformed
        checksum = None
        for algorithm in ALGORITHMS:
            value = part.findtext(f"{namespace}Checksum{algorithm.upper()}")
            if value is not None:
                checksum = (algorithm, value.strip())
        try:
            item = _Asked(int(number), etag, checksum)
        except ValueError:
            raise malformed from None
        if asked and item.number < asked[-1].number:
            raise S3Error(
                "InvalidPartOrder", 400,
                "The list of parts was not in ascending order. Parts must be ordered by part "
                "number.",
            )  # fmt: skip
        if asked and item.number == asked[-1].number:
            asked.pop()
        asked.append(item)
    if not asked:
        raise malformed
    return asked


def _parts_digest(asked: list[_Asked]) -> str:
    """What a completion named, in a few bytes: a retry must name the same."""
    named = ",".join(f"{a.number}:{a.etag.strip().strip(chr(34))}" for a in asked)
    return hashlib.sha256(named.encode()).hexdigest()


def _xml(body: bytes, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=body, content_type="application/xml", headers=headers)
