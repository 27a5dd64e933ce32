"""The checksums an upload may carry, against their published check values (the
digest of b"123456789"), fed in pieces as a body streams; a wrong one is BadDigest."""

from __future__ import annotations

import base64
import hashlib

import pytest

from plasmafs.gateway.payload_checks import PayloadChecks
from plasmafs.gateway.s3_errors import S3Error

CHECK = b"123456789"
# The catalogue's check values of the CRCs; the hashes are hashlib's.
EXPECTED = {
    "crc32": (0xCBF43926).to_bytes(4, "big"),
    "crc32c": (0xE3069283).to_bytes(4, "big"),
    "crc64nvme": (0xAE8B14860A799888).to_bytes(8, "big"),
    "sha1": hashlib.sha1(CHECK).digest(),
    "sha256": hashlib.sha256(CHECK).digest(),
}


@pytest.mark.parametrize("algorithm", sorted(EXPECTED))
def test_each_checksum_matches_its_check_value(algorithm: str) -> None:
    value = base64.b64encode(EXPECTED[algorithm]).decode()
    checks = PayloadChecks({f"x-amz-checksum-{algorithm}": value}, None)
    for k in range(0, len(CHECK), 4):
        checks.update(memoryview(CHECK)[k : k + 4])
    assert checks.finish() == (algorithm, value)
    wrong = PayloadChecks({f"x-amz-checksum-{algorithm}": value}, None)
    wrong.update(CHECK[:-1] + b"0")
    with pytest.raises(S3Error) as refused:
        wrong.finish()
    assert refused.value.code == "BadDigest"


def test_a_trailing_checksum_is_compared_too() -> None:
    value = base64.b64encode(EXPECTED["crc64nvme"]).decode()
    checks = PayloadChecks({"x-amz-trailer": "x-amz-checksum-crc64nvme"}, None)
    checks.update(CHECK)
    assert checks.finish({"x-amz-checksum-crc64nvme": value}) == ("crc64nvme", value)
