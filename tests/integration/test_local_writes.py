"""Shared-memory local writes: the same bytes and checksums as gRPC writes, scoped by
write tickets, a segment the client cannot resize, and the switch to turn them off."""

from __future__ import annotations

import asyncio
import fcntl
import os
import resource
import socket

import pytest

from plasmafs.client import (
    Client,
    InvalidArgumentError,
    PermissionDeniedError,
    UnavailableError,
)
from plasmafs.client.shm_read import LocalConnection
from plasmafs.core.attributes import Replica
from plasmafs.core.proto import datanode_pb2 as dpb
from plasmafs.core.shm_framing import body_length, frame, recv_exact
from tests.conftest import DataCluster

BS = 64 * 1024
SEGMENT = 8 * 1024 * 1024
SIZES = [1, BS - 1, BS, BS + 1, 10 * BS + 7, SEGMENT // 2 + 3, SEGMENT + BS + 11]


async def test_identical_bytes_through_both_paths(data_cluster: DataCluster) -> None:
    address = data_cluster.namenode.address
    local = Client(address, local_writes=True)
    remote = Client(address, local_reads=False, local_writes=False)
    try:
        for size in SIZES:
            data = os.urandom(size)
            before = local.data.local_writes.pieces
            await local.write_file(f"/f{size}", data, replication=2)
            assert local.data.local_writes.pieces > before  # the shared-memory path
            # Read over gRPC: every block's checksum is verified by the datanode.
            assert await remote.read_file(f"/f{size}") == data
        await remote.write_file("/remote", b"r" * (3 * BS))
        assert remote.data.local_writes.pieces == 0
        assert await local.read_file("/remote") == b"r" * (3 * BS)
    finally:
        await local.close()
        await remote.close()


async def test_a_file_written_in_small_pieces_and_rewritten_in_place(dfs: Client) -> None:
    """Writes of odd sizes fill the segment's halves across chunk boundaries; an
    overwrite inside the file (a copy-on-write of its blocks) goes the same way."""
    data = bytearray(os.urandom(5 * SEGMENT // 4 + 333))
    async with await dfs.open("/p", "wb", replication=2) as writer:
        for at in range(0, len(data), 100_003):
            await writer.write(data[at : at + 100_003])
    assert await dfs.read_file("/p") == data
    assert dfs.data.local_writes.pieces > 0


async def _write_ticket(fs: Client, blocks: int) -> tuple[Replica, Replica]:
    """A write replica of `blocks` fresh blocks (left uncommitted) and a read replica
    of a committed file."""
    await fs.write_file("/readable", os.urandom(BS), replication=1)
    readable = (await fs.blocks("/readable")).extents[0].replicas[0]
    t = await fs.begin()
    attr = await t.create("/scratch", replication=1)
    granted = await t.allocate(attr.ino, 0, blocks)
    return granted.extents[0].replicas[0], readable


def _piece(replica: Replica, block: int, length: int, **fields: int | bool) -> dpb.LocalRequest:
    ticket = dpb.Ticket.FromString(replica.ticket)
    write = dpb.LocalWrite(
        ticket=ticket, block_start=replica.block_start + block, length=length, **fields
    )
    return dpb.LocalRequest(write=write)


async def test_local_writes_stay_inside_a_write_ticket(dfs: Client) -> None:
    writable, readable = await _write_ticket(dfs, 4)
    conn = LocalConnection(writable.local_socket)
    try:
        conn.call_blocking(dpb.LocalRequest())  # the segment
        conn.segment[: 2 * BS] = os.urandom(2 * BS)
        assert conn.call_blocking(_piece(writable, 0, 2 * BS)).length == 2 * BS
        assert conn.call_blocking(_piece(writable, 2, 100, sync=True)).length == 100
        with pytest.raises(PermissionDeniedError, match="outside the ticket"):
            conn.call_blocking(_piece(writable, 3, 2 * BS))
        with pytest.raises(PermissionDeniedError):
            conn.call_blocking(_piece(readable, 0, BS))  # a read ticket writes nothing
        forged = _piece(writable, 0, BS)
        forged.write.ticket.block_count = 1000
        with pytest.raises(PermissionDeniedError, match="forged"):
            conn.call_blocking(forged)
        with pytest.raises(InvalidArgumentError, match="outside the segment"):
            conn.call_blocking(_piece(writable, 0, BS, data_offset=SEGMENT - BS + 1))
        with pytest.raises(InvalidArgumentError, match="inside a block"):
            conn.call_blocking(_piece(writable, 0, BS + 1))  # only a last piece may
        # The connection still serves after refusals.
        assert conn.call_blocking(_piece(writable, 0, BS, sync=True)).length == BS
    finally:
        conn.close()


async def test_the_client_cannot_resize_the_segment(dfs: Client) -> None:
    writable, _ = await _write_ticket(dfs, 1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(writable.local_socket)
        sock.sendall(frame(dpb.LocalRequest()))
        head, fds, _, _ = socket.recv_fds(sock, 4, 1)
        recv_exact(sock, body_length(head + recv_exact(sock, 4 - len(head))))
        assert len(fds) == 1
        try:
            seals = fcntl.fcntl(fds[0], fcntl.F_GET_SEALS)
            assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW
            with pytest.raises(PermissionError):
                os.ftruncate(fds[0], 0)  # would make the datanode's next access a SIGBUS
            with pytest.raises(PermissionError):
                fcntl.fcntl(fds[0], fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
            os.pwrite(fds[0], b"x" * BS, 0)
            sock.sendall(frame(_piece(writable, 0, BS, sync=True)))
            reply = dpb.LocalReply.FromString(recv_exact(sock, body_length(recv_exact(sock, 4))))
            assert (reply.code, reply.length) == (0, BS)
        finally:
            os.close(fds[0])


async def test_a_datanode_killed_mid_write_fails_the_write(
    dfs: Client, data_cluster: DataCluster
) -> None:
    await dfs.write_file("/keep", b"old", replication=2)
    writer = await dfs.open("/keep", "wb", replication=3)
    await writer.write(os.urandom(3 * BS))
    data_cluster.datanodes[0].kill9()
    with pytest.raises(UnavailableError):
        for _ in range(400):
            await writer.write(os.urandom(BS))
        await writer.close()
    assert await dfs.read_file("/keep") == b"old"
    assert dfs.data.local_writes.pieces > 0


async def test_pooled_connections_of_a_restarted_datanode_are_not_reused(
    dfs: Client, data_cluster: DataCluster
) -> None:
    for n in range(3):
        await dfs.write_file(f"/before{n}", os.urandom(BS), replication=3)
    for datanode in data_cluster.datanodes:  # every pooled connection's peer goes away
        datanode.stop()
        datanode.start()
    for _ in range(100):
        if (await dfs.fsstat()).live_datanodes == 3:
            break
        await asyncio.sleep(0.1)
    before = dfs.data.local_writes.pieces
    data = os.urandom(5 * BS)
    await dfs.write_file("/after", data, replication=3)  # new connections, not a failure
    assert dfs.data.local_writes.pieces == before + 3
    assert await dfs.read_file("/after") == data


async def test_a_connection_with_a_high_descriptor_number_is_kept(dfs: Client) -> None:
    """A process with over 1,024 files open (select() cannot watch those) still reuses
    its idle local connections."""
    writable, _ = await _write_ticket(dfs, 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    filler = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        conn = LocalConnection(writable.local_socket)
        try:
            assert conn._sock.fileno() > 1024
            conn.call_blocking(dpb.LocalRequest())
            assert conn.still_open()
        finally:
            conn.close()
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_switch_off_with_the_environment(
    data_cluster: DataCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PFS_LOCAL_WRITES", "0")
    async with Client(data_cluster.namenode.address) as fs:
        await fs.write_file("/f", b"abc" * 100_000)
        assert await fs.read_file("/f") == b"abc" * 100_000
        assert fs.data.local_writes.pieces == 0 and not fs.data.local_writes.enabled
