"""The S3 gateway with boto3 against a real cluster: buckets, objects, ranges,
conditions, metadata, listings with delimiters and pages, presigned URLs, and the
refusals of bad signatures and keys."""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import io
import os
import signal
import socket
import subprocess
import sys
import unittest.mock
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from plasmafs.client import Client, SyncClient
from tests.conftest import DataCluster
from tests.support.cli_runner import clean_env, run_pfs
from tests.support.gateway import ROOT, GatewayProcess, s3_client


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_buckets_and_objects_round_trip(s3: Any, data_cluster: DataCluster) -> None:
    s3.create_bucket(Bucket="photos")
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["photos"]
    data = os.urandom(300_000)
    put = s3.put_object(Bucket="photos", Key="2026/nov/a.bin", Body=data, ContentType="x/y",
                        Metadata={"camera": "pfs"})  # fmt: skip
    assert put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    got = s3.get_object(Bucket="photos", Key="2026/nov/a.bin")
    assert got["Body"].read() == data
    assert got["ETag"] == put["ETag"] and got["ContentType"] == "x/y"
    assert got["Metadata"] == {"camera": "pfs"} and got["ContentLength"] == len(data)
    head = s3.head_object(Bucket="photos", Key="2026/nov/a.bin")
    assert head["ETag"] == put["ETag"] and head["ContentLength"] == len(data)
    with SyncClient(data_cluster.namenode.address) as lib:
        assert lib.read_file(f"{ROOT}/photos/2026/nov/a.bin") == data
        assert lib.stat(f"{ROOT}/photos/2026/nov/a.bin").uid == 1001  # made as alice
    s3.delete_object(Bucket="photos", Key="2026/nov/a.bin")
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket="photos", Key="2026/nov/a.bin")
    assert _code(missing) == "NoSuchKey"
    assert s3.list_objects_v2(Bucket="photos")["KeyCount"] == 0  # the emptied prefix is gone
    s3.delete_bucket(Bucket="photos")
    assert s3.list_buckets()["Buckets"] == []


# Keys whose S3 order differs from name order ("-", "." sort before "/"), nesting,
# unicode, and an empty directory (listed as "empty/").
_KEYS = [
    "a.txt", "a-b/c", "a/b/c", "a/b/d", "a/b.e", "a/bc", "a0", "b/x/y/z", "b/x-1",
    "b/x.y", "b/x0", "c d/e f", "é/ü", "photos/2006/jan/1.jpg", "photos/2006/feb/2.jpg",
    "photos/2007/jan/3.jpg", "photos/index.html", "z", "empty/",
]  # fmt: skip


def _expected(
    keys: list[str], prefix: str, delimiter: str, after: str, max_keys: int
) -> tuple[list[str], list[str], bool]:
    """S3's answer over a set of keys: objects, common prefixes, truncated."""
    objects: list[str] = []
    prefixes: list[str] = []
    truncated = False
    for key in sorted(keys, key=lambda k: k.encode()):
        if key <= after or not key.startswith(prefix):
            continue
        common = ""
        if delimiter and delimiter in key[len(prefix) :]:
            common = key[: key.index(delimiter, len(prefix)) + len(delimiter)]
            if prefixes and prefixes[-1] == common:
                continue
            if after.startswith(common):
                continue
        if len(objects) + len(prefixes) >= max_keys:
            truncated = True
            break
        (prefixes if common else objects).append(common or key)
    return objects, prefixes, truncated


def _put_keys(s3: Any, bucket: str, keys: list[str]) -> None:
    s3.create_bucket(Bucket=bucket)
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"" if key.endswith("/") else key.encode())


