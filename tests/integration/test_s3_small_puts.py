"""Small PUTs through the S3 gateway on a cluster that keeps small contents inline: a
body no larger than the inline limit is checked whole, then created, filled, given
its attributes and renamed over its key in one transaction (one commit, counted by the
namenode), with the same rules as every PUT: new directories, conditions, conflicts,
bad digests leaving nothing."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from plasmafs.client import Client, SyncClient
from tests.conftest import DataCluster, connected_client
from tests.support.gateway import ROOT, GatewayProcess, s3_client


@pytest.fixture
async def ifs_root(inline_cluster: DataCluster) -> AsyncIterator[Client]:
    async with connected_client(inline_cluster.namenode.address) as client:
        await client.mkdir(ROOT)
        await client.chmod(ROOT, 0o1777)
        yield client


@pytest.fixture
def inline_gateway(
    inline_cluster: DataCluster, ifs_root: Client, tmp_path: Path, cluster_pki: Path
) -> Iterator[GatewayProcess]:
    work = tmp_path / "gateway"
    work.mkdir()
    process = GatewayProcess(
        inline_cluster.namenode.address, work, cluster_pki / "root.token", root=ROOT
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def small_s3(inline_gateway: GatewayProcess, ifs_root: Client) -> Any:
    key, secret = await (await ifs_root.s3_keys()).create("alice")
    return s3_client(inline_gateway.url, key.access_key_id, secret)


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def test_a_small_put_is_one_commit_and_follows_every_put_rule(
    small_s3: Any, inline_cluster: DataCluster
) -> None:
    s3 = small_s3
    s3.create_bucket(Bucket="small")
    body = b"x" * 3000
    with SyncClient(inline_cluster.namenode.address) as lib:
        s3.put_object(Bucket="small", Key="first", Body=b"warm")  # the inode batch
        before = lib.request_counts()
        put = s3.put_object(Bucket="small", Key="one", Body=body, Metadata={"m": "1"})
        after = lib.request_counts()
        assert after["commit"] - before["commit"] == 1
        assert lib.blocks(f"{ROOT}/small/one").inline == body  # no datanode involved
        staged = lib.listdir(f"{ROOT}/.s3-staging")
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
    got = s3.get_object(Bucket="small", Key="one")
    assert (got["Body"].read(), got["Metadata"], got["ETag"]) == (body, {"m": "1"}, put["ETag"])
    assert [name for name in staged if not name.startswith(("mpu.", "done."))] == []

    s3.put_object(Bucket="small", Key="deep/er/key", Body=b"made its directories")
    deep = s3.get_object(Bucket="small", Key="deep/er/key")["Body"].read()
    assert deep == b"made its directories"
    s3.put_object(Bucket="small", Key="one", Body=b"replaced")
    assert s3.get_object(Bucket="small", Key="one")["Body"].read() == b"replaced"
    s3.put_object(Bucket="small", Key="empty", Body=b"")
    assert s3.get_object(Bucket="small", Key="empty")["Body"].read() == b""

    with pytest.raises(ClientError) as exists:
        s3.put_object(Bucket="small", Key="one", Body=b"no", IfNoneMatch="*")
    assert _code(exists) == "PreconditionFailed"
    with pytest.raises(ClientError) as conflict:
        s3.put_object(Bucket="small", Key="deep/er", Body=b"a directory is there")
    assert _code(conflict) == "PathConflict"
    with pytest.raises(ClientError) as file_above:
        s3.put_object(Bucket="small", Key="one/below", Body=b"a file is there")
    assert _code(file_above) == "PathConflict"
    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as digest:
        s3.put_object(Bucket="small", Key="bad", Body=b"content", ContentMD5=wrong)
    assert _code(digest) == "BadDigest"
    with pytest.raises(ClientError) as no_bucket:
        s3.put_object(Bucket="nobucket", Key="k", Body=b"x")
    assert _code(no_bucket) == "NoSuchBucket"
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="small")["Contents"])
    assert keys == ["deep/er/key", "empty", "first", "one"]
    assert s3.get_object(Bucket="small", Key="one")["Body"].read() == b"replaced"


def test_a_bucket_with_a_quota_answers_quota_exceeded_and_keeps_nothing(
    small_s3: Any, inline_cluster: DataCluster
) -> None:
    s3 = small_s3
    s3.create_bucket(Bucket="limited")
    with SyncClient(inline_cluster.namenode.address) as lib:
        lib.set_quota(f"{ROOT}/limited", entries=3)  # the bucket and two keys
        s3.put_object(Bucket="limited", Key="a", Body=b"a")
        s3.put_object(Bucket="limited", Key="b", Body=b"b" * 100_000)  # in blocks
        for body in (b"small", b"c" * 100_000):
            with pytest.raises(ClientError) as refused:
                s3.put_object(Bucket="limited", Key="c", Body=body)
            assert _code(refused) == "QuotaExceeded"
            assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        s3.put_object(Bucket="limited", Key="a", Body=b"replacing takes no entry")
        staged = lib.listdir(f"{ROOT}/.s3-staging")
        assert sorted(lib.listdir(f"{ROOT}/limited")) == ["a", "b"]
    assert [name for name in staged if not name.startswith(("mpu.", "done."))] == []
