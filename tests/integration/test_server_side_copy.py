"""Server-side copies on a real cluster (client/block_copies.py, the datanode's
CopyBlocks): each replica of the new file is filled by its own datanode from a replica
of the source, so no byte passes through the client — the datanodes' metrics count
every copied byte; the copy is a file of its own (the source removed, a restart and the
datanodes' owner checks find it whole); a source replica that is gone gives way to
another; a copy call without a write ticket is refused."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from loadtests.harness import scrape
from plasmafs.client import Client
from plasmafs.client.copying import copy_file
from plasmafs.client.datapath import copy_range
from plasmafs.client.editing import FileEditor
from plasmafs.client.file_reader import FileReader
from plasmafs.client.file_writer import FileWriter
from plasmafs.core.errors import InvalidArgumentError, PermissionDeniedError, PlasmaError
from plasmafs.local.postgres import free_port
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY, DataCluster, connected_client
from tests.support.cluster import DatanodeProcess, NamenodeProcess
from tests.support.waiting import eventually

BS = TEST_BLOCKSIZE


@pytest.fixture
def cluster(dsn: str, tmp_path: Path) -> Iterator[tuple[DataCluster, list[str]]]:
    """A namenode and three datanodes serving their metrics (the addresses)."""
    env = {
        "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BS),
        "PFS_NAMENODE_DATANODE_DEAD_AFTER": "3",
        "PFS_NAMENODE_HEARTBEAT_MS": "200",
        "PFS_NAMENODE_INLINE_LIMIT": "0",
    }
    namenode = NamenodeProcess(dsn, tmp_path, env=env).start()
    datanodes: list[DatanodeProcess] = []
    metrics = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    try:
        for k, listen in enumerate(metrics):
            node = DatanodeProcess(
                tmp_path / f"dn{k + 1}",
                namenode.registry_address,
                TEST_CAPACITY,
                BS,
                env={"PFS_DATANODE_METRICS_LISTEN": listen},
            )
            datanodes.append(node.start())
        yield DataCluster(namenode, datanodes, BS), metrics
    finally:
        for d in datanodes:
            d.stop()
        namenode.stop()


@pytest.fixture
async def fs(cluster: tuple[DataCluster, list[str]]) -> AsyncIterator[Client]:
    async with connected_client(cluster[0].namenode.address) as client:
        yield client


def _copied(metrics: list[str]) -> tuple[int, int]:
    """Clients' copies and their bytes, over every datanode."""
    values = [scrape(m) for m in metrics]
    return (
        int(sum(v["pfs_datanode_client_copies_total"] for v in values)),
        int(sum(v["pfs_datanode_client_copy_bytes_total"] for v in values)),
    )


async def _fragmented(fs: Client, path: str, data: bytes) -> None:
    """Write `data` to `path` in two extents with a hole of two blocks between them."""
    await fs.write_file(path, data[: 3 * BS], replication=2)
    editor = await fs.open(path, "r+b")
    assert isinstance(editor, FileEditor)
    await editor.pwrite(5 * BS, data[5 * BS :])
    await editor.close()


async def test_datanodes_copy_every_replica_and_the_client_carries_no_byte(
    fs: Client, cluster: tuple[DataCluster, list[str]]
) -> None:
    _, metrics = cluster
    data = bytearray(os.urandom(9 * BS + 123))
    data[3 * BS : 5 * BS] = bytes(2 * BS)
    await _fragmented(fs, "/src", bytes(data))
    source = await fs.blocks("/src")
    held = {b for e in source.extents for b in range(e.file_index, e.file_end)}
    assert held == {0, 1, 2, 5, 6, 7, 8, 9}
    copies_before, bytes_before = _copied(metrics)

    attr = await copy_file(fs, "/src", "/dst", replication=3)

    assert attr.size == len(data) and attr.replication == 3
    assert await fs.read_file("/dst") == bytes(data)
    target = await fs.blocks("/dst")
    # Holes stay holes; every block of every one of the 3 replicas came from a datanode.
    assert {b for e in target.extents for b in range(e.file_index, e.file_end)} == held
    blocks = sum(e.block_count for e in target.extents)
    copies, copied = _copied(metrics)
    assert copied - bytes_before == 3 * blocks * BS
    assert copies - copies_before == sum(len(e.replicas) for e in target.extents)
    # Blocks of its own: none is the source's.
    theirs = {(r.datanode_id, r.block_start) for e in source.extents for r in e.replicas}
    assert not theirs & {(r.datanode_id, r.block_start) for e in target.extents for r in e.replicas}


