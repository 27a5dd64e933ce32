"""A read never returns bytes written for another file: each block's checksum covers
its owner (file, generation, block index), and a read names the owner it expects.

The scenario of the issue: one file's block (its bytes and its checksum) copied over
another file's block behind the datanode's back, as a restore of the metadata to an
earlier point (or an allocation bug) makes happen when blocks are reused. Before
stamps, the other file's bytes came back and fsck said HEALTHY."""

from __future__ import annotations

import os

import pytest

from plasmafs.client import Client, PlasmaError
from plasmafs.client.admin import FsckFile
from plasmafs.core.attributes import Extent
from tests.conftest import DataCluster
from tests.support.cluster import DatanodeProcess
from tests.support.waiting import eventually

CRC_SIZE = 4
STAMP_SIZE = 24


def overwrite_block(node: DatanodeProcess, source: int, target: int, blocksize: int) -> None:
    """Copy block `source`'s bytes and checksum over block `target`, behind the
    datanode's back."""
    for name, size in (("volume.data", blocksize), ("volume.crc", CRC_SIZE)):
        with open(node.volume / name, "r+b") as f:
            f.seek(source * size)
            data = f.read(size)
            f.seek(target * size)
            f.write(data)


def node_of(cluster: DataCluster, extent: Extent, k: int = 0) -> DatanodeProcess:
    replica = extent.replicas[k]
    return next(d for d in cluster.datanodes if d.address == replica.address)


async def one_block_files(dfs: Client, cluster: DataCluster, replication: int):  # type: ignore[no-untyped-def]
    """Two one-block files (path, content, extent) whose first replicas share a
    datanode."""
    bs = cluster.blocksize
    placed: dict[str, tuple[str, bytes, Extent]] = {}
    for k in range(12):
        path, data = f"/f{k}", os.urandom(bs - 10 - k)
        await dfs.write_file(path, data, replication=replication)
        [extent] = (await dfs.blocks(path)).extents
        other = placed.setdefault(extent.replicas[0].address, (path, data, extent))
        if other[0] != path:
            return (*other, path, data, extent)
    pytest.fail("no two files placed on one datanode")


@pytest.mark.parametrize("local_reads", [True, False], ids=["shared-memory", "grpc"])
async def test_a_block_reused_by_another_file_is_refused_not_returned(
    data_cluster: DataCluster, local_reads: bool
) -> None:
    async with Client(data_cluster.namenode.address, local_reads=local_reads) as dfs:
        _, a, ea, b_path, _, eb = await one_block_files(dfs, data_cluster, 1)
        node = node_of(data_cluster, ea)
        overwrite_block(node, ea.replicas[0].block_start, eb.replicas[0].block_start,
                        data_cluster.blocksize)  # fmt: skip
        with pytest.raises(PlasmaError) as caught:
            await dfs.read_file(b_path)
        assert a[:100] not in str(caught.value).encode()

        async def reported_corrupt() -> bool:
            summary = [item async for item in dfs.fsck("/")][-1]
            return summary.corrupt_blocks == 1 and summary.corrupt_files == 1

        await eventually(reported_corrupt, timeout=20)


async def test_a_replica_reused_by_another_file_is_left_for_a_good_one(
    dfs: Client, data_cluster: DataCluster
) -> None:
    bs = data_cluster.blocksize
    a, b = os.urandom(bs - 10), os.urandom(bs - 20)
    await dfs.write_file("/a", a, replication=3)  # a replica on every datanode
    await dfs.write_file("/b", b, replication=2)
    [ea] = (await dfs.blocks("/a")).extents
    [eb] = (await dfs.blocks("/b")).extents
    # A new reader starts its rotation at the second replica: that one is overwritten.
    bad = eb.replicas[1]
    node = next(d for d in data_cluster.datanodes if d.address == bad.address)
    source = next(r for r in ea.replicas if r.address == bad.address)
    overwrite_block(node, source.block_start, bad.block_start, bs)
    assert await dfs.read_file("/b") == b  # the good replica's, never a's bytes


def overwrite_stamped_block(node: DatanodeProcess, source: int, target: int, bs: int) -> None:
    """Copy block `source` whole — bytes, checksum and owner stamp — over `target`: what
    a datanode holds after a block was freed and reused by a write the namenode's
    (restored) records do not know."""
    overwrite_block(node, source, target, bs)
    with open(node.volume / "volume.stamp", "r+b") as f:
        f.seek(source * STAMP_SIZE)
        stamp = f.read(STAMP_SIZE)
        f.seek(target * STAMP_SIZE)
        f.write(stamp)


async def test_a_datanode_finds_blocks_of_another_owner_when_it_registers(
    dfs: Client, data_cluster: DataCluster
) -> None:
    _, _, ea, b_path, _, eb = await one_block_files(dfs, data_cluster, 1)
    node = node_of(data_cluster, ea)
    node.stop()
    overwrite_stamped_block(node, ea.replicas[0].block_start, eb.replicas[0].block_start,
                            data_cluster.blocksize)  # fmt: skip
    node.start()  # registers: its owner check compares every stamp with the records

    async def reported_corrupt() -> bool:
        summary = [item async for item in dfs.fsck("/")][-1]
        return summary.corrupt_files == 1

    await eventually(reported_corrupt, timeout=30)  # no read of the file needed
    corrupt = [f.path async for f in dfs.fsck("/", list_corrupt=True) if isinstance(f, FsckFile)]
    assert corrupt == [b_path]
    with pytest.raises(PlasmaError):
        await dfs.read_file(b_path)


@pytest.mark.slow
async def test_a_datanode_that_saw_a_newer_term_makes_the_namenode_step_past_it(
    dfs: Client, data_cluster: DataCluster
) -> None:
    """The records are older than the cluster (PostgreSQL restored, or commits lost):
    the datanode would refuse the namenode's write tickets, so the namenode takes a
    term after the newest any datanode has seen, then writes go on."""
    [before] = [r.term for r in await dfs.namenodes()]
    node = data_cluster.datanodes[0]
    node.stop()
    (node.volume / "namenode.term").write_text(f"{before + 1000} another-namenode\n")
    node.start()

    async def stepped_past() -> bool:
        return [r.term for r in await dfs.namenodes()] == [before + 1001]

    await eventually(stepped_past, timeout=30)
    data = os.urandom(3 * data_cluster.blocksize)
    await eventually(lambda: _written_on_all(dfs, data), timeout=30)
    assert await dfs.read_file("/everywhere") == data


async def _written_on_all(dfs: Client, data: bytes) -> bool:
    """Whether a file with a replica on each of the three datanodes could be written."""
    try:
        await dfs.write_file("/everywhere", data, replication=3)
    except PlasmaError:
        return False
    return True
