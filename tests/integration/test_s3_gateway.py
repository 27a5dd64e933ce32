"""The S3 gateway with boto3 against a real cluster: buckets, objects, ranges,
conditions, metadata, listings with delimiters and pages, presigned URLs, and the
refusals of bad signatures and keys."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from plasmafs.client import Client, SyncClient
from tests.conftest import DataCluster
from tests.support.gateway import GatewayProcess, s3_client

ROOT = "/s3"


@pytest.fixture
async def s3_root(dfs: Client) -> str:
    """The gateway's root: a directory anyone may make buckets in (sticky, as /tmp)."""
    await dfs.mkdir(ROOT)
    await dfs.chmod(ROOT, 0o1777)
    return ROOT


@pytest.fixture
def gateway(
    data_cluster: DataCluster, tmp_path: Path, cluster_pki: Path, s3_root: str
) -> Iterator[GatewayProcess]:
    work = tmp_path / "gateway"
    work.mkdir()
    process = GatewayProcess(
        data_cluster.namenode.address, work, cluster_pki / "root.token", root=s3_root
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def alice_keys(dfs: Client) -> tuple[str, str]:
    key, secret = await (await dfs.s3_keys()).create("alice")
    return key.access_key_id, secret


@pytest.fixture
def s3(gateway: GatewayProcess, alice_keys: tuple[str, str]) -> Any:
    return s3_client(gateway.url, *alice_keys)


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
