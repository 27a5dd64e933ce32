"""Bucket operations: ListBuckets, CreateBucket, DeleteBucket, HeadBucket,
GetBucketLocation, GetBucketVersioning (never enabled) and ListObjects V1 and V2."""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from plasmafs.core import errors as pfs
from plasmafs.core.attributes import Attr, FileKind
from plasmafs.gateway.listing import MAX_KEYS, Listing, list_objects
from plasmafs.gateway.object_keys import bucket_path, check_new_bucket
from plasmafs.gateway.object_meta import EMPTY_MD5, derived_etag, read_meta
from plasmafs.gateway.s3_errors import S3Error, invalid_argument, no_such_bucket, not_implemented
from plasmafs.gateway.xml_replies import (
    element,
    encoded,
    iso_time,
    list_buckets,
    location,
    owner,
    result,
)

if TYPE_CHECKING:
    from plasmafs.gateway.requests import S3Request

ETAGS_AT_ONCE = 256  # getxattr requests in flight for one listing page
MAX_CREATE_BODY = 64 * 1024


def _xml(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/xml")


async def list_all_buckets(s3: S3Request) -> web.Response:
    """ListBuckets: the directories under the root that the caller owns (as S3 lists
    the caller's buckets), in name order, with max-buckets, continuation-token and
    prefix."""
    query = s3.request.query
    try:
        most = int(query.get("max-buckets", "10000"))
    except ValueError:
        raise invalid_argument("max-buckets is not a number") from None
    if not 1 <= most <= 10000:
        raise invalid_argument("max-buckets is 1 to 10000")
    token = query.get("continuation-token") or None
    after = _after_token(token) if token is not None else ""
    prefix = query.get("prefix", "")
    buckets: list[tuple[str, Attr]] = []
    truncated = False
    async for e in s3.gateway.fs.scandir(s3.gateway.root, plus=True):
        a = e.attr
        if a is None or a.kind is not FileKind.DIRECTORY or a.uid != s3.user.uid:
            continue
        if e.name.startswith(".") or e.name <= after or not e.name.startswith(prefix):
            continue
        if len(buckets) == most:
            truncated = True
            break
        buckets.append((e.name, a))
    next_token = continuation_token(buckets[-1][0]) if truncated else None
    return _xml(list_buckets(buckets, s3.user.user, next_token, prefix))


async def create_bucket(s3: S3Request, bucket: str) -> web.Response:
    """CreateBucket: a new directory under the root, owned by the caller."""
    check_new_bucket(bucket)
    if s3.request.headers.get("x-amz-bucket-object-lock-enabled", "").lower() == "true":
        raise not_implemented("Object lock")
    await s3.read_body(MAX_CREATE_BODY)  # a location constraint: every bucket is here
    path = bucket_path(s3.gateway.root, bucket)
    try:
        await s3.gateway.fs.mkdir(path)
    except pfs.ExistsError:
        attr = await s3.gateway.fs.stat(path)
        if attr.uid != s3.user.uid or not attr.is_dir:
            raise S3Error(
                "BucketAlreadyExists", 409, "The requested bucket name is not available.",
                BucketName=bucket,
            ) from None  # fmt: skip
        if s3.gateway.region != "us-east-1":
            raise S3Error(
                "BucketAlreadyOwnedByYou", 409, "Your previous request to create the named "
                "bucket succeeded and you already own it.", BucketName=bucket,
            ) from None  # fmt: skip
    return web.Response(status=200, headers={"Location": f"/{bucket}"})


async def delete_bucket(s3: S3Request, bucket: str) -> web.Response:
    """DeleteBucket: only an empty one."""
    try:
        await s3.gateway.fs.rmdir(bucket_path(s3.gateway.root, bucket))
    except (pfs.NotFoundError, pfs.NotDirectoryError):
        raise no_such_bucket(bucket) from None
    except pfs.NotEmptyError:
        raise S3Error(
            "BucketNotEmpty", 409, "The bucket you tried to delete is not empty",
            BucketName=bucket,
        ) from None  # fmt: skip
    return web.Response(status=204)


async def head_bucket(s3: S3Request, bucket: str) -> web.Response:
    """HeadBucket."""
    await s3.bucket_exists(bucket)
    return web.Response(status=200, headers={"x-amz-bucket-region": s3.gateway.region})


async def bucket_location(s3: S3Request, bucket: str) -> web.Response:
    """GetBucketLocation."""
    await s3.bucket_exists(bucket)
    return _xml(location(s3.gateway.region))


async def bucket_versioning(s3: S3Request, bucket: str) -> web.Response:
    """GetBucketVersioning: versioning is never enabled here."""
    await s3.bucket_exists(bucket)
    return _xml(result("VersioningConfiguration", ""))


def bounded_count(query: object, name: str, limit: int) -> int:
    """A listing's count parameter (max-keys, max-parts, ...): `limit` when absent,
    at most `limit`."""
    text = query.get(name, str(limit))  # type: ignore[attr-defined]
    try:
        value = int(text)
    except ValueError:
        raise invalid_argument(f"{name} is not a number") from None
    if value < 0:
        raise invalid_argument(f"{name} is negative")
    return min(value, limit)


def url_encoding(query: object) -> bool:
    """Whether the listing's keys go out percent-encoded (encoding-type=url)."""
    kind = query.get("encoding-type")  # type: ignore[attr-defined]
    if kind is None:
        return False
    if kind != "url":
        raise invalid_argument("Invalid Encoding Method specified in Request")
    return True


def continuation_token(key: str) -> str:
    """The opaque token of a listing going on after `key`."""
    return base64.urlsafe_b64encode(b"pfs1:" + key.encode()).decode()


def _after_token(token: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(token.encode())
        if raw.startswith(b"pfs1:"):
            return raw[5:].decode()
    except (binascii.Error, ValueError):
        pass
    raise invalid_argument("The continuation token provided is incorrect")


@dataclass(frozen=True, slots=True)
class _Asked:
    """What a listing request asks for, and the page that answers it."""

    prefix: str
    delimiter: str
    max_keys: int
    url: bool
    listing: Listing

    def common_prefixes(self) -> list[str]:
        """The CommonPrefixes elements."""
        return [
            f"<CommonPrefixes>{element('Prefix', encoded(p, self.url))}</CommonPrefixes>"
            for p in self.listing.prefixes
        ]


async def _listed(s3: S3Request, bucket: str, after: str) -> _Asked:
    """The page of `bucket` after key `after` the request's prefix, delimiter,
    max-keys and encoding-type ask for."""
    query = s3.request.query
    prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
    max_keys, url = bounded_count(query, "max-keys", MAX_KEYS), url_encoding(query)
    listing = await list_objects(
        s3.gateway.fs, bucket_path(s3.gateway.root, bucket), prefix, delimiter, after, max_keys
    )
    return _Asked(prefix, delimiter, max_keys, url, listing)


async def list_bucket(s3: S3Request, bucket: str) -> web.Response:
    """ListObjects (V1) and ListObjectsV2 (list-type=2)."""
    query = s3.request.query
    await s3.bucket_exists(bucket)
    v2 = query.get("list-type") == "2"
    if "list-type" in query and not v2:
        raise invalid_argument("list-type must be 2")
    if v2:
        token = query.get("continuation-token")
        start_after = query.get("start-after", "")
        after = _after_token(token) if token else start_after  # empty: none
    else:
        after = query.get("marker", "")
    asked = await _listed(s3, bucket, after)
    listing, url = asked.listing, asked.url
    contents = await _contents(
        s3, listing, url, with_owner=not v2 or query.get("fetch-owner") == "true"
    )
    # As S3 answers (and botocore decodes): V1 encodes Marker and Delimiter, not Prefix.
    parts = [
        element("Name", bucket),
        element("Prefix", encoded(asked.prefix, url and v2)),
    ]
    if v2:
        if token is not None:
            parts.append(element("ContinuationToken", token))
        if start_after:
            parts.append(element("StartAfter", encoded(start_after, url)))
        parts.append(element("KeyCount", len(listing.objects) + len(listing.prefixes)))
    else:
        parts.append(element("Marker", encoded(after, url)))
    parts.append(element("MaxKeys", asked.max_keys))
    parts += _delimiter_and_truncation(asked)
    if listing.truncated:
        if v2:
            parts.append(element("NextContinuationToken", continuation_token(listing.last)))
        elif asked.delimiter:
            parts.append(element("NextMarker", encoded(listing.last, url)))
    return _xml(result("ListBucketResult", "".join(parts + contents + asked.common_prefixes())))


async def list_versions(s3: S3Request, bucket: str) -> web.Response:
    """ListObjectVersions of a bucket that never had versioning: each object's one
    version, "null", the latest."""
    query = s3.request.query
    await s3.bucket_exists(bucket)
    after = query.get("key-marker", "")
    asked = await _listed(s3, bucket, after)
    listing, url = asked.listing, asked.url
    versions = await _contents(
        s3, listing, url, with_owner=True, element_name="Version", version=True
    )
    parts = [
        element("Name", bucket),
        element("Prefix", encoded(asked.prefix, url)),
        element("KeyMarker", encoded(after, url)),
        element("VersionIdMarker", query.get("version-id-marker", "")),
        element("MaxKeys", asked.max_keys),
        *_delimiter_and_truncation(asked),
    ]
    if listing.truncated:
        parts.append(element("NextKeyMarker", encoded(listing.last, url)))
        parts.append(element("NextVersionIdMarker", "null"))
    return _xml(result("ListVersionsResult", "".join(parts + versions + asked.common_prefixes())))


def _delimiter_and_truncation(asked: _Asked) -> list[str]:
    """Delimiter (if given), EncodingType (if url) and IsTruncated, as both listings
    answer them."""
    parts = []
    if asked.delimiter:
        parts.append(element("Delimiter", encoded(asked.delimiter, asked.url)))
    if asked.url:
        parts.append(element("EncodingType", "url"))
    parts.append(element("IsTruncated", asked.listing.truncated))
    return parts


async def _contents(
    s3: S3Request,
    listing: Listing,
    url: bool,
    *,
    with_owner: bool,
    element_name: str = "Contents",
    version: bool = False,
) -> list[str]:
    """A Contents element per object, with its ETag (read from the objects' S3
    attributes, many requests in flight)."""
    fs = s3.gateway.fs
    names = None
    limit = asyncio.Semaphore(ETAGS_AT_ONCE)

    async def etag(attr: Attr) -> str:
        if attr.is_dir:
            return f'"{EMPTY_MD5}"'
        async with limit:
            try:
                return (await read_meta(fs, attr)).etag_of(attr)
            except pfs.PlasmaError:
                return derived_etag(attr)

    etags = await asyncio.gather(*(etag(attr) for _, attr in listing.objects))
    if with_owner and listing.objects:
        names = await s3.gateway.owner_names()
    out = []
    for (key, attr), tag in zip(listing.objects, etags, strict=True):
        size = 0 if attr.is_dir else attr.size
        who = owner(names.get(attr.uid, str(attr.uid))) if names is not None else ""
        versioned = element("VersionId", "null") + element("IsLatest", True) if version else ""
        out.append(
            f"<{element_name}>{element('Key', encoded(key, url))}{versioned}"
            f"{element('LastModified', iso_time(attr.mtime_ns))}{element('ETag', tag)}"
            f"{element('Size', size)}{who}{element('StorageClass', 'STANDARD')}"
            f"</{element_name}>"
        )
    return out
