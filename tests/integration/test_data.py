"""The data path against real datanode processes: round trips, replication and placement,
overwrite isolation, failover, corruption, tickets, and block accounting after failures."""

from __future__ import annotations

import asyncio
import os
import random

import asyncpg
import grpc
import pytest

from plasmafs.client import (
    Client,
    CorruptionError,
    FileKind,
    NoSpaceError,
    UnavailableError,
)
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.core import tickets as ticket_rules
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.proto import datanode_pb2_grpc as dpb_grpc
from tests.conftest import TEST_CAPACITY, DataCluster
from tests.support.cluster import DatanodeProcess, aio_channel, tls_env

BS = 64 * 1024
SIZES = [0, 1, BS - 1, BS, BS + 1, 10 * BS + 7]


async def _used_blocks_in_postgres(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval(
                """SELECT coalesce(sum(block_count), 0) FROM (
                       SELECT block_count FROM extents
                       UNION ALL
                       SELECT block_count FROM released_extents WHERE reusable_after > now()
                   ) u"""
            )
        )
    finally:
        await conn.close()


async def _assert_no_leak(fs: Client, dsn: str) -> None:
    """The namenode's free space is exactly what PostgreSQL says is not in use."""
    used = (await fs.fsstat()).used_bytes // BS
    assert used == await _used_blocks_in_postgres(dsn)


