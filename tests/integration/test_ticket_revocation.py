"""Revoking a credential reaches the datanodes: tickets issued to it are refused from
the datanodes' next heartbeat on, while other users' tickets keep working."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from loadtests.harness import scrape
from plasmafs.client import Client
from plasmafs.client.accounts import accounts
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.proto import datanode_pb2_grpc as dpb_grpc
from plasmafs.local.postgres import free_port
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY
from tests.support.accounts import TOKENS
from tests.support.cluster import DatanodeProcess, NamenodeProcess, aio_channel

BS = TEST_BLOCKSIZE


Cluster = tuple[NamenodeProcess, DatanodeProcess, str]


@pytest.fixture
def cluster(dsn: str, tmp_path: Path) -> Iterator[Cluster]:
    """A namenode with fast heartbeats and one datanode serving metrics (its address)."""
    workdir = tmp_path
    namenode = NamenodeProcess(
        dsn,
        workdir,
        env={"PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BS), "PFS_NAMENODE_HEARTBEAT_MS": "200"},
    ).start()
    metrics = f"127.0.0.1:{free_port()}"
    datanode = DatanodeProcess(
        workdir / "dn1",
        namenode.registry_address,
        TEST_CAPACITY,
        BS,
        env={"PFS_DATANODE_METRICS_LISTEN": metrics},
    ).start()
    try:
        yield namenode, datanode, metrics
    finally:
        datanode.stop()
        namenode.stop()


async def _read(address: str, replica_ticket: bytes, start: int) -> grpc.StatusCode:
    async with aio_channel(address) as channel:
        ticket = dpb.Ticket.FromString(replica_ticket)
        call = dpb_grpc.DatanodeStub(channel).ReadBlocks(
            dpb.ReadRequest(ticket=ticket, block_start=start, block_count=1)
        )
        try:
            async for _ in call:
                pass
        except grpc.RpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


async def test_a_revoked_users_tickets_are_refused_by_the_datanodes(cluster: Cluster) -> None:
    namenode, _, metrics = cluster
    async with Client(namenode.address) as root:
        for _ in range(100):
            if (await root.fsstat()).live_datanodes:
                break
            await asyncio.sleep(0.1)
        await root.mkdir("/shared", mode=0o777)
        admin = await accounts(root)
        _, carol_token = await admin.add_user("carol")
        async with Client(namenode.address, token=carol_token) as carol:
            await carol.write_file("/shared/c", os.urandom(2 * BS))
            await carol.chmod("/shared/c", 0o644)
            carols = (await carol.blocks("/shared/c")).extents[0].replicas[0]
        async with Client(namenode.address, token=TOKENS["alice"]) as alice:
            alices = (await alice.blocks("/shared/c")).extents[0].replicas[0]
        assert dpb.Ticket.FromString(carols.ticket).credential != 0
        assert await _read(carols.address, carols.ticket, carols.block_start) is (
            grpc.StatusCode.OK
        )
        revoked = await admin.revoke(user="carol")
        assert len(revoked.credentials) == 1
        deadline = time.monotonic() + 30
        while scrape(metrics).get("pfs_datanode_revoked_credentials", 0) < 1:
            assert time.monotonic() < deadline, "the datanode never heard of the revocation"
            await asyncio.sleep(0.1)
    assert await _read(carols.address, carols.ticket, carols.block_start) is (
        grpc.StatusCode.PERMISSION_DENIED
    )
    # Alice's ticket for the same blocks still reads.
    assert await _read(alices.address, alices.ticket, alices.block_start) is grpc.StatusCode.OK
