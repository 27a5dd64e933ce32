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
from plasmafs.core.attributes import Extent
from tests.conftest import DataCluster
from tests.support.cluster import DatanodeProcess
from tests.support.waiting import eventually

CRC_SIZE = 4


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