def test_listings_answer_as_s3_for_prefixes_delimiters_and_markers(s3: Any) -> None:
    _put_keys(s3, "list", _KEYS)
    cases = [
        (prefix, delimiter, after)
        for prefix in ("", "a", "a/", "a/b", "b/x", "photos/", "photos/2006/", "nothing/", "é")
        for delimiter in ("", "/", "x", ".")
        for after in ("", "a/b", "a.txt", "b/x/", "photos/2006/feb/2.jpg", "zz")
    ]
    for prefix, delimiter, after in cases:
        for max_keys in (1000, 2):
            want = _expected(_KEYS, prefix, delimiter, after, max_keys)
            got = s3.list_objects_v2(
                Bucket="list", Prefix=prefix, Delimiter=delimiter, StartAfter=after,
                MaxKeys=max_keys,
            )  # fmt: skip
            objects = [o["Key"] for o in got.get("Contents", [])]
            prefixes = [p["Prefix"] for p in got.get("CommonPrefixes", [])]
            case = (prefix, delimiter, after, max_keys)
            assert (objects, prefixes, got["IsTruncated"]) == want, case
            v1 = s3.list_objects(
                Bucket="list", Prefix=prefix, Delimiter=delimiter, Marker=after, MaxKeys=max_keys
            )
            assert [o["Key"] for o in v1.get("Contents", [])] == objects, case
            assert [p["Prefix"] for p in v1.get("CommonPrefixes", [])] == prefixes, case


def test_paginated_listings_return_every_key_once(s3: Any) -> None:
    _put_keys(s3, "pages", _KEYS)
    for delimiter in ("", "/", "x"):
        want_objects, want_prefixes, _ = _expected(_KEYS, "", delimiter, "", 10_000)
        objects: list[str] = []
        prefixes: list[str] = []
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket="pages", Delimiter=delimiter, PaginationConfig={"PageSize": 3}
        )
        for page in pages:
            objects += [o["Key"] for o in page.get("Contents", [])]
            prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        assert objects == want_objects and prefixes == want_prefixes, delimiter
        v1_objects: list[str] = []
        for page in s3.get_paginator("list_objects").paginate(
            Bucket="pages", Delimiter=delimiter, PaginationConfig={"PageSize": 3}
        ):
            v1_objects += [o["Key"] for o in page.get("Contents", [])]
        assert v1_objects == want_objects, delimiter


