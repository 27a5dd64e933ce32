"""Multipart uploads through the S3 gateway with boto3 against a real cluster: parts in
any order, sent again, listed in pages; completing makes the parts' blocks the
object's without a copy (and copies once when parts do not end on block boundaries);
S3's ETag, metadata and refusals; abort; other users' uploads."""

from __future__ import annotations

import base64
import hashlib
import io
import os
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from plasmafs.client import SyncClient
from tests.conftest import DataCluster
from tests.support.gateway import MIN_TEST_PART, ROOT, GatewayProcess, s3_client

STAGING = f"{ROOT}/.s3-staging"


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return exc.value.response["Error"]["Code"]


def _multipart_etag(parts: list[bytes]) -> str:
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


def _placements(lib: SyncClient, path: str) -> list[tuple[str, int]]:
    return [(r.address, r.block_start) for e in lib.blocks(path).extents for r in e.replicas]


def test_parts_become_the_objects_blocks_without_a_copy(s3: Any, data_cluster: DataCluster) -> None:
    s3.create_bucket(Bucket="multi")
    bs = data_cluster.blocksize
    parts = [os.urandom(2 * bs), os.urandom(3 * bs), os.urandom(bs + 77)]
    created = s3.create_multipart_upload(
        Bucket="multi", Key="dir/big.bin", ContentType="x/parts", Metadata={"origin": "mp"}
    )
    upload_id = created["UploadId"]
    etags = {}
    for number in (3, 1, 2):  # any order
        answer = s3.upload_part(Bucket="multi", Key="dir/big.bin", UploadId=upload_id,
                                PartNumber=number, Body=parts[number - 1])  # fmt: skip
        assert answer["ETag"] == f'"{hashlib.md5(parts[number - 1]).hexdigest()}"'
        etags[number] = answer["ETag"]
    with SyncClient(data_cluster.namenode.address) as lib:
        directory = f"{STAGING}/mpu.{upload_id}"
        before = [p for n in (1, 2, 3) for p in _placements(lib, f"{directory}/{n:05d}")]
        done = s3.complete_multipart_upload(
            Bucket="multi", Key="dir/big.bin", UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etags[n]} for n in (1, 2, 3)]},
        )  # fmt: skip
        assert done["ETag"] == _multipart_etag(parts)
        # The parts' blocks, where they were written: nothing was copied.
        assert _placements(lib, f"{ROOT}/multi/dir/big.bin") == before
        assert not lib.exists(directory)
    got = s3.get_object(Bucket="multi", Key="dir/big.bin")
    assert got["Body"].read() == b"".join(parts)
    assert got["ETag"] == done["ETag"] and got["ContentType"] == "x/parts"
    assert got["Metadata"] == {"origin": "mp"}
    ranged = s3.get_object(
        Bucket="multi", Key="dir/big.bin", Range=f"bytes={2 * bs - 5}-{2 * bs + 4}"
    )
    assert ranged["Body"].read() == (b"".join(parts))[2 * bs - 5 : 2 * bs + 5]
    listed = s3.list_objects_v2(Bucket="multi")["Contents"]
    assert [(o["Key"], o["ETag"], o["Size"]) for o in listed] == [
        ("dir/big.bin", done["ETag"], sum(map(len, parts)))
    ]
    assert s3.list_multipart_uploads(Bucket="multi").get("Uploads", []) == []


