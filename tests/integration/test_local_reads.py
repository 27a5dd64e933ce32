"""Shared-memory local reads: same bytes as gRPC, scoped by tickets, robust to either side
dying, and nothing left behind by killed readers."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plasmafs.client import Client, FileReader, PermissionDeniedError, SyncClient
from plasmafs.client.shm_read import LocalConnection
from plasmafs.core import tickets as ticket_rules
from plasmafs.core.proto import datanode_pb2 as dpb
from tests.conftest import DataCluster

BS = 64 * 1024
SIZES = [0, 1, BS - 1, BS, BS + 1, 10 * BS + 7, 300 * BS + 5]


def _memfds(pid: int) -> int:
    fds = Path(f"/proc/{pid}/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            if "memfd:pfs-local-read" in os.readlink(fd):
                count += 1
        except OSError:
            continue
    return count


async def test_identical_bytes_through_both_paths(data_cluster: DataCluster) -> None:
    address = data_cluster.namenode.address
    local, remote = Client(address, local_reads=True), Client(address, local_reads=False)
    try:
        for size in SIZES:
            data = os.urandom(size)
            await local.write_file(f"/f{size}", data, replication=2)
            assert await local.read_file(f"/f{size}") == data
            assert await remote.read_file(f"/f{size}") == data
            reader = await local.open(f"/f{size}")
            assert isinstance(reader, FileReader)
            if size > 100:
                assert await reader.pread(size - 100, 100) == data[-100:]
        assert local.data.local.reads > 0  # the shared-memory path was taken
        assert remote.data.local.reads == 0
    finally:
        await local.close()
        await remote.close()


async def test_pipelined_local_reads_in_order_and_after_an_abandoned_stream(
    data_cluster: DataCluster,
) -> None:
    fs = Client(data_cluster.namenode.address, local_reads=True)
    try:
        data = os.urandom(40 * BS + 123)
        await fs.write_file("/p", data, replication=1)
        fs.data.local.request_blocks = 3  # many requests per extent: two are in flight
        reader = await fs.open("/p")
        assert isinstance(reader, FileReader)
        got = bytearray()
        async for piece in reader.stream(5, 30 * BS):
            got += piece
        assert bytes(got) == data[5 : 5 + 30 * BS]
        stream = reader.stream()
        first = bytes(await anext(stream))
        assert first == data[: len(first)]
        before = fs.data.local.reads
        await stream.aclose()  # stopping early ends the reads in flight at once
        assert await fs.read_file("/p") == data
        assert fs.data.local.reads - before >= 14  # the whole file again, locally
    finally:
        await fs.close()


async def test_local_access_stays_inside_the_ticket(dfs: Client, data_cluster: DataCluster) -> None:
    await dfs.write_file("/f", os.urandom(4 * BS), replication=1)
    replica = (await dfs.blocks("/f")).extents[0].replicas[0]
    ticket = dpb.Ticket.FromString(replica.ticket)
    conn = LocalConnection(replica.local_socket)
    try:
        ok = dpb.ReadRequest(ticket=ticket, block_start=ticket.block_start, block_count=1)
        assert len(conn.read_blocking(ok)) == BS
        beyond = dpb.ReadRequest(
            ticket=ticket, block_start=ticket.block_start + ticket.block_count, block_count=1
        )
        with pytest.raises(PermissionDeniedError, match="outside the ticket"):
            conn.read_blocking(beyond)
        forged = dpb.Ticket()
        forged.CopyFrom(ticket)
        forged.block_start = 0
        forged.block_count = 256
        with pytest.raises(PermissionDeniedError, match="forged"):
            conn.read_blocking(dpb.ReadRequest(ticket=forged, block_start=0, block_count=1))
        expired = ticket_rules.sign(
            b"k" * 32, ticket.datanode_id, 0, 1, write=False, ttl_seconds=-1
        )
        with pytest.raises(PermissionDeniedError):
            conn.read_blocking(dpb.ReadRequest(ticket=expired, block_start=0, block_count=1))
    finally:
        conn.close()


async def test_a_datanode_killed_mid_read_fails_over(
    dfs: Client, data_cluster: DataCluster
) -> None:
    data = os.urandom(200 * BS)
    await dfs.write_file("/f", data, replication=2)
    reader = await dfs.open("/f")
    assert isinstance(reader, FileReader) and reader.blocks is not None
    first = await reader.read(3 * BS)
    victim = reader.blocks.extents[0].replicas[0].datanode_id
    next(d for d in data_cluster.datanodes if d.datanode_id == victim).kill9()
    assert first + await reader.read() == data


async def test_a_vanished_socket_falls_back_to_grpc(dfs: Client, data_cluster: DataCluster) -> None:
    data = os.urandom(20 * BS)
    await dfs.write_file("/f", data, replication=3)
    for d in data_cluster.datanodes:
        (d.volume / "datanode.sock").unlink()
    fresh = Client(data_cluster.namenode.address)
    try:
        assert await fresh.read_file("/f") == data
        assert fresh.data.local.reads == 0
    finally:
        await fresh.close()


# A minimal local reader (no plasmafs imports, so that 1,000 of them start quickly):
# it sends one request, receives the segment descriptor and the answer, and waits.
_RAW_READER = """
import os, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
req = bytes.fromhex(sys.argv[2])
s.sendall(struct.pack(">I", len(req)) + req)
head, fds, _, _ = socket.recv_fds(s, 4, 1)
print("got" if fds else "none", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_a_thousand_killed_readers_leave_nothing_behind(data_cluster: DataCluster) -> None:
    with SyncClient(data_cluster.namenode.address) as fs:
        fs.write_file("/big", os.urandom(8 * BS), replication=3)
        replica = fs.blocks("/big").extents[0].replicas[0]
    node = next(d for d in data_cluster.datanodes if d.datanode_id == replica.datanode_id)
    read = dpb.ReadRequest(
        ticket=dpb.Ticket.FromString(replica.ticket),
        block_start=replica.block_start,
        block_count=1,
    )
    request = dpb.LocalRequest(read=read).SerializeToString().hex()
    shm_before = _shm_segments()
    memfds_before = _memfds(node.pid)
    for batch in range(50):
        procs = [
            subprocess.Popen(
                [sys.executable, "-S", "-c", _RAW_READER, replica.local_socket, request],
                stdout=subprocess.PIPE,
            )
            for _ in range(20)
        ]
        for proc in procs:  # each holds a segment now
            assert proc.stdout is not None and proc.stdout.readline() == b"got\n", batch
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
    for _ in range(100):
        if _memfds(node.pid) == memfds_before:
            break
        time.sleep(0.1)
    assert _memfds(node.pid) == memfds_before
    assert _shm_segments() == shm_before


async def test_switch_off_with_the_environment(
    data_cluster: DataCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PFS_LOCAL_READS", "0")
    fs = Client(data_cluster.namenode.address)
    try:
        await fs.write_file("/f", b"abc" * 1000)
        assert await fs.read_file("/f") == b"abc" * 1000
        assert fs.data.local.reads == 0 and not fs.data.local.enabled
    finally:
        await fs.close()
    await asyncio.sleep(0)


def _shm_segments() -> list[str]:
    """Named shared memory, but PostgreSQL servers' (other tests' come and go)."""
    return sorted(n for n in os.listdir("/dev/shm") if not n.startswith("PostgreSQL."))
