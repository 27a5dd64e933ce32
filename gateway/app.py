"""The HTTP side: an aiohttp application that verifies each request's signature,
makes the request as the user of its access key, routes it to its S3 operation and
answers errors as S3's XML.

Requests are path-style (`/bucket/key`). Subresources this gateway does not have
(ACLs, policies, tagging, lifecycle, object lock, versions, ...) are answered
NotImplemented, never a silent success.
"""

from __future__ import annotations

import logging
import uuid
from urllib.parse import unquote

from aiohttp import web

from plasmafs.client.callers import LocalCaller, acting_for
from plasmafs.core import errors as pfs
from plasmafs.gateway import buckets, copies, multipart, objects, puts
from plasmafs.gateway.requests import Gateway, S3Request
from plasmafs.gateway.s3_errors import (
    S3Error,
    access_denied,
    from_plasma,
    invalid_argument,
    invalid_request,
    not_implemented,
)
from plasmafs.gateway.sigv4 import (
    canonical_request,
    check_amz_headers_signed,
    parse,
    query_pairs,
    string_to_sign,
    verify,
)

log = logging.getLogger(__name__)

GATEWAY_KEY = web.AppKey("gateway", Gateway)
# Subresources answered NotImplemented (the query parameter names them).
UNSUPPORTED = {
    "acl": "ACLs", "policy": "Bucket policies", "policyStatus": "Bucket policies",
    "tagging": "Tagging", "lifecycle": "Lifecycle rules", "cors": "CORS",
    "website": "Website hosting", "object-lock": "Object lock", "retention": "Object lock",
    "legal-hold": "Object lock", "encryption": "Server-side encryption",
    "replication": "Replication", "notification": "Notifications", "logging": "Logging",
    "accelerate": "Transfer acceleration", "requestPayment": "Requester pays",
    "analytics": "Analytics", "inventory": "Inventory", "metrics": "Metrics",
    "ownershipControls": "Ownership controls", "publicAccessBlock": "Public access blocks",
    "torrent": "Torrents", "restore": "Restore", "select": "S3 Select",
    "attributes": "GetObjectAttributes", "intelligent-tiering": "Intelligent tiering",
}  # fmt: skip


def make_app(gateway: Gateway) -> web.Application:
    """The application serving S3 over `gateway`."""
    app = web.Application()
    app[GATEWAY_KEY] = gateway
    app.router.add_route("*", "/{tail:.*}", _serve)
    return app


async def _serve(request: web.Request) -> web.StreamResponse:
    request_id = uuid.uuid4().hex[:16].upper()
    raw_path = request.raw_path.split("?", 1)[0]
    try:
        s3 = await _authenticated(request, raw_path)
        caller = LocalCaller(s3.user.uid, s3.user.gid, s3.user.groups)
        with acting_for(caller):
            response = await _route(s3, raw_path)
    except S3Error as exc:
        return _error(request, exc, raw_path, request_id)
    except pfs.PlasmaError as exc:
        bucket, _, key = unquote(raw_path).lstrip("/").partition("/")
        return _error(request, from_plasma(exc, bucket=bucket, key=key), raw_path, request_id)
    except ConnectionError as exc:
        # The client went away (mid-upload, say): what it sent was dropped, and the
        # answer goes nowhere.
        log.info("%s %s: the client went away (%s)", request.method, raw_path, exc)
        error = S3Error("IncompleteBody", 400, "the connection was lost")
        return _error(request, error, raw_path, request_id)
    except Exception:
        log.exception("request %s %s failed", request.method, raw_path)
        error = S3Error("InternalError", 500, "We encountered an internal error. Please try again.")
        return _error(request, error, raw_path, request_id)
    response.headers["x-amz-request-id"] = request_id
    return response


def _error(request: web.Request, exc: S3Error, resource: str, request_id: str) -> web.Response:
    headers = {"x-amz-request-id": request_id}
    if request.method == "HEAD":
        return web.Response(status=exc.status, headers=headers)
    return web.Response(
        status=exc.status,
        body=exc.body(unquote(resource), request_id),
        content_type="application/xml",
        headers=headers,
    )