async def test_ten_thousand_keys_page_through(s3: Any, dfs: Client) -> None:
    s3.create_bucket(Bucket="many")
    names = [f"d{d:02}/f{f:04}" for d in range(20) for f in range(500)]
    for d in range(20):
        await dfs.mkdir(f"{ROOT}/many/d{d:02}")
    sem = asyncio.Semaphore(64)

    async def make(name: str) -> None:
        async with sem:
            await dfs.create(f"{ROOT}/many/{name}")  # empty: the test cluster is small

    await asyncio.gather(*(make(n) for n in names))
    listed: list[str] = []
    pages = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="many"):
        listed += [o["Key"] for o in page["Contents"]]
        pages += 1
        assert all(o["Size"] == 0 for o in page["Contents"])
    assert listed == names and pages == 10
    top = s3.list_objects_v2(Bucket="many", Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == [f"d{d:02}/" for d in range(20)]


def test_ranges_and_conditions(s3: Any) -> None:
    s3.create_bucket(Bucket="rng")
    data = bytes(range(256)) * 1000
    etag = s3.put_object(Bucket="rng", Key="k", Body=data)["ETag"]
    for header, want in (
        ("bytes=0-9", data[:10]),
        ("bytes=1000-", data[1000:]),
        ("bytes=-300", data[-300:]),
        ("bytes=255990-999999", data[255990:]),
    ):
        got = s3.get_object(Bucket="rng", Key="k", Range=header)
        assert got["Body"].read() == want, header
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["ContentRange"].endswith(f"/{len(data)}")
    with pytest.raises(ClientError) as unsatisfiable:
        s3.get_object(Bucket="rng", Key="k", Range=f"bytes={len(data)}-")
    assert _code(unsatisfiable) == "InvalidRange"
    assert s3.get_object(Bucket="rng", Key="k", IfMatch=etag)["Body"].read() == data
    with pytest.raises(ClientError) as failed:
        s3.get_object(Bucket="rng", Key="k", IfMatch='"0123"')
    assert _code(failed) == "PreconditionFailed"
    with pytest.raises(ClientError) as unmodified:
        s3.get_object(Bucket="rng", Key="k", IfNoneMatch=etag)
    assert unmodified.value.response["Error"]["Code"] == "304"
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    with pytest.raises(ClientError) as since:
        s3.get_object(Bucket="rng", Key="k", IfModifiedSince=later)
    assert since.value.response["Error"]["Code"] == "304"
    earlier = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    with pytest.raises(ClientError) as unmodified_since:
        s3.get_object(Bucket="rng", Key="k", IfUnmodifiedSince=earlier)
    assert _code(unmodified_since) == "PreconditionFailed"


def test_presigned_urls_work_until_they_expire(s3: Any, gateway: GatewayProcess) -> None:
    s3.create_bucket(Bucket="pre")
    put = s3.generate_presigned_url(
        "put_object", Params={"Bucket": "pre", "Key": "x y"}, ExpiresIn=60
    )
    status, body = _http("PUT", put, b"presigned")
    assert status == 200, body
    get = s3.generate_presigned_url(
        "get_object", Params={"Bucket": "pre", "Key": "x y"}, ExpiresIn=60
    )
    assert _http("GET", get) == (200, b"presigned")
    an_hour_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    # Signed an hour ago (by botocore's own signer or by awscrt's, whichever it uses).
    with (
        unittest.mock.patch("botocore.auth.get_current_datetime", return_value=an_hour_ago),
        unittest.mock.patch("botocore.crt.auth.get_current_datetime", return_value=an_hour_ago),
    ):
        expired = s3.generate_presigned_url(
            "get_object", Params={"Bucket": "pre", "Key": "x y"}, ExpiresIn=600
        )
    status, body = _http("GET", expired)
    assert status == 403 and b"<Code>AccessDenied</Code>" in body and b"expired" in body
    tampered = get.replace("x%20y", "x%20z")
    status, body = _http("GET", tampered)
    assert status == 403 and b"SignatureDoesNotMatch" in body


def _http(
    method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_bad_credentials_and_anonymous_requests_are_refused(
    s3: Any, gateway: GatewayProcess, alice_keys: tuple[str, str]
) -> None:
    s3.create_bucket(Bucket="auth")
    wrong_secret = s3_client(gateway.url, alice_keys[0], "x" * 40)
    with pytest.raises(ClientError) as mismatch:
        wrong_secret.list_objects_v2(Bucket="auth")
    assert _code(mismatch) == "SignatureDoesNotMatch"
    unknown = s3_client(gateway.url, "PFSAAAAAAAAAAAAAAAAA", alice_keys[1])
    with pytest.raises(ClientError) as no_key:
        unknown.list_buckets()
    assert _code(no_key) == "InvalidAccessKeyId"
    status, body = _http("GET", f"{gateway.url}/auth")
    assert status == 403 and b"<Code>AccessDenied</Code>" in body
    status, body = _http(
        "GET", f"{gateway.url}/auth", headers={"Authorization": "AWS4-HMAC-SHA256 nonsense"}
    )
    assert status == 400 and b"AuthorizationHeaderMalformed" in body
    status, body = _http("GET", f"{gateway.url}/auth", headers={"Authorization": "AWS key:sig"})
    assert status == 400 and b"Signature Version 2" in body


def test_keys_that_are_no_paths_are_refused(s3: Any) -> None:
    s3.create_bucket(Bucket="keys")
    for key in ("a/../b", "a//b", "./a", "x" * 1025, "a/" + "n" * 256):
        with pytest.raises(ClientError) as refused:
            s3.put_object(Bucket="keys", Key=key, Body=b"x")
        assert _code(refused) in ("InvalidArgument", "KeyTooLongError"), key
    s3.put_object(Bucket="keys", Key="file", Body=b"x")
    with pytest.raises(ClientError) as conflict:
        s3.put_object(Bucket="keys", Key="file/below", Body=b"x")
    assert _code(conflict) == "PathConflict"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="keys")["Contents"]] == ["file"]


