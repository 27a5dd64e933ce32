"""Datanodes prove who they are before the namenode admits them: they register on the
registry port with a certificate of the cluster CA, a volume is bound to the first
certificate name that registers it, and nobody else gets the ticket secret or speaks
for that volume. The volume's identity file is the owner's alone."""

from __future__ import annotations

import json
import shutil
import stat
import uuid
from pathlib import Path

import grpc
import pytest

from plasmafs.client.sync import SyncClient
from plasmafs.core.errors import StorageError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.local.pki import create_authority, issue_certificate
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY, DataCluster
from tests.support.cluster import DatanodeProcess, NamenodeProcess, client_tls, tls_env


def _request(identity: str) -> pb.RegisterRequest:
    return pb.RegisterRequest(
        identity=identity,
        host="evil",
        address="127.0.0.1:1",
        blocksize=TEST_BLOCKSIZE,
        capacity_blocks=TEST_CAPACITY // TEST_BLOCKSIZE,
    )


def _as(name: str) -> grpc.ChannelCredentials:
    """Credentials of a caller holding the run CA's certificate `name`."""
    env = tls_env("datanode", name)
    return grpc.ssl_channel_credentials(
        Path(env["PFS_DATANODE_TLS_CA"]).read_bytes(),
        Path(env["PFS_DATANODE_TLS_KEY"]).read_bytes(),
        Path(env["PFS_DATANODE_TLS_CERT"]).read_bytes(),
    )


def _registry(address: str, credentials: grpc.ChannelCredentials) -> pb_grpc.DatanodeRegistryStub:
    return pb_grpc.DatanodeRegistryStub(grpc.secure_channel(address, credentials))


def _code(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as failed:
        call()  # type: ignore[operator]
    return failed.value.code()


def test_register_needs_the_registry_port_and_a_certificate(data_cluster: DataCluster) -> None:
    nn = data_cluster.namenode
    identity = str(uuid.uuid4())
    # The client port never asks for a certificate: no datanode is known there.
    with grpc.secure_channel(nn.address, client_tls()) as link:
        stub = pb_grpc.DatanodeRegistryStub(link)
        assert _code(lambda: stub.Register(_request(identity), timeout=10)) is (
            grpc.StatusCode.UNAUTHENTICATED
        )
    # Plaintext, or TLS without a client certificate, fails the handshake.
    with grpc.insecure_channel(nn.registry_address) as link:
        stub = pb_grpc.DatanodeRegistryStub(link)
        assert _code(lambda: stub.Register(_request(identity), timeout=5)) is (
            grpc.StatusCode.UNAVAILABLE
        )
    with grpc.secure_channel(nn.registry_address, client_tls()) as link:
        stub = pb_grpc.DatanodeRegistryStub(link)
        assert _code(lambda: stub.Register(_request(identity), timeout=5)) is (
            grpc.StatusCode.UNAVAILABLE
        )


def test_a_certificate_of_another_ca_fails_the_handshake(
    data_cluster: DataCluster, tmp_path: Path
) -> None:
    foreign = create_authority(tmp_path / "foreign")
    files = issue_certificate(
        foreign, tmp_path / "foreign", "dn1", "dn1", hosts=["127.0.0.1"], client=True
    )
    ca = Path(tls_env("datanode", "dn1")["PFS_DATANODE_TLS_CA"]).read_bytes()
    credentials = grpc.ssl_channel_credentials(ca, files.key.read_bytes(), files.cert.read_bytes())
    stub = _registry(data_cluster.namenode.registry_address, credentials)
    assert _code(lambda: stub.Register(_request(str(uuid.uuid4())), timeout=5)) is (
        grpc.StatusCode.UNAVAILABLE
    )


def test_another_certificate_cannot_take_over_a_volume(data_cluster: DataCluster) -> None:
    nn, dn1 = data_cluster.namenode, data_cluster.datanodes[0]
    identity = _identity(dn1)
    evil = _registry(nn.registry_address, _as("dn-evil"))
    with pytest.raises(grpc.RpcError) as refused:
        evil.Register(_request(identity), timeout=10)
    assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "bound to another" in (refused.value.details() or "")
    # The impostor cannot speak for the datanode either.
    beat = pb.HeartbeatRequest(datanode_id=dn1.datanode_id, identity=identity)
    assert _code(lambda: evil.Heartbeat(beat, timeout=10)) is grpc.StatusCode.UNAUTHENTICATED
    used = pb.UsedBlocksRequest(datanode_id=dn1.datanode_id, identity=identity)
    assert _code(lambda: evil.UsedBlocks(used, timeout=10)) is grpc.StatusCode.UNAUTHENTICATED
    # The real datanode was not redirected: clients still reach it.
    with SyncClient(nn.address) as fs:
        fs.write_file("/f", b"x" * TEST_BLOCKSIZE, replication=3)
        replicas = fs.blocks("/f").extents[0].replicas
        assert dn1.address in {r.address for r in replicas}
        assert fs.fsstat().live_datanodes == 3


def test_a_new_certificate_registers_a_new_volume_and_gets_the_secret(
    data_cluster: DataCluster,
) -> None:
    stub = _registry(data_cluster.namenode.registry_address, _as("dn-new"))
    reply = stub.Register(_request(str(uuid.uuid4())), timeout=10)
    assert reply.datanode_id > 0 and len(reply.ticket_secret) >= 32


def test_a_datanode_process_with_a_stolen_volume_does_not_start(
    data_cluster: DataCluster, tmp_path: Path
) -> None:
    dn1 = data_cluster.datanodes[0]
    copy = tmp_path / "stolen"
    shutil.copytree(dn1.volume, copy / "volume", ignore=shutil.ignore_patterns("*.sock"))
    rogue = DatanodeProcess(
        copy,
        data_cluster.namenode.registry_address,
        TEST_CAPACITY,
        TEST_BLOCKSIZE,
        principal="dn-evil",
    )
    with pytest.raises(StorageError, match="bound to another"):
        rogue.start()


def test_volume_identity_is_private(data_cluster: DataCluster) -> None:
    for dn in data_cluster.datanodes:
        meta = dn.volume / "volume.json"
        assert stat.S_IMODE(meta.stat().st_mode) == 0o600


def test_an_old_world_readable_identity_is_made_private(dsn: str, tmp_path: Path) -> None:
    nn = NamenodeProcess(
        dsn, tmp_path, env={"PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(TEST_BLOCKSIZE)}
    ).start()
    dn = DatanodeProcess(tmp_path / "dn", nn.registry_address, TEST_CAPACITY, TEST_BLOCKSIZE)
    try:
        dn.start()
        dn.stop()
        (dn.volume / "volume.json").chmod(0o644)
        dn.start()
        assert stat.S_IMODE((dn.volume / "volume.json").stat().st_mode) == 0o600
    finally:
        dn.stop()
        nn.stop()


def _identity(dn: DatanodeProcess) -> str:
    return str(json.loads((dn.volume / "volume.json").read_text())["identity"])