def test_a_part_sent_again_replaces_the_first_and_parts_list_in_pages(s3: Any) -> None:
    s3.create_bucket(Bucket="again")
    upload_id = s3.create_multipart_upload(Bucket="again", Key="k")["UploadId"]
    bodies = {n: os.urandom(MIN_TEST_PART) for n in range(1, 6)}
    for n, body in bodies.items():
        s3.upload_part(Bucket="again", Key="k", UploadId=upload_id, PartNumber=n, Body=b"old")
        s3.upload_part(Bucket="again", Key="k", UploadId=upload_id, PartNumber=n, Body=body)
    seen, marker = [], 0
    while True:
        page = s3.list_parts(Bucket="again", Key="k", UploadId=upload_id, MaxParts=2,
                             PartNumberMarker=marker)  # fmt: skip
        seen += [(p["PartNumber"], p["ETag"], p["Size"]) for p in page["Parts"]]
        if not page["IsTruncated"]:
            break
        marker = page["NextPartNumberMarker"]
    assert seen == [(n, f'"{hashlib.md5(b).hexdigest()}"', len(b)) for n, b in bodies.items()]
    # Complete with some of them: the others go with the upload.
    chosen = [1, 2, 5]
    s3.complete_multipart_upload(
        Bucket="again", Key="k", UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": seen[n - 1][1]} for n in chosen]},
    )  # fmt: skip
    body = s3.get_object(Bucket="again", Key="k")["Body"].read()
    assert body == b"".join(bodies[n] for n in chosen)


def test_parts_off_block_boundaries_are_copied_once(s3: Any, data_cluster: DataCluster) -> None:
    s3.create_bucket(Bucket="odd")
    parts = [os.urandom(MIN_TEST_PART + 1000), os.urandom(MIN_TEST_PART + 3), b"tail"]
    upload_id = s3.create_multipart_upload(Bucket="odd", Key="k")["UploadId"]
    etags = []
    for n, part in enumerate(parts):
        sent = s3.upload_part(
            Bucket="odd", Key="k", UploadId=upload_id, PartNumber=n + 1, Body=part
        )
        etags.append(sent["ETag"])
    done = s3.complete_multipart_upload(
        Bucket="odd", Key="k", UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]},
    )  # fmt: skip
    assert done["ETag"] == _multipart_etag(parts)
    got = s3.get_object(Bucket="odd", Key="k")
    assert got["Body"].read() == b"".join(parts) and got["ETag"] == done["ETag"]
    with SyncClient(data_cluster.namenode.address) as lib:
        assert not [n for n in lib.listdir(STAGING) if n.startswith("mpu.")]


def test_boto3_transfers_upload_and_download_in_parts(s3: Any) -> None:
    s3.create_bucket(Bucket="xfer")
    chunk = 5 * 1024 * 1024  # s3transfer's smallest part
    data = os.urandom(2 * chunk + 4321)
    config = TransferConfig(multipart_threshold=chunk, multipart_chunksize=chunk)
    s3.upload_fileobj(io.BytesIO(data), "xfer", "file", Config=config)
    head = s3.head_object(Bucket="xfer", Key="file")
    pieces = [data[k : k + chunk] for k in range(0, len(data), chunk)]
    assert head["ETag"] == _multipart_etag(pieces) and head["ContentLength"] == len(data)
    out = io.BytesIO()
    s3.download_fileobj("xfer", "file", out, Config=config)
    assert out.getvalue() == data