def test_an_upload_cut_short_leaves_the_old_object(s3: Any, gateway: GatewayProcess) -> None:
    s3.create_bucket(Bucket="cut")
    s3.put_object(Bucket="cut", Key="k", Body=b"old")
    url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": "cut", "Key": "k"}, ExpiresIn=60
    )
    parsed = urllib.parse.urlsplit(url)
    assert parsed.hostname is not None and parsed.port is not None
    with socket.create_connection((parsed.hostname, parsed.port), timeout=30) as sock:
        head = (
            f"PUT {parsed.path}?{parsed.query} HTTP/1.1\r\nHost: {parsed.netloc}\r\n"
            "Content-Length: 1000000\r\n\r\n"
        )
        sock.sendall(head.encode() + b"n" * 400_000)
        assert s3.get_object(Bucket="cut", Key="k")["Body"].read() == b"old"
    assert s3.get_object(Bucket="cut", Key="k")["Body"].read() == b"old"
    # Another upload of the key is not held up by the one cut off.
    s3.put_object(Bucket="cut", Key="k", Body=b"new")
    assert s3.get_object(Bucket="cut", Key="k")["Body"].read() == b"new"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="cut")["Contents"]] == ["k"]
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["cut"]
    assert "Traceback" not in gateway.log()  # a client going away is no server error


def test_checksums_are_verified(s3: Any) -> None:
    s3.create_bucket(Bucket="sums")
    data = os.urandom(100_000)
    for algorithm in ("CRC32", "CRC32C", "SHA1", "SHA256"):
        put = s3.put_object(Bucket="sums", Key=algorithm, Body=data, ChecksumAlgorithm=algorithm)
        assert put[f"Checksum{algorithm}"]
        got = s3.get_object(Bucket="sums", Key=algorithm, ChecksumMode="ENABLED")
        assert (
            got["Body"].read() == data
            and got[f"Checksum{algorithm}"] == put[f"Checksum{algorithm}"]
        )
    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as bad_md5:
        s3.put_object(Bucket="sums", Key="md5", Body=data, ContentMD5=wrong)
    assert _code(bad_md5) == "BadDigest"
    with pytest.raises(ClientError) as bad_crc:
        s3.put_object(Bucket="sums", Key="crc", Body=data, ChecksumCRC32="AAAAAA==")
    assert _code(bad_crc) == "BadDigest"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="sums")["Contents"]]
    assert keys == ["CRC32", "CRC32C", "SHA1", "SHA256"]  # nothing of the refused ones


def test_streamed_uploads_in_aws_chunked_encoding(s3: Any) -> None:
    s3.create_bucket(Bucket="chunks")
    data = os.urandom(3_000_000)

    class Stream(io.RawIOBase):
        """Not seekable: the SDK must stream it."""

        def __init__(self) -> None:
            self._data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            return self._data.readinto(buffer)

    s3.upload_fileobj(Stream(), "chunks", "big", Config=TransferConfig(multipart_threshold=10**9))
    assert s3.get_object(Bucket="chunks", Key="big")["Body"].read() == data


def test_permissions_are_the_users(
    s3: Any, gateway: GatewayProcess, bob_keys: tuple[str, str]
) -> None:
    s3.create_bucket(Bucket="alices")
    s3.put_object(Bucket="alices", Key="k", Body=b"mine")
    bob = s3_client(gateway.url, *bob_keys)
    assert bob.get_object(Bucket="alices", Key="k")["Body"].read() == b"mine"  # mode 644
    for attempt in (
        lambda: bob.put_object(Bucket="alices", Key="k2", Body=b"x"),
        lambda: bob.delete_object(Bucket="alices", Key="k"),
        lambda: bob.delete_bucket(Bucket="alices"),
    ):
        with pytest.raises(ClientError) as refused:
            attempt()
        assert _code(refused) == "AccessDenied"
    assert s3.get_object(Bucket="alices", Key="k")["Body"].read() == b"mine"


def test_delete_objects_and_empty_directories(s3: Any) -> None:
    s3.create_bucket(Bucket="del")
    for key in ("a/1", "a/2", "b/1", "dir/"):
        s3.put_object(Bucket="del", Key=key, Body=b"" if key.endswith("/") else b"x")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="del")["Contents"]] == [
        "a/1",
        "a/2",
        "b/1",
        "dir/",
    ]
    assert s3.head_object(Bucket="del", Key="dir/")["ContentLength"] == 0
    answer = s3.delete_objects(
        Bucket="del", Delete={"Objects": [{"Key": k} for k in ("a/1", "a/2", "nope", "a/../x")]}
    )
    assert sorted(d["Key"] for d in answer["Deleted"]) == ["a/1", "a/2", "nope"]
    assert [e["Key"] for e in answer["Errors"]] == ["a/../x"]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="del")["Contents"]] == ["b/1", "dir/"]
    with pytest.raises(ClientError) as not_empty:
        s3.delete_bucket(Bucket="del")
    assert _code(not_empty) == "BucketNotEmpty"


