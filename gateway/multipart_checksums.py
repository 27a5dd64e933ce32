"""A multipart object's checksum, made of its parts' ones in S3's two ways: COMPOSITE,
the checksum of the parts' checksums with "-N" appended (any algorithm), and
FULL_OBJECT, the CRC of the whole content, combined from the parts' CRCs and sizes
without reading the content again (CRC32, CRC32C, CRC64NVME)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping

from awscrt import checksums

from plasmafs.gateway.payload_checks import ALGORITHMS, running
from plasmafs.gateway.s3_errors import invalid_request

COMPOSITE, FULL_OBJECT = "COMPOSITE", "FULL_OBJECT"
_COMBINE: dict[str, tuple[Callable[[int, int, int], int], int]] = {
    "crc32": (checksums.combine_crc32, 4),
    "crc32c": (checksums.combine_crc32c, 4),
    "crc64nvme": (checksums.combine_crc64nvme, 8),
}


def requested(headers: Mapping[str, str]) -> tuple[str, str] | None:
    """The (algorithm, type) a CreateMultipartUpload asks for (None: no checksum).
    Without a type: FULL_OBJECT for CRC64NVME (its only one), COMPOSITE otherwise."""
    algorithm = headers.get("x-amz-checksum-algorithm")
    kind = headers.get("x-amz-checksum-type")
    if algorithm is None:
        if kind is not None:
            raise invalid_request("x-amz-checksum-type needs an x-amz-checksum-algorithm")
        return None
    algorithm = algorithm.strip().lower()
    if algorithm not in ALGORITHMS:
        raise invalid_request(f"unknown checksum algorithm {algorithm!r}")
    kind = (kind or (FULL_OBJECT if algorithm == "crc64nvme" else COMPOSITE)).strip().upper()
    if kind not in (COMPOSITE, FULL_OBJECT):
        raise invalid_request(f"unknown checksum type {kind!r}")
    if kind == FULL_OBJECT and algorithm not in _COMBINE:
        raise invalid_request(f"{algorithm.upper()} has no FULL_OBJECT checksum: only CRCs combine")
    if kind == COMPOSITE and algorithm == "crc64nvme":
        raise invalid_request("CRC64NVME checksums of uploads are FULL_OBJECT")
    return algorithm, kind


def combined(algorithm: str, kind: str, parts: list[tuple[str, int]]) -> str:
    """The object's checksum from its parts' (base64 value, size), in order: base64,
    with "-N" for a COMPOSITE one."""
    raw = [base64.b64decode(value) for value, _ in parts]
    if kind == COMPOSITE:
        digest = running(algorithm)
        for piece in raw:
            digest.update(piece)
        return f"{base64.b64encode(digest.digest()).decode()}-{len(parts)}"
    combine, width = _COMBINE[algorithm]
    value = int.from_bytes(raw[0], "big")
    for piece, (_, size) in zip(raw[1:], parts[1:], strict=True):
        value = combine(value, int.from_bytes(piece, "big"), size)
    return base64.b64encode(value.to_bytes(width, "big")).decode()