def test_refusals_leave_the_upload_as_it_was(s3: Any) -> None:
    s3.create_bucket(Bucket="bad")
    upload_id = s3.create_multipart_upload(Bucket="bad", Key="k")["UploadId"]
    small, big = os.urandom(1000), os.urandom(MIN_TEST_PART)
    e1 = s3.upload_part(Bucket="bad", Key="k", UploadId=upload_id, PartNumber=1, Body=small)
    e2 = s3.upload_part(Bucket="bad", Key="k", UploadId=upload_id, PartNumber=2, Body=big)
    e3 = s3.upload_part(Bucket="bad", Key="k", UploadId=upload_id, PartNumber=3, Body=big)

    def complete(parts: list[tuple[int, str]], upload: str = upload_id, key: str = "k") -> None:
        s3.complete_multipart_upload(
            Bucket="bad", Key=key, UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
        )  # fmt: skip

    for parts, code in (
        ([(1, e1["ETag"]), (2, e2["ETag"])], "EntityTooSmall"),
        ([(3, e3["ETag"]), (2, e2["ETag"])], "InvalidPartOrder"),
        ([(2, e1["ETag"])], "InvalidPart"),
        ([(4, e3["ETag"])], "InvalidPart"),
    ):
        with pytest.raises(ClientError) as refused:
            complete(parts)
        assert _code(refused) == code

    def part(number: int, **more: Any) -> None:
        s3.upload_part(Bucket="bad", Key="k", UploadId=upload_id, PartNumber=number, **more)

    for call, code in (
        (lambda: complete([(2, e2["ETag"])], upload="A" * 32), "NoSuchUpload"),
        (lambda: complete([(2, e2["ETag"])], key="other"), "NoSuchUpload"),
        (lambda: part(0, Body=b"x"), "InvalidArgument"),
        (lambda: part(10001, Body=b"x"), "InvalidArgument"),
        (lambda: part(4, Body=b"x", ContentMD5="AAAAAAAAAAAAAAAAAAAAAA=="), "BadDigest"),
        (lambda: s3.create_multipart_upload(Bucket="nobucket", Key="k"), "NoSuchBucket"),
        (lambda: s3.create_multipart_upload(Bucket="bad", Key="a/../b"), "InvalidArgument"),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert _code(refused) == code
    with pytest.raises(ClientError):
        s3.head_object(Bucket="bad", Key="k")  # nothing became visible
    listed = s3.list_parts(Bucket="bad", Key="k", UploadId=upload_id)["Parts"]
    assert [p["PartNumber"] for p in listed] == [1, 2, 3]
    complete([(2, e2["ETag"]), (3, e3["ETag"])])
    assert s3.get_object(Bucket="bad", Key="k")["Body"].read() == big + big


def test_a_completion_refused_at_the_key_leaves_the_upload_for_another_try(s3: Any) -> None:
    s3.create_bucket(Bucket="retry")
    s3.put_object(Bucket="retry", Key="a/b", Body=b"in the way")
    s3.put_object(Bucket="retry", Key="c", Body=b"there already")
    parts = [os.urandom(MIN_TEST_PART), os.urandom(MIN_TEST_PART)]
    for key, refusal, code in (("a", {}, "PathConflict"),
                               ("c", {"IfNoneMatch": "*"}, "PreconditionFailed")):  # fmt: skip
        upload_id = s3.create_multipart_upload(Bucket="retry", Key=key)["UploadId"]
        etags = [
            s3.upload_part(Bucket="retry", Key=key, UploadId=upload_id, PartNumber=n,
                           Body=body)["ETag"]
            for n, body in enumerate(parts, 1)
        ]  # fmt: skip
        named = {"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]}
        with pytest.raises(ClientError) as refused:
            s3.complete_multipart_upload(Bucket="retry", Key=key, UploadId=upload_id,
                                         MultipartUpload=named, **refusal)  # fmt: skip
        assert _code(refused) == code
        listed = s3.list_parts(Bucket="retry", Key=key, UploadId=upload_id)["Parts"]
        assert [(p["PartNumber"], p["Size"]) for p in listed] == [
            (1, MIN_TEST_PART),
            (2, MIN_TEST_PART),
        ]
        if key == "a":
            s3.delete_object(Bucket="retry", Key="a/b")
        s3.complete_multipart_upload(Bucket="retry", Key=key, UploadId=upload_id,
                                     MultipartUpload=named)  # fmt: skip
        assert s3.get_object(Bucket="retry", Key=key)["Body"].read() == b"".join(parts)


def test_abort_and_the_list_of_uploads(s3: Any, gateway: GatewayProcess, bob_keys: Any) -> None:
    s3.create_bucket(Bucket="ups")
    ids = {key: s3.create_multipart_upload(Bucket="ups", Key=key)["UploadId"]
           for key in ("a/1", "a/2", "b", "c/d/e")}  # fmt: skip
    second = s3.create_multipart_upload(Bucket="ups", Key="b")["UploadId"]
    listed = s3.list_multipart_uploads(Bucket="ups")
    assert [(u["Key"], u["UploadId"]) for u in listed["Uploads"]] == [
        ("a/1", ids["a/1"]), ("a/2", ids["a/2"]), ("b", ids["b"]), ("b", second),
        ("c/d/e", ids["c/d/e"]),
    ]  # fmt: skip
    grouped = s3.list_multipart_uploads(Bucket="ups", Delimiter="/")
    assert [p["Prefix"] for p in grouped["CommonPrefixes"]] == ["a/", "c/"]
    assert [u["Key"] for u in grouped["Uploads"]] == ["b", "b"]
    page = s3.list_multipart_uploads(Bucket="ups", MaxUploads=3)
    assert page["IsTruncated"] and len(page["Uploads"]) == 3
    rest = s3.list_multipart_uploads(Bucket="ups", KeyMarker=page["NextKeyMarker"],
                                     UploadIdMarker=page["NextUploadIdMarker"])  # fmt: skip
    assert [u["UploadId"] for u in rest["Uploads"]] == [second, ids["c/d/e"]]
    assert [u["Key"] for u in s3.list_multipart_uploads(Bucket="ups", Prefix="a/")["Uploads"]] == [
        "a/1", "a/2"
    ]  # fmt: skip
    # Another user sees none of them and can touch none.
    bob = s3_client(gateway.url, *bob_keys)
    assert bob.list_multipart_uploads(Bucket="ups").get("Uploads", []) == []
    with pytest.raises(ClientError) as refused:
        bob.upload_part(Bucket="ups", Key="b", UploadId=second, PartNumber=1, Body=b"x")
    assert _code(refused) == "AccessDenied"
    with pytest.raises(ClientError) as refused:
        bob.abort_multipart_upload(Bucket="ups", Key="b", UploadId=second)
    assert _code(refused) == "AccessDenied"
    s3.abort_multipart_upload(Bucket="ups", Key="b", UploadId=second)
    with pytest.raises(ClientError) as gone:
        s3.upload_part(Bucket="ups", Key="b", UploadId=second, PartNumber=1, Body=b"x")
    assert _code(gone) == "NoSuchUpload"
    with pytest.raises(ClientError) as gone:
        s3.abort_multipart_upload(Bucket="ups", Key="b", UploadId=second)
    assert _code(gone) == "NoSuchUpload"
    remaining = s3.list_multipart_uploads(Bucket="ups")["Uploads"]
    assert second not in [u["UploadId"] for u in remaining] and len(remaining) == 4


def test_a_completion_sent_again_gets_the_same_answer(s3: Any) -> None:
    s3.create_bucket(Bucket="twice")
    upload_id = s3.create_multipart_upload(Bucket="twice", Key="k")["UploadId"]
    body = os.urandom(1000)
    etag = s3.upload_part(Bucket="twice", Key="k", UploadId=upload_id, PartNumber=1, Body=body)
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag["ETag"]}]}
    first = s3.complete_multipart_upload(
        Bucket="twice", Key="k", UploadId=upload_id, MultipartUpload=parts
    )
    again = s3.complete_multipart_upload(
        Bucket="twice", Key="k", UploadId=upload_id, MultipartUpload=parts
    )
    assert first["ETag"] == again["ETag"] == _multipart_etag([body])
    other = {"Parts": [{"PartNumber": 2, "ETag": etag["ETag"]}]}
    with pytest.raises(ClientError) as gone:
        s3.complete_multipart_upload(
            Bucket="twice", Key="k", UploadId=upload_id, MultipartUpload=other
        )
    assert _code(gone) == "NoSuchUpload"
    with pytest.raises(ClientError) as gone:
        s3.upload_part(Bucket="twice", Key="k", UploadId=upload_id, PartNumber=2, Body=b"x")
    assert _code(gone) == "NoSuchUpload"


