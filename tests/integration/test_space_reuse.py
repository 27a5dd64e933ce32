"""Freed space comes back at once unless read tickets for it may still be used; readers
holding old tickets never read reused blocks."""

from __future__ import annotations

import asyncio
import os

from plasmafs.client import Client
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY, DataCluster

CLUSTER_BYTES = 3 * TEST_CAPACITY


async def test_space_of_a_removed_file_is_reusable_at_once(dfs: Client) -> None:
    size = int(CLUSTER_BYTES * 0.7)
    await dfs.write_file("/first", os.urandom(size), replication=1)
    await dfs.unlink("/first")
    st = await dfs.fsstat()
    assert (st.used_bytes, st.held_bytes) == (0, 0)
    second = os.urandom(size)
    await dfs.write_file("/second", second, replication=1)
    assert await dfs.read_file("/second") == second


async def test_rewriting_one_file_many_times_does_not_fill_the_cluster(dfs: Client) -> None:
    size = 16 * TEST_BLOCKSIZE
    rewrites = 2 * CLUSTER_BYTES // size  # twice what the cluster holds at once
    for k in range(rewrites):
        await dfs.write_file("/again", bytes([k]) * size, replication=1)
    assert await dfs.read_file("/again") == bytes([rewrites - 1]) * size
    assert (await dfs.fsstat()).used_bytes == size


async def test_blocks_a_reader_holds_tickets_for_are_held_back(dfs: Client) -> None:
    size = 8 * TEST_BLOCKSIZE
    old = os.urandom(size)
    await dfs.write_file("/read", old, replication=2)
    reader = await dfs.open("/read")  # read tickets for the old blocks
    await dfs.unlink("/read")
    st = await dfs.fsstat()
    assert st.held_bytes == 2 * size
    assert st.used_bytes == 2 * size
    # New data cannot land in the held blocks while the reader may still read them.
    fill = os.urandom(CLUSTER_BYTES - 2 * size)
    await dfs.write_file("/fill", fill, replication=1)
    assert await reader.read() == old
    assert await dfs.read_file("/fill") == fill


async def _restarted(cluster: DataCluster) -> Client:
    """Restart the namenode; a client once every datanode is live again."""
    cluster.namenode.stop()
    cluster.namenode.start()
    fs = Client(cluster.namenode.address)
    async with asyncio.timeout(30):
        while (await fs.fsstat()).live_datanodes < len(cluster.datanodes):
            await asyncio.sleep(0.05)  # heartbeats arrive every 200 ms
    return fs


async def test_a_restarted_namenode_holds_back_blocks_read_before(
    data_cluster: DataCluster,
) -> None:
    size = 8 * TEST_BLOCKSIZE
    namenode = data_cluster.namenode
    async with Client(namenode.address) as fs:
        await fs.write_file("/unread", os.urandom(size), replication=1)
    async with await _restarted(data_cluster) as fs:
        await fs.unlink("/unread")  # no read ticket was ever issued for any file
        assert (await fs.fsstat()).held_bytes == 0
        await fs.write_file("/read", os.urandom(size), replication=1)
        await fs.read_file("/read")
    async with await _restarted(data_cluster) as fs:
        await fs.unlink("/read")  # its tickets, issued before the restart, may be in use
        assert (await fs.fsstat()).held_bytes == size