def test_what_is_not_supported_says_so(s3: Any) -> None:
    s3.create_bucket(Bucket="nimp")
    s3.put_object(Bucket="nimp", Key="k", Body=b"x")
    for call in (
        lambda: s3.get_bucket_acl(Bucket="nimp"),
        lambda: s3.put_object_tagging(Bucket="nimp", Key="k", Tagging={"TagSet": []}),
        lambda: s3.put_bucket_versioning(
            Bucket="nimp", VersioningConfiguration={"Status": "Enabled"}
        ),
        lambda: s3.get_bucket_policy(Bucket="nimp"),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert _code(refused) == "NotImplemented"
    assert s3.get_bucket_versioning(Bucket="nimp").get("Status") is None
    assert s3.get_bucket_location(Bucket="nimp")["LocationConstraint"] is None


def test_pfs_gateway_s3_serves_in_the_foreground(
    data_cluster: DataCluster, s3_root: str, alice_keys: tuple[str, str], tmp_path: Path
) -> None:
    env = clean_env(tmp_path, data_cluster.namenode.address)
    command = [sys.executable, "-m", "plasmafs.cli", "gateway", "s3", "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [*command, "--root", s3_root], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "S3 gateway serving http://127.0.0.1:" in line, line
        url = line.split("serving ")[1].split()[0]
        s3 = s3_client(url, *alice_keys)
        s3.create_bucket(Bucket="cli")
        s3.put_object(Bucket="cli", Key="k", Body=b"v")
        assert s3.get_object(Bucket="cli", Key="k")["Body"].read() == b"v"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    bad = run_pfs(env, "gateway", "s3", "--listen", "nowhere")
    assert bad.rc == 2 and bad.err.startswith("pfs gateway s3: bad configuration: listen")
    not_a_directory = run_pfs(env, "gateway", "s3", "--root", "/nothing/here")
    assert not_a_directory.rc == 1 and len(not_a_directory.err.splitlines()) == 1
    assert "/nothing/here" in not_a_directory.err


def test_conditional_writes_and_each_users_buckets(
    s3: Any, gateway: GatewayProcess, bob_keys: tuple[str, str]
) -> None:
    s3.create_bucket(Bucket="cond")
    etag = s3.put_object(Bucket="cond", Key="k", Body=b"1", IfNoneMatch="*")["ETag"]
    with pytest.raises(ClientError) as exists:
        s3.put_object(Bucket="cond", Key="k", Body=b"2", IfNoneMatch="*")
    assert _code(exists) == "PreconditionFailed"
    with pytest.raises(ClientError) as stale:
        s3.put_object(Bucket="cond", Key="k", Body=b"2", IfMatch='"0000"')
    assert _code(stale) == "PreconditionFailed"
    assert s3.get_object(Bucket="cond", Key="k")["Body"].read() == b"1"
    s3.put_object(Bucket="cond", Key="k", Body=b"3", IfMatch=etag)
    assert s3.get_object(Bucket="cond", Key="k")["Body"].read() == b"3"
    with pytest.raises(ClientError) as missing:
        s3.put_object(Bucket="cond", Key="none", Body=b"x", IfMatch="*")
    assert _code(missing) == "NoSuchKey"
    bob = s3_client(gateway.url, *bob_keys)
    bob.create_bucket(Bucket="bobs")
    s3.create_bucket(Bucket="more")
    assert [b["Name"] for b in bob.list_buckets()["Buckets"]] == ["bobs"]
    first = s3.list_buckets(MaxBuckets=1)
    assert [b["Name"] for b in first["Buckets"]] == ["cond"]
    rest = s3.list_buckets(MaxBuckets=1, ContinuationToken=first["ContinuationToken"])
    assert [b["Name"] for b in rest["Buckets"]] == ["more"] and "ContinuationToken" not in rest