def test_one_part_of_an_object_by_its_number(s3: Any) -> None:
    s3.create_bucket(Bucket="byparts")
    upload_id = s3.create_multipart_upload(Bucket="byparts", Key="k")["UploadId"]
    parts = [os.urandom(MIN_TEST_PART), os.urandom(MIN_TEST_PART), os.urandom(7)]
    listed = []
    for n, body in enumerate(parts, start=1):
        sent = s3.upload_part(
            Bucket="byparts", Key="k", UploadId=upload_id, PartNumber=n, Body=body
        )
        listed.append({"PartNumber": n, "ETag": sent["ETag"]})
    s3.complete_multipart_upload(
        Bucket="byparts", Key="k", UploadId=upload_id, MultipartUpload={"Parts": listed}
    )
    for n, body in enumerate(parts, start=1):
        got = s3.get_object(Bucket="byparts", Key="k", PartNumber=n)
        assert got["Body"].read() == body and got["PartsCount"] == 3
        assert s3.head_object(Bucket="byparts", Key="k", PartNumber=n)["ContentLength"] == len(body)
    for bad, code in ((4, "InvalidPart"), (0, "InvalidArgument")):
        with pytest.raises(ClientError) as refused:
            s3.get_object(Bucket="byparts", Key="k", PartNumber=bad)
        assert _code(refused) == code
    s3.put_object(Bucket="byparts", Key="single", Body=b"whole")
    assert s3.get_object(Bucket="byparts", Key="single", PartNumber=1)["Body"].read() == b"whole"
    with pytest.raises(ClientError) as refused:
        s3.get_object(Bucket="byparts", Key="single", PartNumber=2)
    assert _code(refused) == "InvalidPart"


