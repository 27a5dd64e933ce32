"""SigV4 verification (gateway/sigv4.py, aws_chunked.py) against botocore's own
signers, in process, and AWS's published example of a chunked upload."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import unittest.mock
from urllib.parse import urlsplit

import pytest
from aiohttp import StreamReader
from aiohttp.base_protocol import BaseProtocol
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from multidict import CIMultiDict

from plasmafs.core.s3_signing import signing_key
from plasmafs.gateway.aws_chunked import ChunkedBody
from plasmafs.gateway.s3_errors import S3Error
from plasmafs.gateway.sigv4 import (
    Signature,
    canonical_request,
    parse,
    query_pairs,
    string_to_sign,
    verify,
)

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
CREDENTIALS = Credentials("AKIAIOSFODNN7EXAMPLE", SECRET)


def _signed(method: str, url: str, headers: dict[str, str], body: bytes = b"") -> AWSRequest:
    request = AWSRequest(method=method, url=url, headers=headers, data=body)
    S3SigV4Auth(CREDENTIALS, "s3", "us-east-1").add_auth(request)
    return request


def _check(request: AWSRequest, secret: str = SECRET) -> Signature:
    """Verify `request` as the gateway does; its signature."""
    parts = urlsplit(request.url)
    headers = CIMultiDict(request.headers.items())
    headers.setdefault("Host", parts.netloc)
    query = query_pairs(parts.query)
    signature = parse(headers, query)
    assert signature is not None
    key = signing_key(secret, signature.date, signature.region)
    try:
        canonical = canonical_request(request.method, parts.path, query, headers, signature)
        verify(key, string_to_sign(signature, canonical), signature.signature)
    except S3Error:
        # The gateway's second reading: the path as sent (gateway/app.py).
        canonical = canonical_request(
            request.method, parts.path, query, headers, signature, as_sent=True
        )
        verify(key, string_to_sign(signature, canonical), signature.signature)
    return signature


@pytest.mark.parametrize(
    "url",
    [
        "http://gw:7580/bucket/key",
        "http://gw:7580/bucket/dir/k%20e%2By~(1).txt",
        "http://gw:7580/bucket/%C3%A9t%C3%A9/%E2%82%AC",
        "http://gw:7580/bucket?list-type=2&prefix=a%2Fb&delimiter=%2F&max-keys=3",
        "http://gw:7580/bucket?delete",
        "http://gw:7580/",
    ],
)
def test_requests_signed_by_botocore_verify(url: str) -> None:
    body = b"some content"
    request = _signed("PUT", url, {"x-amz-meta-Owner": "  a   b  "}, body)
    signature = _check(request)
    assert signature.payload_hash == hashlib.sha256(body).hexdigest()
    assert signature.access_key_id == "AKIAIOSFODNN7EXAMPLE" and not signature.presigned


def test_a_changed_request_or_secret_fails() -> None:
    request = _signed("GET", "http://gw:7580/bucket/key", {"x-amz-meta-a": "1"})
    with pytest.raises(S3Error) as wrong_secret:
        _check(request, secret="x" * 40)
    assert wrong_secret.value.code == "SignatureDoesNotMatch"
    request.headers.replace_header("x-amz-meta-a", "2")
    with pytest.raises(S3Error) as changed:
        _check(request)
    assert changed.value.code == "SignatureDoesNotMatch"
    moved = _signed("GET", "http://gw:7580/bucket/key", {})
    moved.url = "http://gw:7580/bucket/other"
    with pytest.raises(S3Error):
        _check(moved)


def test_presigned_urls_verify_and_expire() -> None:
    request = AWSRequest(method="GET", url="http://gw:7580/bucket/a%20key")
    S3SigV4QueryAuth(CREDENTIALS, "s3", "us-east-1", expires=60).add_auth(request)
    signature = _check(request)
    assert signature.presigned and signature.payload_hash == "UNSIGNED-PAYLOAD"
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    with unittest.mock.patch("botocore.auth.get_current_datetime", return_value=old):
        stale = AWSRequest(method="GET", url="http://gw:7580/bucket/k")
        S3SigV4QueryAuth(CREDENTIALS, "s3", "us-east-1", expires=60).add_auth(stale)
    with pytest.raises(S3Error, match="expired"):
        _check(stale)


def test_requests_far_from_now_are_refused() -> None:
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=16)
    with unittest.mock.patch("botocore.auth.get_current_datetime", return_value=old):
        request = _signed("GET", "http://gw:7580/bucket/k", {})
    with pytest.raises(S3Error) as skewed:
        _check(request)
    assert skewed.value.code == "RequestTimeTooSkewed"


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        ("AWS4-HMAC-SHA256 Credential=x", "AuthorizationHeaderMalformed"),
        ("AWS AKID:c2ln", "InvalidRequest"),
        ("Bearer token", "InvalidArgument"),
    ],
)
def test_malformed_authorization_headers(authorization: str, code: str) -> None:
    headers = CIMultiDict({"Authorization": authorization, "x-amz-content-sha256": "x"})
    with pytest.raises(S3Error) as refused:
        parse(headers, [])
    assert refused.value.code == code


class _Protocol(BaseProtocol):
    def __init__(self) -> None:
        super().__init__(asyncio.get_running_loop())


async def _decoded(body: bytes, signature: Signature, key: bytes) -> tuple[bytes, dict[str, str]]:
    stream = StreamReader(_Protocol(), 2**16, loop=asyncio.get_running_loop())
    stream.feed_data(body)
    stream.feed_eof()
    chunked = ChunkedBody(stream, signature, key)
    data = b"".join([chunk async for chunk in chunked.chunks()])
    return data, chunked.trailers


# AWS's example of a chunked upload ("Signature calculation: transferring a payload in
# multiple chunks"): 65 KiB of "a" in a 64 KiB chunk and a 1 KiB one.
_EXAMPLE = Signature(
    "AKIAIOSFODNN7EXAMPLE", "20130524", "us-east-1", "s3", "20130524T000000Z",
    ("content-encoding", "content-length", "host", "x-amz-content-sha256", "x-amz-date",
     "x-amz-decoded-content-length", "x-amz-storage-class"),
    "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9", False,
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
)  # fmt: skip
_EXAMPLE_CHUNKS = [
    (b"a" * 65536, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"),
    (b"a" * 1024, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"),
    (b"", "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"),
]


def _example_body(chunks: list[tuple[bytes, str]]) -> bytes:
    return b"".join(
        f"{len(data):x};chunk-signature={sig}\r\n".encode() + data + b"\r\n" for data, sig in chunks
    )


async def test_the_aws_chunked_example_decodes_and_a_tampered_chunk_fails() -> None:
    key = signing_key(SECRET, "20130524", "us-east-1")
    data, trailers = await _decoded(_example_body(_EXAMPLE_CHUNKS), _EXAMPLE, key)
    assert data == b"a" * 66560 and trailers == {}
    tampered = [(b"b" * 65536, _EXAMPLE_CHUNKS[0][1]), *_EXAMPLE_CHUNKS[1:]]
    with pytest.raises(S3Error) as refused:
        await _decoded(_example_body(tampered), _EXAMPLE, key)
    assert refused.value.code == "SignatureDoesNotMatch"
    with pytest.raises(S3Error) as cut:
        await _decoded(_example_body(_EXAMPLE_CHUNKS)[:60000], _EXAMPLE, key)
    assert cut.value.code == "IncompleteBody"


async def test_unsigned_chunks_with_a_trailing_checksum() -> None:
    signature = Signature(
        "AKID", "20261128", "us-east-1", "s3", "20261128T000000Z", ("host",), "0" * 64, False,
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    )  # fmt: skip
    body = b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"
    data, trailers = await _decoded(body, signature, b"")
    assert data == b"hello" and trailers == {"x-amz-checksum-crc32": "NhCmhg=="}
