"""The local cluster's certificate authority: certificates that verify, private keys
only their owner can read, and gRPC channels that speak TLS with them (and refuse
plaintext or a client without a certificate where one is required)."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from plasmafs.core.errors import ConfigError
from plasmafs.local.pki import create_authority, issue_certificate, load_authority

METHOD = "/test.Echo/Echo"


def _verify(ca_pem: Path, cert_pem: Path, host: str) -> None:
    ca = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    leaf = x509.load_pem_x509_certificate(cert_pem.read_bytes())
    try:
        subject: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        subject = x509.DNSName(host)
    verifier = PolicyBuilder().store(Store([ca])).build_server_verifier(subject)
    verifier.verify(leaf, [])


def test_server_certificates_verify_for_their_names_only(tmp_path: Path) -> None:
    ca = create_authority(tmp_path)
    files = issue_certificate(
        ca, tmp_path, "namenode", "namenode", hosts=["127.0.0.1", "localhost"]
    )
    _verify(ca.files.cert, files.cert, "127.0.0.1")
    _verify(ca.files.cert, files.cert, "localhost")
    with pytest.raises(x509.verification.VerificationError):
        _verify(ca.files.cert, files.cert, "10.0.0.1")
    other = create_authority(tmp_path / "other")
    with pytest.raises(x509.verification.VerificationError):
        _verify(other.files.cert, files.cert, "127.0.0.1")


def test_private_keys_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    ca = create_authority(tmp_path)
    files = issue_certificate(ca, tmp_path, "dn", "datanode", hosts=["127.0.0.1"], client=True)
    for key in (ca.files.key, files.key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.cert.stat().st_mode) == 0o644


def test_a_ca_is_never_replaced_and_loads_back(tmp_path: Path) -> None:
    ca = create_authority(tmp_path)
    with pytest.raises(ConfigError, match="exists"):
        create_authority(tmp_path)
    assert load_authority(tmp_path).certificate == ca.certificate
    (tmp_path / "ca.key").write_text("not a key")
    with pytest.raises(ConfigError, match="cannot read"):
        load_authority(tmp_path)


def test_bad_requests_for_certificates_are_refused(tmp_path: Path) -> None:
    ca = create_authority(tmp_path)
    with pytest.raises(ConfigError, match="host name"):
        issue_certificate(ca, tmp_path, "x", "x")
    with pytest.raises(ConfigError, match="server or a client"):
        issue_certificate(ca, tmp_path, "x", "x", hosts=["h"], server=False)


async def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


async def _serve(tmp_path: Path, *, client_auth: bool) -> tuple[grpc.aio.Server, int, Path]:
    ca = create_authority(tmp_path)
    files = issue_certificate(ca, tmp_path, "server", "server", hosts=["127.0.0.1"])
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(_echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.Echo", {"Echo": handler}),)
    )
    credentials = grpc.ssl_server_credentials(
        [(files.key.read_bytes(), files.cert.read_bytes())],
        root_certificates=ca.files.cert.read_bytes(),
        require_client_auth=client_auth,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    return server, port, tmp_path


async def test_grpc_speaks_tls_with_these_certificates(tmp_path: Path) -> None:
    server, port, home = await _serve(tmp_path, client_auth=False)
    try:
        trusted = grpc.ssl_channel_credentials(root_certificates=(home / "ca.pem").read_bytes())
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", trusted) as channel:
            assert await channel.unary_unary(METHOD)(b"hello", timeout=10) == b"hello"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await channel.unary_unary(METHOD)(b"hello", timeout=5)
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        stranger = create_authority(tmp_path / "stranger")
        untrusted = grpc.ssl_channel_credentials(root_certificates=stranger.files.cert.read_bytes())
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", untrusted) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await channel.unary_unary(METHOD)(b"hello", timeout=5)
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(0)


async def test_a_server_requiring_client_certificates_refuses_clients_without(
    tmp_path: Path,
) -> None:
    server, port, home = await _serve(tmp_path, client_auth=True)
    try:
        ca = load_authority(home)
        client = issue_certificate(ca, home, "client", "datanode 1", client=True, server=False)
        root = ca.files.cert.read_bytes()
        with_cert = grpc.ssl_channel_credentials(
            root, client.key.read_bytes(), client.cert.read_bytes()
        )
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", with_cert) as channel:
            assert await channel.unary_unary(METHOD)(b"hi", timeout=10) == b"hi"
        without = grpc.ssl_channel_credentials(root)
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}", without) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await channel.unary_unary(METHOD)(b"hi", timeout=5)
            assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(0)