@pytest.mark.parametrize(
    ("algorithm", "kind"),
    [("CRC32", "COMPOSITE"), ("CRC32C", "FULL_OBJECT"), ("CRC64NVME", "FULL_OBJECT"),
     ("SHA256", "COMPOSITE")],
)  # fmt: skip
def test_an_uploads_checksum_is_made_of_its_parts(s3: Any, algorithm: str, kind: str) -> None:
    """The SDK computes each part's checksum; the gateway checks them and makes the
    object's the way S3 does (botocore's own CRC code recomputes it here)."""
    import botocore.httpchecksum as hc

    s3.create_bucket(Bucket="sums")
    created = s3.create_multipart_upload(
        Bucket="sums", Key="k", ChecksumAlgorithm=algorithm, ChecksumType=kind
    )
    assert (created["ChecksumAlgorithm"], created["ChecksumType"]) == (algorithm, kind)
    upload_id = created["UploadId"]
    parts = [os.urandom(MIN_TEST_PART), os.urandom(1234)]
    listed, raw = [], []
    for n, body in enumerate(parts, start=1):
        sent = s3.upload_part(Bucket="sums", Key="k", UploadId=upload_id, PartNumber=n,
                              Body=body, ChecksumAlgorithm=algorithm)  # fmt: skip
        value = sent[f"Checksum{algorithm}"]
        listed.append({"PartNumber": n, "ETag": sent["ETag"], f"Checksum{algorithm}": value})
        raw.append(base64.b64decode(value))
    checker = hc._CHECKSUM_CLS[algorithm.lower()]()  # the SDK's own implementation
    if kind == "COMPOSITE":
        for piece in raw:
            checker.update(piece)
        expected = f"{base64.b64encode(checker.digest()).decode()}-2"
    else:
        checker.update(b"".join(parts))
        expected = base64.b64encode(checker.digest()).decode()
    with pytest.raises(ClientError) as refused:
        s3.complete_multipart_upload(
            Bucket="sums", Key="k", UploadId=upload_id, MultipartUpload={"Parts": listed},
            **{f"Checksum{algorithm}": base64.b64encode(b"\0" * len(raw[0])).decode()},
        )  # fmt: skip
    assert _code(refused) == "BadDigest"
    done = s3.complete_multipart_upload(
        Bucket="sums", Key="k", UploadId=upload_id, MultipartUpload={"Parts": listed}
    )
    assert done[f"Checksum{algorithm}"] == expected
    head = s3.head_object(Bucket="sums", Key="k", ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == expected and head["ChecksumType"] == kind
