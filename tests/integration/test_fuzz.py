"""A property-based fuzzer of the wire: random and malformed frames on the namenode's
Session stream (as alice, who owns only /alice) and random requests with random
tickets on a datanode's RPCs. Every answer is a proper one (a known error code, or a
gRPC status the server chose), nothing crashes (Ping and Info still answer), and
nothing outside what alice may change is changed: the rows of everything she does not
own, and the datanode's volume, hash the same before and after."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import asyncpg
import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plasmafs.client import Client, SyncClient
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.proto import datanode_pb2_grpc as dpb_grpc
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from tests.support.accounts import TOKENS, UIDS
from tests.support.cluster import (
    DatanodeProcess,
    NamenodeProcess,
    aio_channel,
    bearer,
    create_database,
    drop_database,
    run,
)

BS = 64 * 1024
ALICE = UIDS["alice"]
KNOWN_CODES = set(pb.ErrorCode.values())
# A stream the server ends itself (it could not parse a frame, or refused it).
SERVER_ENDINGS = {
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNKNOWN,
}
FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- random messages --------------------------------------------------------------------

_BOUNDS = {
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_ENUM: (0, 40),
}


def _integers(kind: int) -> st.SearchStrategy[int]:
    low, high = _BOUNDS[kind]
    edges = [low, high, 0, 1, 2, 3, 16, 255, 256]
    return st.one_of(
        st.sampled_from([e for e in edges if low <= e <= high]), st.integers(low, high)
    )


def _paths() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.sampled_from([b"/", b"/alice", b"/alice/f", b"/root", b"/root/secret", b"", b"//"]),
        st.builds(lambda tail: b"/alice/" + tail, st.binary(min_size=1, max_size=40)),
        st.binary(max_size=300),
    )


def _field(field: FieldDescriptor, depth: int) -> st.SearchStrategy[object]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return _message(field.message_type, depth + 1)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_BYTES:
        return _paths()
    if field.type == FieldDescriptor.TYPE_STRING:
        return st.text(max_size=50)
    return _integers(field.type)


def _message(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """A message of `descriptor` with random values in a random subset of its fields."""
    cls = _class_of(descriptor)
    if depth > 2:
        return st.just(cls())
    singular = [f for f in descriptor.fields if not f.is_repeated]

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        message = cls()
        for field in singular:
            if not draw(st.booleans()):
                continue
            value = draw(_field(field, depth))
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                getattr(message, field.name).CopyFrom(value)
            else:
                setattr(message, field.name, value)
        return message

    return build()


def _class_of(descriptor: Descriptor) -> type[Message]:
    module = dpb if descriptor.file.package.startswith("plasmafs.datanode") else pb
    return getattr(module, descriptor.name)  # type: ignore[no-any-return]


OPS = [f for f in pb.Request.DESCRIPTOR.oneofs_by_name["op"].fields]
LONGEST_POLL_MS = 2_000


@st.composite
def requests(draw: st.DrawFn) -> pb.Request:
    """One request: a random operation with random arguments on a small or odd txn."""
    op = draw(st.sampled_from(OPS))
    txn = draw(st.one_of(st.integers(0, 4), _integers(FieldDescriptor.TYPE_UINT64)))
    request = pb.Request(txn=txn)
    getattr(request, op.name).CopyFrom(draw(_message(op.message_type)))
    # A long poll is answered only after its wait (the namenode caps it at a minute):
    # kept short here so that every request of a frame is answered within the
    # exchange's deadline; what it may wait is the namenode's rule, not the wire's.
    if op.name == "lease_news":
        request.lease_news.wait_ms = min(request.lease_news.wait_ms, LONGEST_POLL_MS)
    return request


frames = st.lists(requests(), min_size=1, max_size=6)
raw_frames = st.binary(min_size=1, max_size=200)


# --- the cluster ------------------------------------------------------------------------


@dataclass
class FuzzCluster:
    namenode: NamenodeProcess
    datanode: DatanodeProcess
    dsn: str


@pytest.fixture(scope="module")
def cluster(admin_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzCluster]:
    """One namenode and datanode for the module; root made /alice (alice's) and a 0700
    /root holding a file with data."""
    workdir = tmp_path_factory.mktemp("fuzz")
    dsn = run(create_database(admin_dsn))
    assert isinstance(dsn, str)
    namenode = NamenodeProcess(
        dsn, workdir, env={"PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BS)}
    ).start()
    datanode = DatanodeProcess(workdir / "dn", namenode.registry_address, 64 * BS, BS).start()
    try:
        run(_populate(namenode.address))
        yield FuzzCluster(namenode, datanode, dsn)
    finally:
        datanode.stop()
        namenode.stop()
        run(drop_database(admin_dsn, dsn))


async def _populate(address: str) -> None:
    async with Client(address) as fs:
        for _ in range(100):
            if (await fs.fsstat()).live_datanodes:
                break
            await asyncio.sleep(0.1)
        await fs.mkdir("/alice")
        await fs.chown("/alice", ALICE, ALICE)
        await fs.mkdir("/root", mode=0o700)
        await fs.write_file("/root/secret", b"s" * (3 * BS))


async def _outside_alice(dsn: str) -> str:
    """A digest of every row alice may not change (what she does not own)."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = [
            tuple(row)
            for query in (
                "SELECT i.* FROM inodes i WHERE i.uid <> $1 ORDER BY i.ino",
                """SELECT e.* FROM entries e JOIN inodes p ON p.ino = e.parent
                   WHERE p.uid <> $1 ORDER BY e.parent, e.name""",
                """SELECT x.* FROM extents x JOIN inodes i ON i.ino = x.ino
                   WHERE i.uid <> $1 ORDER BY x.ino, x.file_index, x.datanode_id""",
            )
            for row in await conn.fetch(query, ALICE)
        ]
    finally:
        await conn.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def _volume_digest(datanode: DatanodeProcess) -> str:
    return hashlib.sha256((datanode.volume / "volume.data").read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def before(cluster: FuzzCluster) -> Iterator[tuple[str, str]]:
    """The digests before fuzzing; after the module they must be the same."""
    digests = (run(_outside_alice(cluster.dsn)), _volume_digest(cluster.datanode))
    assert isinstance(digests[0], str)
    yield digests  # type: ignore[misc]
    assert run(_outside_alice(cluster.dsn)) == digests[0], "rows alice does not own changed"
    assert _volume_digest(cluster.datanode) == digests[1], "the volume changed"


Session = tuple[list[pb.Response], grpc.StatusCode | None]
EXAMPLES: Counter[str] = Counter()  # examples each property ran (checked at the end)


def _session(address: str, frame: bytes | pb.ClientFrame, expected: int) -> Session:
    """Send one frame on a new Session as alice, on an event loop of its own; the
    responses, and the status the server ended the stream with (None: it ended after
    the client closed its side). Ping must answer afterwards."""

    async def exchange() -> Session:
        async with aio_channel(address) as channel:
            call = channel.stream_stream(
                f"/{pb.DESCRIPTOR.package}.Namenode/Session",
                request_serializer=lambda b: b if isinstance(b, bytes) else b.SerializeToString(),
                response_deserializer=pb.ServerFrame.FromString,
            )(metadata=bearer("alice"))
            responses: list[pb.Response] = []
            try:
                await call.write(frame)
                async with asyncio.timeout(20):
                    while len(responses) < expected:
                        got = await call.read()
                        if got is grpc.aio.EOF:
                            break
                        responses.extend(got.responses)
                    await call.done_writing()
                    while (got := await call.read()) is not grpc.aio.EOF:
                        responses.extend(got.responses)
            except grpc.RpcError:
                pass
            code = await call.code()
            ping = await pb_grpc.NamenodeStub(channel).Ping(
                pb.PingRequest(), timeout=10, metadata=bearer("alice")
            )
            assert ping.version
            return responses, None if code == grpc.StatusCode.OK else code

    return asyncio.run(exchange())


# --- the properties ---------------------------------------------------------------------


@FUZZ
@given(frame=frames)
def test_random_requests_get_proper_answers(
    before: tuple[str, str], cluster: FuzzCluster, frame: list[pb.Request]
) -> None:
    EXAMPLES["requests"] += 1
    for i, request in enumerate(frame, start=1):
        request.id = i
    message = pb.ClientFrame(requests=frame)
    responses, ended = _session(cluster.namenode.address, message, len(frame))
    assert ended is None or ended in SERVER_ENDINGS, ended
    for response in responses:
        assert 1 <= response.id <= len(frame)
        if response.HasField("error"):
            assert response.error.code in KNOWN_CODES
            assert response.error.code != pb.OK and response.error.message


@FUZZ
@given(data=raw_frames)
def test_raw_bytes_end_the_stream_properly(
    before: tuple[str, str], cluster: FuzzCluster, data: bytes
) -> None:
    EXAMPLES["raw"] += 1
    try:
        requests = len(pb.ClientFrame.FromString(data).requests)
        parses = True
    except DecodeError:
        requests, parses = 0, False
    responses, ended = _session(cluster.namenode.address, data, requests)
    if not parses:
        assert ended in SERVER_ENDINGS, ended
    for response in responses:
        if response.HasField("error"):
            assert response.error.code in KNOWN_CODES


@st.composite
def tickets(draw: st.DrawFn) -> dpb.Ticket:
    """A ticket with random fields and a random (never valid) signature."""
    ticket = draw(_message(dpb.Ticket.DESCRIPTOR))
    assert isinstance(ticket, dpb.Ticket)
    if draw(st.booleans()):
        ticket.signature = draw(st.binary(min_size=32, max_size=32))
    return ticket


DATANODE_REFUSALS = {
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.OUT_OF_RANGE,
}


@FUZZ
@given(
    ticket=tickets(),
    start=_integers(FieldDescriptor.TYPE_UINT64),
    count=_integers(FieldDescriptor.TYPE_UINT64),
    data=st.binary(max_size=3 * BS // 2),
    write=st.booleans(),
)
def test_datanode_requests_with_random_tickets_are_refused(
    before: tuple[str, str],
    cluster: FuzzCluster,
    ticket: dpb.Ticket,
    start: int,
    count: int,
    data: bytes,
    write: bool,
) -> None:
    EXAMPLES["datanode"] += 1
    asyncio.run(_datanode_call(cluster.datanode.address, ticket, start, count, data, write))


async def _datanode_call(
    address: str, ticket: dpb.Ticket, start: int, count: int, data: bytes, write: bool
) -> None:
    async with aio_channel(address) as channel:
        stub = dpb_grpc.DatanodeStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            if write:
                chunk = dpb.WriteChunk(
                    ticket=ticket, block_start=start, block_count=count, data=data
                )
                await stub.WriteBlocks(iter([chunk]), timeout=20)
            else:
                request = dpb.ReadRequest(ticket=ticket, block_start=start, block_count=count)
                async for _ in stub.ReadBlocks(request, timeout=20):
                    pass
        assert refused.value.code() in DATANODE_REFUSALS, refused.value
        assert (await stub.Info(dpb.InfoRequest(), timeout=10)).datanode_id


def test_the_fuzzed_namespace_still_serves_alice(
    before: tuple[str, str], cluster: FuzzCluster
) -> None:
    assert min(EXAMPLES[k] for k in ("requests", "raw", "datanode")) >= 50, EXAMPLES
    with SyncClient(cluster.namenode.address, token=TOKENS["alice"]) as fs:
        fs.create("/alice/after")  # no data: the volume's digest stays
        assert "after" in fs.listdir("/alice")