async def _authenticated(request: web.Request, raw_path: str) -> S3Request:
    gateway = request.app[GATEWAY_KEY]
    query = query_pairs(request.query_string)
    signature = parse(request.headers, query)
    if signature is None:
        raise access_denied("Anonymous access is off: sign requests with an access key")
    user = await gateway.signing_keys.get(signature.access_key_id, signature.date, signature.region)
    try:
        canonical = canonical_request(request.method, raw_path, query, request.headers, signature)
        verify(user.key, string_to_sign(signature, canonical), signature.signature)
    except S3Error as exc:
        # S3's canonical path is the path encoded as AWS encodes (what most signers
        # sign); some sign the path exactly as they send it (botocore, when it sends
        # characters such as "(" unencoded).
        if exc.code != "SignatureDoesNotMatch":
            raise
        canonical = canonical_request(
            request.method, raw_path, query, request.headers, signature, as_sent=True
        )
        verify(user.key, string_to_sign(signature, canonical), signature.signature)
    check_amz_headers_signed(request.headers, signature)
    return S3Request(gateway, request, signature, user)


def _split(raw_path: str) -> tuple[str, str]:
    try:
        path = unquote(raw_path, errors="strict").lstrip("/")
    except UnicodeDecodeError:
        raise S3Error("InvalidURI", 400, "Couldn't parse the specified URI.") from None
    bucket, _, key = path.partition("/")
    return bucket, key


async def _route(s3: S3Request, raw_path: str) -> web.StreamResponse:
    bucket, key = _split(raw_path)
    method = s3.request.method
    query = s3.request.query
    for name in query:
        if name in UNSUPPORTED:
            raise not_implemented(UNSUPPORTED[name])
    # Versioning is never enabled: every object's one version is "null".
    if query.get("versionId", "null") != "null":
        raise invalid_argument("Invalid version id specified")
    if not bucket:
        if method == "GET":
            return await buckets.list_all_buckets(s3)
        raise _not_allowed(method)
    if not key:
        return await _bucket_operation(s3, bucket, method)
    if "uploadId" in query or "uploads" in query:
        return await _upload_operation(s3, bucket, key, method)
    if "partNumber" in query and method not in ("GET", "HEAD"):
        raise invalid_request("partNumber goes with an uploadId")
    if method == "PUT":
        if copies.COPY_SOURCE in s3.request.headers:
            return await copies.copy_object(s3, bucket, key)
        return await puts.put_object(s3, bucket, key)
    if method in ("GET", "HEAD"):
        return await objects.get_object(s3, bucket, key, head=method == "HEAD")
    if method == "DELETE":
        return await objects.delete_object(s3, bucket, key)
    if method == "POST":
        raise not_implemented("POST to an object")
    raise _not_allowed(method)


async def _upload_operation(
    s3: S3Request, bucket: str, key: str, method: str
) -> web.StreamResponse:
    """The multipart upload requests (an `uploads` or `uploadId` subresource)."""
    if "uploads" in s3.request.query:
        if method == "POST":
            return await multipart.create_upload(s3, bucket, key)
    elif method == "PUT":
        return await multipart.upload_part(s3, bucket, key)
    elif method == "GET":
        return await multipart.list_parts(s3, bucket, key)
    elif method == "POST":
        return await multipart.complete_upload(s3, bucket, key)
    elif method == "DELETE":
        return await multipart.abort_upload(s3, bucket, key)
    raise _not_allowed(method)


async def _bucket_operation(s3: S3Request, bucket: str, method: str) -> web.StreamResponse:
    query = s3.request.query
    if method == "GET":
        if "location" in query:
            return await buckets.bucket_location(s3, bucket)
        if "versioning" in query:
            return await buckets.bucket_versioning(s3, bucket)
        if "versions" in query:
            return await buckets.list_versions(s3, bucket)
        if "uploads" in query:
            return await multipart.list_uploads(s3, bucket)
        return await buckets.list_bucket(s3, bucket)
    if method == "HEAD":
        return await buckets.head_bucket(s3, bucket)
    if method == "PUT":
        if "versioning" in query:
            raise not_implemented("Versioning")
        return await buckets.create_bucket(s3, bucket)
    if method == "DELETE":
        return await buckets.delete_bucket(s3, bucket)
    if method == "POST" and "delete" in query:
        return await objects.delete_objects(s3, bucket)
    raise _not_allowed(method)


def _not_allowed(method: str) -> S3Error:
    return S3Error("MethodNotAllowed", 405, f"The specified method is not allowed: {method}")