async def test_the_copy_outlives_its_source_a_restart_and_the_owner_checks(
    fs: Client, cluster: tuple[DataCluster, list[str]]
) -> None:
    data_cluster, metrics = cluster
    data = os.urandom(6 * BS + 5)
    await fs.write_file("/src", data, replication=1)
    await copy_file(fs, "/src", "/dst", replication=2)
    await fs.unlink("/src")
    await fs.write_file("/other", os.urandom(8 * BS), replication=3)  # reuses the blocks
    for node in data_cluster.datanodes:
        node.stop()
        node.start()  # registration runs the owner check over every used block
    checked = "pfs_datanode_owner_checks_total"
    await eventually(lambda: all(scrape(m)[checked] >= 1 for m in metrics))
    assert sum(scrape(m)["pfs_datanode_foreign_blocks_total"] for m in metrics) == 0
    async with connected_client(data_cluster.namenode.address) as again:
        await eventually(lambda: _readable(again, "/dst", data), timeout=30)


async def _readable(fs: Client, path: str, data: bytes) -> bool:
    try:
        return await fs.read_file(path) == data
    except PlasmaError:
        return False  # datanodes still registering


async def test_a_source_replica_that_is_gone_gives_way_to_another(
    fs: Client, cluster: tuple[DataCluster, list[str]]
) -> None:
    data_cluster = cluster[0]
    data = os.urandom(4 * BS + 9)
    await fs.write_file("/src", data, replication=2)
    extents = (await fs.blocks("/src")).extents
    holders = {r.datanode_id for e in extents for r in e.replicas}
    gone_id = extents[0].replicas[0].datanode_id  # tried first by a copy elsewhere
    gone = next(n for n in data_cluster.datanodes if n.datanode_id == gone_id)
    reader = await fs.open("/src", "rb")  # its block list names the replica about to go
    assert isinstance(reader, FileReader)
    gone.kill9()

    async def noticed() -> bool:  # so that the copy's own blocks go elsewhere
        return not next(d for d in await fs.datanodes() if d.datanode_id == gone_id).alive

    await eventually(noticed, timeout=30)
    try:
        writer = await fs.open("/dst", "wb", replication=1)
        assert isinstance(writer, FileWriter)
        async with writer:
            await writer.copy_blocks(reader)
    finally:
        await reader.close()
    assert await fs.read_file("/dst") == data
    # Made on the datanode that held no replica (the emptiest), so it tried the gone one.
    made = {r.datanode_id for e in (await fs.blocks("/dst")).extents for r in e.replicas}
    assert made.isdisjoint(holders)


async def test_a_copy_without_a_write_ticket_is_refused_and_writes_nothing(
    fs: Client,
) -> None:
    data = os.urandom(2 * BS)
    await fs.write_file("/a", data, replication=1)
    await fs.write_file("/b", bytes(2 * BS), replication=1)
    a = (await fs.blocks("/a")).extents[0].replicas[0]
    b = (await fs.blocks("/b")).extents[0].replicas[0]  # a read ticket
    with pytest.raises(PermissionDeniedError, match="read ticket used for a write"):
        await copy_range(fs.data, b, 0, 2, a, 0)
    assert await fs.read_file("/b") == bytes(2 * BS)


async def test_the_source_is_where_the_namenode_says_and_its_ticket_is_checked(
    fs: Client,
) -> None:
    """A client names the source datanode by id only: its ticket must be the namenode's
    for that datanode's range, and the target reaches it at its registered address."""
    data = os.urandom(2 * BS)
    await fs.write_file("/a", data, replication=1)
    await fs.write_file("/b", bytes(2 * BS), replication=1)
    a = (await fs.blocks("/a")).extents[0].replicas[0]
    writer = await fs.open("/c", "wb", replication=1)
    assert isinstance(writer, FileWriter)
    others = [d.datanode_id for d in await fs.datanodes() if d.datanode_id != a.datanode_id]
    async with writer:
        target = (await writer._reserve(0, 2))[0].replicas[0]
        elsewhere = replace(a, datanode_id=others[0], address="127.0.0.1:1")
        with pytest.raises(PermissionDeniedError, match=f"ticket is for datanode {a.datanode_id}"):
            await copy_range(fs.data, target, 0, 2, elsewhere, 0)
        with pytest.raises(PermissionDeniedError, match="outside the ticket"):
            await copy_range(fs.data, target, 0, 2, a, 1)  # one block past its range
        assert await copy_range(fs.data, target, 0, 2, replace(a, address="nowhere:1"), 0) == (
            2 * BS
        )  # the address a client gives is not used
        await writer.abort()


async def test_a_copy_ending_inside_a_block_leaves_zeros_after_it(fs: Client) -> None:
    data = os.urandom(3 * BS)
    await fs.write_file("/src", data, replication=2)
    reader = await fs.open("/src", "rb")
    writer = await fs.open("/dst", "wb", replication=2)
    assert isinstance(reader, FileReader) and isinstance(writer, FileWriter)
    async with reader:
        await writer.copy_blocks(reader, 0, BS + 100)
        with pytest.raises(InvalidArgumentError, match="nothing may be written after"):
            await writer.write(b"more")
        await writer.close()
    assert await fs.read_file("/dst") == data[: BS + 100]
    async with fs.transaction() as t:  # the raw size change: no edit rewrites the block
        await t.setattr("/dst", size=2 * BS)
    assert await fs.read_file("/dst") == data[: BS + 100] + bytes(BS - 100)
