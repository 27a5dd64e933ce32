"""Readers outlive their tickets: an open file whose tickets expire gets new ones for the
same blocks while the file is unchanged, and StaleFileError once it has changed (the
version being read may be gone), never a mix of versions."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plasmafs.client import Client, PermissionDeniedError, StaleFileError
from plasmafs.client.file_reader import FileReader
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY
from tests.support.cluster import DatanodeProcess, NamenodeProcess

BS = TEST_BLOCKSIZE
TTL = 1.5  # seconds a read ticket lives on this cluster


@pytest.fixture
async def short_tickets(dsn: str, tmp_path: Path) -> AsyncIterator[Client]:
    """A namenode handing out read tickets that live 1.5 s, two datanodes, a client."""
    namenode = NamenodeProcess(
        dsn,
        tmp_path,
        env={
            "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BS),
            "PFS_NAMENODE_TICKET_TTL": "600",  # write tickets: the default
            "PFS_NAMENODE_READ_TICKET_TTL": str(TTL),
            "PFS_NAMENODE_HEARTBEAT_MS": "200",
        },
    ).start()
    datanodes: list[DatanodeProcess] = []
    client = Client(namenode.address)
    try:
        for k in range(2):
            datanode = DatanodeProcess(
                tmp_path / f"dn{k + 1}", namenode.registry_address, TEST_CAPACITY, BS
            )
            datanodes.append(datanode.start())
        for _ in range(100):
            if (await client.fsstat()).live_datanodes == 2:
                break
            await asyncio.sleep(0.1)
        yield client
    finally:
        await client.close()
        for d in datanodes:
            d.stop()
        namenode.stop()


@pytest.mark.parametrize("local_reads", [True, False])
async def test_a_reader_of_an_unchanged_file_outlives_its_tickets(
    short_tickets: Client, local_reads: bool
) -> None:
    data = os.urandom(150 * BS + 9)  # two extents
    await short_tickets.write_file("/long", data, replication=2)
    fs = Client(short_tickets.address, local_reads=local_reads)
    try:
        reader = await fs.open("/long")
        assert isinstance(reader, FileReader)
        head = await reader.read(3 * BS)
        await asyncio.sleep(TTL + 0.5)  # every ticket it holds has expired
        assert head + await reader.read() == data
        await asyncio.sleep(TTL + 0.5)
        assert await reader.pread(140 * BS, 2 * BS) == data[140 * BS : 142 * BS]
    finally:
        await fs.close()


async def test_a_slow_consumer_gets_new_tickets_in_the_middle_of_an_extent(
    short_tickets: Client,
) -> None:
    data = os.urandom(100 * BS)  # one extent, read in many pipelined local requests
    await short_tickets.write_file("/slow", data, replication=1)
    fs = Client(short_tickets.address, local_reads=True)
    fs.data.local.request_blocks = 4
    try:
        reader = await fs.open("/slow")
        assert isinstance(reader, FileReader)
        got = bytearray()
        async for piece in reader.stream():
            got += piece
            if len(got) == 8 * BS:
                await asyncio.sleep(TTL + 0.5)  # the next requests carry a lapsed ticket
        assert got == data
    finally:
        await fs.close()


async def test_a_reader_of_a_changed_file_is_told_so_once_its_tickets_expire(
    short_tickets: Client,
) -> None:
    old, new = os.urandom(20 * BS), os.urandom(20 * BS)
    await short_tickets.write_file("/f", old, replication=1)
    reader = await short_tickets.open("/f")
    assert isinstance(reader, FileReader)
    assert await reader.read(BS) == old[:BS]
    await short_tickets.write_file("/f", new, replication=1)
    assert await reader.read(BS) == old[BS : 2 * BS]  # tickets alive: the old version
    await asyncio.sleep(TTL + 0.5)
    with pytest.raises(StaleFileError, match="changed after it was opened"):
        await reader.read()
    assert await short_tickets.read_file("/f") == new


async def test_a_refused_ticket_that_has_not_lapsed_is_not_retried(
    short_tickets: Client,
) -> None:
    await short_tickets.write_file("/g", os.urandom(4 * BS), replication=1)
    reader = await short_tickets.open("/g")
    assert isinstance(reader, FileReader)
    assert reader.blocks is not None
    forged = reader.blocks.extents[0].replicas[0]
    object.__setattr__(forged, "ticket", forged.ticket[:-1] + bytes([forged.ticket[-1] ^ 1]))
    with pytest.raises(PermissionDeniedError):
        await reader.read()


async def test_space_a_read_file_gave_up_comes_back_within_a_read_ticket_lifetime(
    short_tickets: Client,
) -> None:
    size = 8 * BS
    await short_tickets.write_file("/read-then-removed", os.urandom(size), replication=1)
    assert len(await short_tickets.read_file("/read-then-removed")) == size
    await short_tickets.unlink("/read-then-removed")
    assert (await short_tickets.fsstat()).held_bytes == size  # its readers' tickets live on
    async with asyncio.timeout(TTL + 10):  # not the write tickets' ten minutes
        while (await short_tickets.fsstat()).held_bytes:
            await asyncio.sleep(0.1)
    assert (await short_tickets.fsstat()).used_bytes == 0
