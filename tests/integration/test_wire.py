"""The wire protocol with requests no well-behaved client sends: each gets its own
error, and the stream and other requests in the same frame carry on."""

from __future__ import annotations

import asyncio

from plasmafs.client import SyncClient
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from tests.support.cluster import NamenodeProcess, aio_channel, bearer, channel


async def _exchange(address: str, requests: list[pb.Request]) -> dict[int, pb.Response]:
    async with aio_channel(address) as channel:
        call = pb_grpc.NamenodeStub(channel).Session(metadata=bearer())
        for i, r in enumerate(requests, start=1):
            r.id = i
        await call.write(pb.ClientFrame(requests=requests))
        answers: dict[int, pb.Response] = {}
        while len(answers) < len(requests):
            frame = await asyncio.wait_for(call.read(), 10)
            for response in frame.responses:
                answers[response.id] = response
        await call.done_writing()
        return answers


def _req(txn: int = 0, **op: object) -> pb.Request:
    return pb.Request(txn=txn, **op)  # type: ignore[arg-type]


async def test_malformed_requests_get_their_own_errors(namenode: NamenodeProcess) -> None:
    requests = [
        _req(lookup=pb.Lookup(path=b"/\xff\xfe")),  # 1 not UTF-8
        _req(lookup=pb.Lookup(path=b"relative")),  # 2 not absolute
        _req(lookup=pb.Lookup(path=b"/a//b")),  # 3 not canonical
        _req(lookup=pb.Lookup(path=b"/a/../b")),  # 4 '..' is not a name
        _req(lookup=pb.Lookup(path=b"/" + b"x" * 256)),  # 5 name too long
        pb.Request(),  # 6 no operation
        _req(txn=77, create=pb.Create(path=b"/f")),  # 7 unknown transaction
        _req(txn=0, begin=pb.Begin()),  # 8 id 0 is reserved
        _req(txn=0, mkdir=pb.MkDir(path=b"/d")),  # 9 write without transaction
        _req(lookup=pb.Lookup(path=b"/")),  # 10 fine
        _req(readdir=pb.ReadDir(path=b"/", after=b"\xff")),  # 11 bad cursor
        _req(txn=5, begin=pb.Begin()),  # 12 fine
        _req(txn=5, begin=pb.Begin()),  # 13 already open
        _req(txn=5, create=pb.Create(path=b"/f", blocksize=3)),  # 14 bad blocksize
        _req(txn=5, create=pb.Create(path=b"/f", mode=0o777)),  # 15 fine
        _req(txn=5, commit=pb.Commit()),  # 16 fine
    ]
    answers = await _exchange(namenode.address, requests)
    codes = {i: answers[i].error.code for i in answers}
    assert codes == {
        1: pb.EINVAL,
        2: pb.EINVAL,
        3: pb.EINVAL,
        4: pb.EINVAL,
        5: pb.ENAMETOOLONG,
        6: pb.EBADTXN,
        7: pb.EBADTXN,
        8: pb.EBADTXN,
        9: pb.EBADTXN,
        10: pb.OK,
        11: pb.EINVAL,
        12: pb.OK,
        13: pb.EBADTXN,
        14: pb.EINVAL,
        15: pb.OK,
        16: pb.OK,
    }
    assert answers[10].attr.ino == 1
    assert all(answers[i].error.message for i in codes if codes[i] != pb.OK)
    with SyncClient(namenode.address) as fs:
        assert fs.listdir("/") == ["f"]


def test_ping_is_a_unary_call(namenode: NamenodeProcess) -> None:
    with channel(namenode.address) as link:
        reply = pb_grpc.NamenodeStub(link).Ping(pb.PingRequest(), timeout=10, metadata=bearer())
    assert reply.version and reply.started_ns > 0


def test_sync_facade(namenode: NamenodeProcess) -> None:
    with SyncClient(namenode.address) as fs:
        fs.mkdir("/a/b", parents=True)
        with fs.transaction() as t:
            t.create("/a/b/f")
            t.symlink("/a/l", "b/f")
        assert [e.name for e in fs.scandir("/a")] == ["b", "l"]
        assert fs.stat("/a/l").kind.name == "FILE"
        assert fs.fsstat().files == 1
