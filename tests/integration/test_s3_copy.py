"""Server-side copies through the S3 gateway with boto3 against a real cluster:
CopyObject (COPY and REPLACE, onto itself, source conditions, refusals, other users)
and UploadPartCopy (block-aligned ranges copied by the datanodes, an unaligned one
through the gateway, boto3's managed multipart copy, bad ranges). The copies are files
of their own: new blocks, the source removed afterwards changes nothing."""

from __future__ import annotations

import datetime
import hashlib
import os
from email.utils import format_datetime
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from plasmafs.client import SyncClient
from tests.conftest import DataCluster
from tests.support.gateway import MIN_TEST_PART, ROOT, GatewayProcess, s3_client


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def _blocks(lib: SyncClient, path: str) -> set[tuple[int, int]]:
    return {(r.datanode_id, r.block_start) for e in lib.blocks(path).extents for r in e.replicas}


def test_copy_object_keeps_content_etag_and_attributes_in_new_blocks(
    s3: Any, data_cluster: DataCluster
) -> None:
    bs = data_cluster.blocksize
    data = os.urandom(5 * bs + 7)
    s3.create_bucket(Bucket="src")
    s3.create_bucket(Bucket="dst")
    put = s3.put_object(Bucket="src", Key="a/obj", Body=data, ContentType="x/one",
                        Metadata={"origin": "put"})  # fmt: skip
    copied = s3.copy_object(
        Bucket="dst", Key="b/c/copy", CopySource={"Bucket": "src", "Key": "a/obj"}
    )
    assert copied["CopyObjectResult"]["ETag"] == put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    got = s3.get_object(Bucket="dst", Key="b/c/copy")
    assert got["Body"].read() == data
    assert (got["ETag"], got["ContentType"], got["Metadata"]) == (
        put["ETag"], "x/one", {"origin": "put"},
    )  # fmt: skip
    with SyncClient(data_cluster.namenode.address) as lib:
        source, copy = _blocks(lib, f"{ROOT}/src/a/obj"), _blocks(lib, f"{ROOT}/dst/b/c/copy")
    assert copy and source.isdisjoint(copy)
    s3.delete_object(Bucket="src", Key="a/obj")
    assert s3.get_object(Bucket="dst", Key="b/c/copy")["Body"].read() == data
    listed = s3.list_objects_v2(Bucket="dst")["Contents"]
    assert [(o["Key"], o["ETag"], o["Size"]) for o in listed] == [
        ("b/c/copy", put["ETag"], len(data))
    ]


def test_replace_directive_and_a_copy_onto_itself(s3: Any) -> None:
    s3.create_bucket(Bucket="meta")
    put = s3.put_object(Bucket="meta", Key="k", Body=b"x" * 100_000, Metadata={"a": "1"})
    s3.copy_object(Bucket="meta", Key="k2", CopySource="meta/k", MetadataDirective="REPLACE",
                   ContentType="x/new", Metadata={"b": "2"})  # fmt: skip
    head = s3.head_object(Bucket="meta", Key="k2")
    assert (head["ContentType"], head["Metadata"], head["ETag"]) == (
        "x/new",
        {"b": "2"},
        put["ETag"],
    )
    with pytest.raises(ClientError) as itself:
        s3.copy_object(Bucket="meta", Key="k", CopySource="meta/k")
    assert _code(itself) == "InvalidRequest"
    s3.copy_object(Bucket="meta", Key="k", CopySource="meta/k", MetadataDirective="REPLACE",
                   Metadata={"c": "3"})  # fmt: skip
    got = s3.get_object(Bucket="meta", Key="k")
    assert (got["Body"].read(), got["Metadata"], got["ETag"]) == (
        b"x" * 100_000,
        {"c": "3"},
        put["ETag"],
    )
    with pytest.raises(ClientError) as directive:
        s3.copy_object(Bucket="meta", Key="k3", CopySource="meta/k", MetadataDirective="MOVE")
    assert _code(directive) == "InvalidArgument"


def test_source_conditions_versions_and_missing_sources(s3: Any) -> None:
    s3.create_bucket(Bucket="cond")
    etag = s3.put_object(Bucket="cond", Key="k", Body=b"content")["ETag"]
    source = {"Bucket": "cond", "Key": "k"}
    s3.copy_object(Bucket="cond", Key="ok1", CopySource=source, CopySourceIfMatch=etag)
    s3.copy_object(Bucket="cond", Key="ok2", CopySource=source, CopySourceIfNoneMatch='"other"')
    s3.copy_object(Bucket="cond", Key="ok3", CopySource={**source, "VersionId": "null"})
    future = format_datetime(datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC), usegmt=True)
    past = format_datetime(datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC), usegmt=True)
    for failing, condition in (
        ({"CopySourceIfMatch": '"other"'}, "If-Match"),
        ({"CopySourceIfNoneMatch": etag}, "If-None-Match"),
        ({"CopySourceIfModifiedSince": future}, "If-Modified-Since"),
        ({"CopySourceIfUnmodifiedSince": past}, "If-Unmodified-Since"),
    ):
        with pytest.raises(ClientError) as failed:
            s3.copy_object(Bucket="cond", Key="no", CopySource=source, **failing)
        assert _code(failed) == "PreconditionFailed"
        assert failed.value.response["Error"]["Condition"] == f"x-amz-copy-source-{condition}"
    for bad_source, code in (
        ({"Bucket": "cond", "Key": "missing"}, "NoSuchKey"),
        ({"Bucket": "no-such-bucket", "Key": "k"}, "NoSuchBucket"),
        ({**source, "VersionId": "3sL4kqtJlcpXroDTDmJ"}, "NoSuchVersion"),
    ):
        with pytest.raises(ClientError) as refused:
            s3.copy_object(Bucket="cond", Key="no", CopySource=bad_source)
        assert _code(refused) == code
    with pytest.raises(ClientError) as no_bucket:
        s3.copy_object(Bucket="no-such-bucket", Key="x", CopySource=source)
    assert _code(no_bucket) == "NoSuchBucket"
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="cond")["Contents"]) == [
        "k", "ok1", "ok2", "ok3",
    ]  # fmt: skip


