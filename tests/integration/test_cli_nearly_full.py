"""Writes of unknown size (`pfs put -`, `open(..., "wb")` without size_hint) on a nearly
full cluster: they ask the namenode for long runs of blocks, and for fewer when it has
not that many, so one free block per replica is enough."""

from __future__ import annotations

import os
import subprocess
import sys

from plasmafs.client import Client, FileWriter
from tests.conftest import TEST_CAPACITY, DataCluster
from tests.support.cli_runner import CLUSTER_TRUST

BS = 64 * 1024
BLOCKS_PER_DATANODE = TEST_CAPACITY // BS


def _put_stdin(cluster: DataCluster, *args: str, data: bytes) -> subprocess.CompletedProcess[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PFS_", "PG")) or k in CLUSTER_TRUST
    }
    env["PFS_CLIENT_NAMENODE"] = cluster.namenode.address
    return subprocess.run(
        [sys.executable, "-m", "plasmafs.cli", "put", *args],
        env=env,
        input=data,
        capture_output=True,
        timeout=120,
    )


async def test_unknown_sizes_fit_into_the_last_free_blocks(
    dfs: Client, data_cluster: DataCluster
) -> None:
    # Every datanode is full but for 2 blocks (the filler has a replica on each).
    filler = os.urandom((BLOCKS_PER_DATANODE - 2) * BS)
    await dfs.write_file("/filler", filler, replication=3)

    tiny3 = _put_stdin(data_cluster, "-rep", "3", "-", "/tiny3", data=b"tiny\n")
    assert tiny3.returncode == 0, tiny3.stderr  # one block on each of the 3 datanodes
    tiny1 = _put_stdin(data_cluster, "-", "/tiny1", data=b"tiny too\n")
    assert tiny1.returncode == 0, tiny1.stderr
    assert await dfs.read_file("/tiny3") == b"tiny\n"
    assert await dfs.read_file("/tiny1") == b"tiny too\n"
    assert (await dfs.stat("/tiny3")).replication == 3

    # The library, no size hint: the 2 blocks left, on two datanodes, in two allocations.
    data = os.urandom(2 * BS - 10)
    writer = await dfs.open("/lib", "wb")
    assert isinstance(writer, FileWriter)
    async with writer:
        for k in range(0, len(data), 10_000):
            await writer.write(data[k : k + 10_000])
    assert await dfs.read_file("/lib") == data
    blocks = await dfs.blocks("/lib")
    assert sum(e.block_count for e in blocks.extents) == 2

    # Now nothing is free: a one-line error, and nothing is left behind.
    full = _put_stdin(data_cluster, "-", "/no-room", data=b"x")
    err = full.stderr.decode()
    assert full.returncode == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("pfs: put: ") and "Traceback" not in err, err
    assert not await dfs.exists("/no-room")
    assert await dfs.read_file("/filler") == filler
