"""Local-read backpressure: a datanode serves at most PFS_DATANODE_LOCAL_READ_CONNECTIONS
shared-memory connections, with one thread each; any more are refused at once and
their clients read over gRPC."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plasmafs.client import Client, UnavailableError
from plasmafs.client.shm_read import LocalConnection
from plasmafs.core.attributes import Replica
from plasmafs.core.proto import datanode_pb2 as dpb
from tests.support.cluster import DatanodeProcess, NamenodeProcess

BS = 64 * 1024
CAP = 2
REFUSAL = f"at most {CAP} local-read connections"


@dataclass
class CappedCluster:
    """A namenode and one datanode that serves at most CAP local-read connections."""

    namenode: NamenodeProcess
    datanode: DatanodeProcess


@pytest.fixture
def capped(dsn: str, tmp_path: Path) -> Iterator[CappedCluster]:
    """A namenode (blocksize 64 KiB) and one datanode capped at CAP local connections."""
    namenode = NamenodeProcess(
        dsn, tmp_path, env={"PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BS)}
    ).start()
    datanode: DatanodeProcess | None = None
    try:
        datanode = DatanodeProcess(
            tmp_path / "dn1",
            namenode.registry_address,
            64 * BS,
            BS,
            env={"PFS_DATANODE_LOCAL_READ_CONNECTIONS": str(CAP)},
        ).start()
        yield CappedCluster(namenode, datanode)
    finally:
        if datanode is not None:
            datanode.stop()
        namenode.stop()


def _first_block(replica: Replica) -> dpb.ReadRequest:
    ticket = dpb.Ticket.FromString(replica.ticket)
    return dpb.ReadRequest(ticket=ticket, block_start=replica.block_start, block_count=1)


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError(f"no thread count for process {pid}")


async def _local_file(fs: Client, size: int) -> tuple[bytes, Replica]:
    data = os.urandom(size)
    await fs.write_file("/f", data, replication=1)
    return data, (await fs.blocks("/f")).extents[0].replicas[0]


async def test_a_connection_over_the_cap_is_refused_and_reads_go_over_grpc(
    capped: CappedCluster,
) -> None:
    # Written over gRPC: a pooled local-write connection would hold one of the slots.
    fs = Client(capped.namenode.address, local_reads=True, local_writes=False)
    held: list[LocalConnection] = []
    try:
        data, replica = await _local_file(fs, 20 * BS + 5)
        request = _first_block(replica)
        for _ in range(CAP):
            held.append(LocalConnection(replica.local_socket))
            assert len(held[-1].read_blocking(request)) == BS  # served: it holds a slot
        over = LocalConnection(replica.local_socket)
        try:
            with pytest.raises(UnavailableError, match=REFUSAL):
                over.read_blocking(request)
        finally:
            over.close()

        assert await fs.read_file("/f") == data
        assert fs.data.local.reads == 0  # refused, so read over gRPC

        held.pop().close()
        # The datanode frees the slot once it has seen the connection end; until then
        # reads keep falling back. Every attempt is a whole read of the file.
        for _ in range(1000):
            assert await fs.read_file("/f") == data
            if fs.data.local.reads:
                break
        assert fs.data.local.reads > 0
    finally:
        for conn in held:
            conn.close()
        await fs.close()


async def test_a_refused_local_write_goes_over_grpc(capped: CappedCluster) -> None:
    fs = Client(capped.namenode.address, local_writes=True)
    held: list[LocalConnection] = []
    try:
        _, replica = await _local_file(fs, BS)
        assert fs.data.local_writes.pieces == 1
        await fs.close()  # its pooled connection frees its slot
        fs = Client(capped.namenode.address, local_writes=True)
        request = _first_block(replica)
        for _ in range(1000):  # until the datanode has seen the closed one end
            conn = LocalConnection(replica.local_socket)
            try:
                conn.read_blocking(request)  # served: it holds a slot
            except UnavailableError:
                conn.close()
                await asyncio.sleep(0.01)
                continue
            held.append(conn)
            if len(held) == CAP:
                break
        assert len(held) == CAP
        data, _ = await _local_file(fs, 20 * BS + 5)
        assert fs.data.local_writes.pieces == 0  # refused, so written over gRPC
        assert await fs.read_file("/f") == data
    finally:
        for conn in held:
            conn.close()
        await fs.close()


async def test_the_datanode_keeps_one_thread_per_served_connection_and_no_more(
    capped: CappedCluster,
) -> None:
    pid = capped.datanode.pid
    async with Client(capped.namenode.address) as fs:
        _, replica = await _local_file(fs, 4 * BS)
    request = _first_block(replica)
    before = _threads(pid)
    conns: list[LocalConnection] = []
    served = refused = 0
    try:
        for _ in range(12 * CAP):
            conns.append(LocalConnection(replica.local_socket))
            try:
                conns[-1].read_blocking(request)
                served += 1
            except UnavailableError as exc:
                assert REFUSAL in str(exc)
                refused += 1
        assert (served, refused) == (CAP, 11 * CAP)
        assert _threads(pid) - before <= CAP
        # Stopping with connections open ends them and their threads, then the process.
        os.kill(pid, signal.SIGTERM)
        for conn in conns[:CAP]:
            with pytest.raises(ConnectionError):
                while True:  # served until the datanode's stop ends the connection
                    conn.read_blocking(request)
        _, status = await asyncio.wait_for(asyncio.to_thread(os.waitpid, pid, 0), 30)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        for conn in conns:
            conn.close()
