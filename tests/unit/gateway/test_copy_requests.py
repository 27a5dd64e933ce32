"""What a copy request names: x-amz-copy-source (encoded keys, versionId) and
x-amz-copy-source-range, with S3's error for each malformed form."""

from __future__ import annotations

import pytest

from plasmafs.gateway.copies import CopySource, copy_range, copy_source
from plasmafs.gateway.s3_errors import S3Error


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bucket/key", CopySource("bucket", "key")),
        ("/bucket/a/b%20c", CopySource("bucket", "a/b c")),
        ("bucket/%3FversionId", CopySource("bucket", "?versionId")),  # an encoded "?"
        ("bucket/k?versionId=null", CopySource("bucket", "k")),
        ("bucket/d%C3%A9j%C3%A0", CopySource("bucket", "déjà")),
    ],
)
def test_sources(header: str, expected: CopySource) -> None:
    assert copy_source({"x-amz-copy-source": header}) == expected


@pytest.mark.parametrize(
    ("header", "code"),
    [
        ("bucket", "InvalidArgument"),
        ("/bucket/", "InvalidArgument"),
        ("bucket/k?versionId=abc", "NoSuchVersion"),
        ("bucket/k?partNumber=1", "InvalidArgument"),
    ],
)
def test_bad_sources(header: str, code: str) -> None:
    with pytest.raises(S3Error) as refused:
        copy_source({"x-amz-copy-source": header})
    assert refused.value.code == code


def test_ranges() -> None:
    assert copy_range(None, 10) == (0, 10)
    assert copy_range("bytes=0-9", 10) == (0, 10)
    assert copy_range(" bytes=3-3 ", 10) == (3, 4)
    for malformed in ("0-2", "bytes=0", "bytes=hello-world", "bytes=0-2,3-5", "bytes=5-2"):
        with pytest.raises(S3Error) as refused:
            copy_range(malformed, 10)
        assert refused.value.code == "InvalidArgument"
    with pytest.raises(S3Error) as beyond:
        copy_range("bytes=0-10", 10)
    assert (beyond.value.code, beyond.value.status) == ("InvalidRange", 416)