@pytest.mark.parametrize("replication", [1, 2, 3])
async def test_round_trips_and_distinct_placement(
    dfs: Client, data_cluster: DataCluster, replication: int
) -> None:
    rng = random.Random(replication)
    for size in SIZES:
        data = rng.randbytes(size)
        path = f"/f{size}"
        attr = await dfs.write_file(path, data, replication=replication)
        assert (attr.size, attr.replication) == (size, replication)
        assert await dfs.read_file(path) == data
        blocks = await dfs.blocks(path)
        assert sum(e.block_count for e in blocks.extents) == (size + BS - 1) // BS
        for extent in blocks.extents:
            nodes = [r.datanode_id for r in extent.replicas]
            assert len(nodes) == replication == len(set(nodes))
        reader = await dfs.open(path)
        assert isinstance(reader, FileReader)
        reader.seek(size // 2)
        assert await reader.read(100) == data[size // 2 : size // 2 + 100]
    await _assert_no_leak(dfs, data_cluster.namenode.dsn)


async def test_placement_alternates_in_runs(dfs: Client) -> None:
    data = os.urandom(300 * BS)
    await dfs.write_file("/runs", data, replication=1)
    blocks = await dfs.blocks("/runs")
    owners = [e.replicas[0].datanode_id for e in blocks.extents]
    assert len(set(owners)) == 3  # alternating over the three datanodes
    assert all(e.block_count >= 128 or e.file_end == 300 for e in blocks.extents)
    assert await dfs.read_file("/runs") == data


async def test_large_writes_cross_extents_and_commits(
    dfs: Client, data_cluster: DataCluster
) -> None:
    """Writes of many blocks at once are cut at extent ends; extents finish in the
    background while the next streams, and every commit waits for them."""
    data = os.urandom(150 * BS + 5)
    writer = await dfs.open("/big", "wb", replication=2, commit_every=60 * BS)
    assert isinstance(writer, FileWriter)
    for at in range(0, len(data), 37 * BS + 11):  # odd sizes: partial blocks in between
        await writer.write(data[at : at + 37 * BS + 11])
    await writer.close()
    assert await dfs.read_file("/big") == data
    blocks = await dfs.blocks("/big")
    assert sum(e.block_count for e in blocks.extents) == 151
    assert all(len({r.datanode_id for r in e.replicas}) == 2 for e in blocks.extents)
    await _assert_no_leak(dfs, data_cluster.namenode.dsn)


async def test_a_reused_write_buffer_does_not_change_written_data(dfs: Client) -> None:
    """write() may return before its data has gone out: a caller refilling the same
    bytearray must not change what the file holds."""
    buffer = bytearray(8 * BS)
    expected = bytearray()
    writer = await dfs.open("/reused", "wb", replication=1)
    assert isinstance(writer, FileWriter)
    for i in range(40):
        buffer[:] = bytes([i]) * len(buffer)
        await writer.write(buffer)
        expected += buffer
    await writer.close()
    assert await dfs.read_file("/reused") == expected


async def test_grpc_reads_at_any_offset_and_length(dfs: Client) -> None:
    """Over gRPC a datanode sends whole blocks straight from its volume and cuts only the
    pieces that start or end inside a block: every offset and length comes back right."""
    data = os.urandom(9 * BS + 123)  # several messages of 4 blocks, a short last block
    await dfs.write_file("/ranges", data, replication=2)
    remote = Client(dfs.address, local_reads=False)
    try:
        reader = await remote.open("/ranges")
        assert isinstance(reader, FileReader)
        for offset, length in [
            (0, len(data)), (1, BS), (BS - 1, 2), (3 * BS + 5, 5 * BS), (4 * BS, 4 * BS),
            (8 * BS + 7, 2 * BS), (len(data) - 1, 10), (2 * BS, 0),
        ]:  # fmt: skip
            assert await reader.pread(offset, length) == data[offset : offset + length]
        assert remote.data.local.reads == 0
    finally:
        await remote.close()


async def test_overwrite_while_a_reader_streams_the_old_version(dfs: Client) -> None:
    old, new = os.urandom(20 * BS), os.urandom(7 * BS + 3)
    await dfs.write_file("/f", old, replication=2)
    reader = await dfs.open("/f")
    assert isinstance(reader, FileReader)
    first = await reader.read(BS)
    await dfs.write_file("/f", new, replication=2)
    assert first + await reader.read() == old  # the old version, to the end
    assert await dfs.read_file("/f") == new
    assert (await dfs.stat("/f")).size == len(new)


async def test_random_reads_send_nothing_to_the_namenode(dfs: Client) -> None:
    data = os.urandom(40 * BS)
    await dfs.write_file("/random", data, replication=2)
    reader = await dfs.open("/random")
    assert isinstance(reader, FileReader)
    before = await dfs.request_counts()
    rng = random.Random(7)
    for _ in range(50):
        offset = rng.randrange(len(data))
        assert await reader.pread(offset, 5000) == data[offset : offset + 5000]
    assert await dfs.request_counts() == before


async def test_replication_beyond_live_datanodes_fails_before_data_moves(
    dfs: Client, data_cluster: DataCluster
) -> None:
    with pytest.raises(NoSpaceError, match="needs 4 live datanodes"):
        await dfs.write_file("/too-many", b"x" * 100, replication=4)
    assert not await dfs.exists("/too-many")
    with pytest.raises(NoSpaceError):  # more than the cluster holds
        await dfs.write_file("/too-big", bytes(300 * BS), replication=3)
    assert not await dfs.exists("/too-big")
    await _assert_no_leak(dfs, data_cluster.namenode.dsn)


async def test_abort_returns_reserved_blocks(dfs: Client, data_cluster: DataCluster) -> None:
    before = (await dfs.fsstat()).used_bytes
    f = await dfs.create("/f", replication=2)
    t = await dfs.begin()
    await t.allocate(f.ino, 0, 50)
    assert (await dfs.fsstat()).used_bytes == before + 100 * BS
    await t.abort()
    assert (await dfs.fsstat()).used_bytes == before
    await _assert_no_leak(dfs, data_cluster.namenode.dsn)


async def test_unlink_and_truncate_release_blocks_into_quarantine(
    dfs: Client, data_cluster: DataCluster
) -> None:
    await dfs.write_file("/f", os.urandom(10 * BS), replication=2)
    await dfs.write_file("/g", os.urandom(10 * BS), replication=1)
    await dfs.setattr("/g", size=3 * BS + 1)
    assert await dfs.read_file("/g") == (await dfs.read_file("/g"))[: 3 * BS + 1]
    assert sum(e.block_count for e in (await dfs.blocks("/g")).extents) == 4
    await dfs.unlink("/f")
    await _assert_no_leak(dfs, data_cluster.namenode.dsn)


async def test_a_killed_datanode_during_a_read_fails_over(
    dfs: Client, data_cluster: DataCluster
) -> None:
    data = os.urandom(30 * BS)
    await dfs.write_file("/f", data, replication=2)
    reader = await dfs.open("/f")
    assert isinstance(reader, FileReader)
    first = await reader.read(BS)
    assert reader.blocks is not None
    _node(data_cluster, reader.blocks.extents[0].replicas[0].datanode_id).kill9()
    rest = await reader.read()
    assert first + rest == data


def _node(cluster: DataCluster, datanode_id: int) -> DatanodeProcess:
    return next(d for d in cluster.datanodes if d.datanode_id == datanode_id)


async def test_a_killed_datanode_during_a_write_leaves_nothing_behind(
    dfs: Client, data_cluster: DataCluster
) -> None:
    await dfs.write_file("/keep", b"old content", replication=2)
    writer = await dfs.open("/keep", "wb", replication=3)
    assert isinstance(writer, FileWriter)
    await writer.write(os.urandom(3 * BS))
    data_cluster.datanodes[1].kill9()
    with pytest.raises((UnavailableError, NoSpaceError)):
        for _ in range(200):
            await writer.write(os.urandom(BS))
        await writer.close()
    assert await dfs.read_file("/keep") == b"old content"
    await _assert_no_leak(dfs, data_cluster.namenode.dsn)


async def test_a_flipped_byte_is_detected_and_served_from_another_replica(
    dfs: Client, data_cluster: DataCluster
) -> None:
    data = os.urandom(4 * BS)
    await dfs.write_file("/two", data, replication=2)
    await dfs.write_file("/one", data, replication=1)
    for path in ("/two", "/one"):
        replica = (await dfs.blocks(path)).extents[0].replicas[0]
        node = _node(data_cluster, replica.datanode_id)
        with open(node.volume / "volume.data", "r+b") as volume:  # noqa: ASYNC230
            volume.seek(replica.block_start * BS + 1234)
            byte = volume.read(1)
            volume.seek(replica.block_start * BS + 1234)
            volume.write(bytes([byte[0] ^ 0xFF]))
    assert await dfs.read_file("/two") == data
    with pytest.raises(CorruptionError, match="checksum"):
        await dfs.read_file("/one")


async def test_datanodes_refuse_bad_tickets(dfs: Client, data_cluster: DataCluster) -> None:
    await dfs.write_file("/f", os.urandom(2 * BS), replication=1)
    replica = (await dfs.blocks("/f")).extents[0].replicas[0]
    good = dpb.Ticket.FromString(replica.ticket)

    async def read_with(ticket: dpb.Ticket, start: int, count: int) -> grpc.StatusCode:
        async with aio_channel(replica.address) as channel:
            call = dpb_grpc.DatanodeStub(channel).ReadBlocks(
                dpb.ReadRequest(ticket=ticket, block_start=start, block_count=count)
            )
            try:
                async for _ in call:
                    pass
            except grpc.RpcError as exc:
                return exc.code()
            return grpc.StatusCode.OK

    assert await read_with(good, good.block_start, 1) == grpc.StatusCode.OK
    forged = dpb.Ticket()
    forged.CopyFrom(good)
    forged.block_count += 5
    assert await read_with(forged, good.block_start, 1) == grpc.StatusCode.PERMISSION_DENIED
    assert await read_with(dpb.Ticket(), good.block_start, 1) == grpc.StatusCode.PERMISSION_DENIED
    assert (
        await read_with(good, good.block_start + good.block_count, 1)
        == grpc.StatusCode.PERMISSION_DENIED
    )
    expired = ticket_rules.sign(
        b"x" * 32, good.datanode_id, good.block_start, 1, write=False, ttl_seconds=-1
    )
    assert await read_with(expired, good.block_start, 1) == grpc.StatusCode.PERMISSION_DENIED
    async with aio_channel(replica.address) as channel:
        stub = dpb_grpc.DatanodeStub(channel)

        async def chunks():  # type: ignore[no-untyped-def]
            yield dpb.WriteChunk(
                ticket=good, block_start=good.block_start, block_count=1, data=b"evil"
            )

        with pytest.raises(grpc.RpcError) as failed:
            await stub.WriteBlocks(chunks())
        assert failed.value.code() == grpc.StatusCode.PERMISSION_DENIED  # a read ticket
    assert len(await dfs.read_file("/f")) == 2 * BS


async def test_parallel_readers_do_not_block_each_other(dfs: Client) -> None:
    data = os.urandom(60 * BS)
    await dfs.write_file("/shared", data, replication=2)
    results = await asyncio.gather(*(dfs.read_file("/shared") for _ in range(6)))
    assert all(r == data for r in results)


async def test_a_dead_datanode_gets_no_new_data(dfs: Client, data_cluster: DataCluster) -> None:
    assert (await dfs.fsstat()).live_datanodes == 3
    data_cluster.datanodes[2].kill9()
    for _ in range(100):
        if (await dfs.fsstat()).live_datanodes == 2:
            break
        await asyncio.sleep(0.1)
    assert (await dfs.fsstat()).live_datanodes == 2
    await dfs.write_file("/after", os.urandom(5 * BS), replication=2)
    with pytest.raises(NoSpaceError):
        await dfs.write_file("/three", b"x", replication=3)
    data_cluster.datanodes[2].start()  # same volume: same identity, back in service
    for _ in range(100):
        if (await dfs.fsstat()).live_datanodes == 3:
            break
        await asyncio.sleep(0.1)
    await dfs.write_file("/three", b"x", replication=3)
    assert (await dfs.stat("/three")).kind is FileKind.FILE


async def test_a_volume_with_another_blocksize_is_refused(
    data_cluster: DataCluster, tmp_path: object
) -> None:
    from pathlib import Path

    from plasmafs.core.errors import StorageError
    from plasmafs.local.cluster import start_datanode_process

    directory = Path(str(tmp_path)) / "odd"
    with pytest.raises(StorageError, match="blocksize"):
        start_datanode_process(
            directory,
            data_cluster.namenode.registry_address,
            1 << 24,
            128 * 1024,
            extra_env=tls_env("datanode", "odd"),
        )


async def test_direct_writes_round_trip_and_survive_a_restart(
    data_cluster: DataCluster, tmp_path: object
) -> None:
    from pathlib import Path

    datanode = DatanodeProcess(
        Path(str(tmp_path)) / "direct",
        data_cluster.namenode.registry_address,
        TEST_CAPACITY,
        BS,
        env={"PFS_DATANODE_SYNC": "direct"},
    ).start()
    for other in data_cluster.datanodes:
        other.stop()  # every replica lands on the direct-I/O datanode
    fs = Client(data_cluster.namenode.address, local_reads=False)
    try:
        for _ in range(100):
            if (await fs.fsstat()).live_datanodes == 1:
                break
            await asyncio.sleep(0.1)
        rng = random.Random(7)
        files = {f"/d{size}": rng.randbytes(size) for size in SIZES}
        for path, data in files.items():
            await fs.write_file(path, data, replication=1)
        datanode.stop()
        datanode.start()
        for path, data in files.items():
            assert await fs.read_file(path) == data
    finally:
        await fs.close()
        datanode.stop()
        for other in data_cluster.datanodes:
            other.start()
