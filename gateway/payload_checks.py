"""The checks of an uploaded body, computed while it streams: the MD5 an ETag is made
of, Content-MD5, the SHA-256 a signature covers (x-amz-content-sha256), and the
checksums the SDKs send (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256, in
a header or an aws-chunked trailer). `finish` raises S3's error for the first that fails, before
anything is committed."""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Callable, Mapping
from typing import Protocol

import crc32c
from awscrt import checksums

from plasmafs.gateway.s3_errors import S3Error, invalid_request

ALGORITHMS = ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")


class RunningDigest(Protocol):
    """hashlib's interface, which the CRCs take too."""

    def update(self, data: bytes | memoryview) -> None: ...

    def digest(self) -> bytes: ...


class _Crc:
    def __init__(self, step: Callable[[bytes | memoryview, int], int], size: int) -> None:
        self.value = 0
        self.step = step
        self.size = size  # bytes of the digest

    def update(self, data: bytes | memoryview) -> None:
        self.value = self.step(data, self.value)

    def digest(self) -> bytes:
        return self.value.to_bytes(self.size, "big")


_CRCS: dict[str, tuple[Callable[[bytes | memoryview, int], int], int]] = {
    "crc32": (zlib.crc32, 4),
    "crc32c": (crc32c.crc32c, 4),
    "crc64nvme": (checksums.crc64nvme, 8),
}


def running(algorithm: str) -> RunningDigest:
    """A running digest of `algorithm` (one of ALGORITHMS)."""
    if algorithm in _CRCS:
        return _Crc(*_CRCS[algorithm])
    return hashlib.new(algorithm)


def checksum_algorithm(headers: Mapping[str, str]) -> str | None:
    """The checksum algorithm a request declares (x-amz-checksum-*, in a header, in
    x-amz-trailer, or x-amz-sdk-checksum-algorithm), lowercase; S3Error for one this
    gateway does not compute, or for two."""
    found = set()
    for name in headers:
        lower = name.lower()
        if lower.startswith("x-amz-checksum-") and lower != "x-amz-checksum-type":
            found.add(lower.removeprefix("x-amz-checksum-"))
    trailer = headers.get("x-amz-trailer", "").strip().lower()
    if trailer.startswith("x-amz-checksum-"):
        found.add(trailer.removeprefix("x-amz-checksum-"))
    declared = headers.get("x-amz-sdk-checksum-algorithm", "").strip().lower()
    if declared and not found:
        found.add(declared)
    if len(found) > 1:
        raise invalid_request("Expecting a single x-amz-checksum- header")
    if not found:
        return None
    (algorithm,) = found
    if algorithm not in ALGORITHMS:
        raise invalid_request(f"unknown checksum algorithm {algorithm!r}")
    return algorithm


class PayloadChecks:
    """Running digests of one body and what they must come to."""

    def __init__(
        self,
        headers: Mapping[str, str],
        payload_sha256: str | None,
        algorithm: str | None = None,
        *,
        declared: bool = True,
    ) -> None:
        """`algorithm`: a checksum computed when the request declares none (a part of
        an upload that has one); a request that declares another is refused.
        `declared` False: the x-amz-checksum-* headers are not about this body (a
        CompleteMultipartUpload's are the object's) and are not checked."""
        self.md5 = hashlib.md5(usedforsecurity=False)
        self.size = 0
        self._sha256 = hashlib.sha256() if payload_sha256 else None
        self._payload_sha256 = payload_sha256
        self._content_md5 = _content_md5(headers.get("Content-MD5"))
        self.algorithm = (checksum_algorithm(headers) if declared else None) or algorithm
        if algorithm is not None and self.algorithm != algorithm:
            raise invalid_request(
                f"this upload's checksum is {algorithm.upper()}, not {self.algorithm}"
            )
        self._checksum = running(self.algorithm) if self.algorithm else None
        header = f"x-amz-checksum-{self.algorithm}" if self.algorithm and declared else None
        self._expected = headers.get(header) if header else None

    def update(self, data: bytes | memoryview) -> None:
        """Feed the next piece of the body."""
        self.size += len(data)
        self.md5.update(data)
        if self._sha256 is not None:
            self._sha256.update(data)
        if self._checksum is not None:
            self._checksum.update(data)

    def finish(self, trailers: Mapping[str, str] | None = None) -> tuple[str, str] | None:
        """Raise S3's error if the body is not what the request said; returns the
        verified checksum (algorithm, base64), if one was sent."""
        if self._sha256 is not None and self._sha256.hexdigest() != self._payload_sha256:
            raise S3Error(
                "XAmzContentSHA256Mismatch",
                400,
                "The provided 'x-amz-content-sha256' header does not match what was computed.",
            )
        if self._content_md5 is not None and self.md5.digest() != self._content_md5:
            raise S3Error(
                "BadDigest", 400, "The Content-MD5 you specified did not match what we received."
            )
        if self._checksum is None or self.algorithm is None:
            return None
        expected = self._expected
        if expected is None and trailers is not None:
            expected = trailers.get(f"x-amz-checksum-{self.algorithm}")
        actual = base64.b64encode(self._checksum.digest()).decode()
        if expected is None:
            return self.algorithm, actual  # declared, computed, nothing to compare with
        if expected.strip() != actual:
            raise S3Error(
                "BadDigest",
                400,
                f"The {self.algorithm.upper()} you specified did not match the calculated "
                "checksum.",
            )
        return self.algorithm, actual


def _content_md5(value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        digest = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        digest = b""
    if len(digest) != 16:
        raise S3Error("InvalidDigest", 400, "The Content-MD5 you specified was invalid.")
    return digest
