"""A cluster whose datanodes serve block data in plaintext (data_tls = false) for a
trusted network: the namenode and the registry stay TLS, clients read and write the
data unencrypted, tickets still authorize every call, and re-replication copies from
a plaintext source."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from plasmafs.client import Client
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.proto import datanode_pb2_grpc as dpb_grpc
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY
from tests.support.cluster import DatanodeProcess, NamenodeProcess

BS = TEST_BLOCKSIZE
PLAINTEXT = {"PFS_DATANODE_DATA_TLS": "false"}


@pytest.fixture
def plain(dsn: str, tmp_path: Path) -> Iterator[tuple[NamenodeProcess, list[DatanodeProcess]]]:
    """A TLS namenode and two datanodes serving their data in plaintext."""
    namenode = NamenodeProcess(
        dsn,
        tmp_path,
        env={
            "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BS),
            "PFS_NAMENODE_HEARTBEAT_MS": "200",
            "PFS_NAMENODE_DATANODE_DEAD_AFTER": "2",
            "PFS_NAMENODE_REPLICA_LOST_AFTER": "2",
        },
    ).start()
    datanodes: list[DatanodeProcess] = []
    try:
        for k in range(2):
            datanodes.append(
                DatanodeProcess(
                    tmp_path / f"dn{k + 1}",
                    namenode.registry_address,
                    TEST_CAPACITY,
                    BS,
                    env=PLAINTEXT,
                ).start()
            )
        yield namenode, datanodes
    finally:
        for d in datanodes:
            d.stop()
        namenode.stop()


async def _live(fs: Client, count: int) -> None:
    for _ in range(150):
        if (await fs.fsstat()).live_datanodes >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"fewer than {count} live datanodes")


async def test_data_travels_in_plaintext_with_tickets(
    plain: tuple[NamenodeProcess, list[DatanodeProcess]], tmp_path: Path
) -> None:
    namenode, datanodes = plain
    data = os.urandom(5 * BS + 17)
    async with Client(namenode.address, local_reads=False, local_writes=False) as fs:
        await _live(fs, 2)
        await fs.write_file("/f", data, replication=1)
        assert await fs.read_file("/f") == data
        replica = (await fs.blocks("/f")).extents[0].replicas[0]
        assert replica.plaintext
        # The data port speaks plaintext, and still wants a ticket.
        async with grpc.aio.insecure_channel(replica.address) as channel:
            stub = dpb_grpc.DatanodeStub(channel)
            good = dpb.Ticket.FromString(replica.ticket)
            request = dpb.ReadRequest(ticket=good, block_start=replica.block_start, block_count=1)
            chunks = [c.data async for c in stub.ReadBlocks(request)]
            assert b"".join(chunks) == data[:BS]
            forged = dpb.Ticket()
            forged.CopyFrom(good)
            forged.block_count += 1
            with pytest.raises(grpc.RpcError) as refused:
                bad = dpb.ReadRequest(ticket=forged, block_start=replica.block_start, block_count=1)
                async for _ in stub.ReadBlocks(bad):
                    pass
            assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        # A third datanode, and the first one's death: its replica is copied from the
        # plaintext survivor.
        await fs.setrep("/f", 2, wait=True)
        extra = DatanodeProcess(
            tmp_path / "dn3", namenode.registry_address, TEST_CAPACITY, BS, env=PLAINTEXT
        ).start()
        try:
            holder = next(d for d in datanodes if d.address == replica.address)
            holder.stop()
            for _ in range(300):
                blocks = await fs.blocks("/f")
                if all(e.live_replicas == 2 for e in blocks.extents):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the lost replica was not copied")
            assert await fs.read_file("/f") == data
        finally:
            extra.stop()