def test_another_user_copies_what_it_may_read_into_what_it_may_write(
    s3: Any, gateway: GatewayProcess, bob_keys: tuple[str, str]
) -> None:
    s3.create_bucket(Bucket="alices")
    s3.put_object(Bucket="alices", Key="k", Body=b"mine")
    bob = s3_client(gateway.url, *bob_keys)
    bob.create_bucket(Bucket="bobs")
    bob.copy_object(Bucket="bobs", Key="k", CopySource="alices/k")  # mode 644: readable
    assert bob.get_object(Bucket="bobs", Key="k")["Body"].read() == b"mine"
    with pytest.raises(ClientError) as refused:
        bob.copy_object(Bucket="alices", Key="k2", CopySource="bobs/k")
    assert _code(refused) == "AccessDenied"


def test_upload_part_copy_by_ranges_and_boto3_managed_copy(
    s3: Any, data_cluster: DataCluster
) -> None:
    bs = data_cluster.blocksize
    data = os.urandom(4 * bs + 999)
    s3.create_bucket(Bucket="parts")
    s3.put_object(Bucket="parts", Key="src", Body=data)
    upload_id = s3.create_multipart_upload(Bucket="parts", Key="dst")["UploadId"]
    ranges = [(0, 2 * bs), (2 * bs, 4 * bs + 999)]  # on block boundaries: the datanodes copy
    etags = []
    for number, (first, end) in enumerate(ranges, 1):
        answer = s3.upload_part_copy(Bucket="parts", Key="dst", UploadId=upload_id,
                                     PartNumber=number, CopySource="parts/src",
                                     CopySourceRange=f"bytes={first}-{end - 1}")  # fmt: skip
        etags.append(answer["CopyPartResult"]["ETag"])
    listed = s3.list_parts(Bucket="parts", Key="dst", UploadId=upload_id)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed] == [
        (1, etags[0], 2 * bs), (2, etags[1], 2 * bs + 999),
    ]  # fmt: skip
    s3.complete_multipart_upload(Bucket="parts", Key="dst", UploadId=upload_id, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]
    })  # fmt: skip
    assert s3.get_object(Bucket="parts", Key="dst")["Body"].read() == data

    # A range off the block boundaries goes through the gateway; the whole object too.
    upload_id = s3.create_multipart_upload(Bucket="parts", Key="odd")["UploadId"]
    s3.upload_part_copy(Bucket="parts", Key="odd", UploadId=upload_id, PartNumber=1,
                        CopySource="parts/src", CopySourceRange="bytes=5-99999")  # fmt: skip
    whole = s3.upload_part_copy(Bucket="parts", Key="odd", UploadId=upload_id, PartNumber=2,
                                CopySource="parts/src")  # fmt: skip
    assert whole["CopyPartResult"]["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    refusals = [("bytes=0-99999999", "InvalidRange"), ("bytes=0", "InvalidArgument"),
                ("bytes=0-2,3-5", "InvalidArgument"), ("0-2", "InvalidArgument")]  # fmt: skip
    for bad_range, code in refusals:
        with pytest.raises(ClientError) as refused:
            s3.upload_part_copy(Bucket="parts", Key="odd", UploadId=upload_id, PartNumber=3,
                                CopySource="parts/src", CopySourceRange=bad_range)  # fmt: skip
        assert _code(refused) == code
    parts = s3.list_parts(Bucket="parts", Key="odd", UploadId=upload_id)["Parts"]
    done = s3.complete_multipart_upload(Bucket="parts", Key="odd", UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]}
                                   for p in parts]})  # fmt: skip
    assert done["ETag"].endswith('-2"')
    assert s3.get_object(Bucket="parts", Key="odd")["Body"].read() == data[5:100_000] + data

    # boto3's managed copy: UploadPartCopy of every chunk (5 MiB at least), then Complete.
    big = os.urandom(6 * 1024 * 1024 + 999)
    s3.put_object(Bucket="parts", Key="big", Body=big)
    config = TransferConfig(multipart_threshold=MIN_TEST_PART, multipart_chunksize=5 << 20)
    s3.copy({"Bucket": "parts", "Key": "big"}, "parts", "managed", Config=config)
    assert s3.head_object(Bucket="parts", Key="managed")["ETag"].endswith('-2"')
    assert s3.get_object(Bucket="parts", Key="managed")["Body"].read() == big
