"""Every call to the namenode is authenticated: without a token, with a forged one, an
expired or revoked one, or one of a removed user, every RPC of its client services
ends UNAUTHENTICATED (the datanode registry is checked by certificate instead:
test_datanode_auth.py). Administration needs a superuser. The library and the CLI
report a refusal as AuthenticationError and one line; a token file others can read is
refused before it is used."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import grpc
import pytest

from plasmafs.client import AuthenticationError, Client, SyncClient
from plasmafs.core.credentials import format_token
from plasmafs.core.errors import ConfigError, OperationNotPermittedError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from tests.support.accounts import (
    ALICE_EXPIRED_TOKEN,
    ALICE_REVOKED_TOKEN,
    BOB_TOKEN,
    TOKENS,
    write_test_token,
)
from tests.support.cli_runner import assert_error, assert_ok, clean_env, run_pfs
from tests.support.cluster import NamenodeProcess, channel, run

FORGED = format_token(1, b"not root's secret, just 32 bytes")
BAD_TOKENS = {
    "forged": (FORGED, "unknown credential"),
    "malformed": ("pfs1.1.short", "malformed token"),
    "expired": (ALICE_EXPIRED_TOKEN, "credential expired"),
    "revoked": (ALICE_REVOKED_TOKEN, "credential revoked"),
}
CLIENT_SERVICES = ("Namenode", "Admin", "Accounts")


def _methods() -> Iterator[tuple[str, str, bool, bool]]:
    """(service, method, client streams, server streams) of the client services."""
    for service in CLIENT_SERVICES:
        for m in pb.DESCRIPTOR.services_by_name[service].methods:
            yield service, m.name, m.client_streaming, m.server_streaming


def _call(
    address: str, service: str, method: str, streams: tuple[bool, bool], metadata: tuple
) -> grpc.StatusCode:
    """Call `method` with an empty request (or stream of one frame); its status."""
    descriptor = pb.DESCRIPTOR.services_by_name[service].methods_by_name[method]
    request_class = getattr(pb, descriptor.input_type.name)
    reply_class = getattr(pb, descriptor.output_type.name)
    path = f"/{pb.DESCRIPTOR.package}.{service}/{method}"
    client_streams, server_streams = streams
    with channel(address) as link:
        kind = {
            (False, False): link.unary_unary,
            (False, True): link.unary_stream,
            (True, False): link.stream_unary,
            (True, True): link.stream_stream,
        }[(client_streams, server_streams)]
        call = kind(
            path,
            request_serializer=request_class.SerializeToString,
            response_deserializer=reply_class.FromString,
        )
        request = iter([request_class()]) if client_streams else request_class()
        try:
            reply = call(request, timeout=10, metadata=metadata)
            if server_streams:
                list(reply)
        except grpc.RpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


@pytest.mark.parametrize(
    ("service", "method", "client_streams", "server_streams"), list(_methods())
)
def test_every_rpc_refuses_missing_and_bad_tokens(
    namenode: NamenodeProcess,
    service: str,
    method: str,
    client_streams: bool,
    server_streams: bool,
) -> None:
    streams = (client_streams, server_streams)
    assert _call(namenode.address, service, method, streams, ()) is (
        grpc.StatusCode.UNAUTHENTICATED
    )
    for token, _ in BAD_TOKENS.values():
        metadata = (("authorization", f"Bearer {token}"),)
        assert _call(namenode.address, service, method, streams, metadata) is (
            grpc.StatusCode.UNAUTHENTICATED
        ), token
    not_bearer = (("authorization", f"Basic {TOKENS['root']}"),)
    assert _call(namenode.address, service, method, streams, not_bearer) is (
        grpc.StatusCode.UNAUTHENTICATED
    )


@pytest.mark.parametrize("kind", sorted(BAD_TOKENS))
async def test_the_library_raises_authentication_error(
    namenode: NamenodeProcess, kind: str
) -> None:
    token, reason = BAD_TOKENS[kind]
    fs = Client(namenode.address, token=token)
    try:
        with pytest.raises(AuthenticationError, match=reason):
            await fs.connection()
        with pytest.raises(AuthenticationError, match=reason):
            await fs.listdir("/")  # no reconnect loop: the same refusal
    finally:
        await fs.close()


def test_a_removed_user_is_refused(dsn: str, tmp_path: Path) -> None:
    async def remove_bob() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("DELETE FROM users WHERE name = 'bob'")
        finally:
            await conn.close()

    run(remove_bob())
    namenode = NamenodeProcess(dsn, tmp_path).start()
    try:
        with pytest.raises(AuthenticationError, match="unknown credential"):
            SyncClient(namenode.address, token=BOB_TOKEN)
    finally:
        namenode.stop()


def test_the_cli_reports_a_refusal_in_one_line(namenode: NamenodeProcess, tmp_path: Path) -> None:
    env = clean_env(tmp_path, namenode.address)
    revoked = tmp_path / "revoked.token"
    revoked.write_text(ALICE_REVOKED_TOKEN + "\n")
    revoked.chmod(0o600)
    result = run_pfs(env, "--token-file", str(revoked), "ls", "/")
    assert_error(result, "ls", "not authenticated", "credential revoked")
    env_without = {k: v for k, v in env.items() if k != "PFS_TOKEN_FILE"}
    assert_error(run_pfs(env_without, "mkdir", "/x"), "mkdir", "no credential")
    assert_ok(run_pfs(env, "ls", "/"), "")  # root, through PFS_TOKEN_FILE


def test_a_token_file_others_can_read_is_refused(namenode: NamenodeProcess, tmp_path: Path) -> None:
    path = write_test_token(tmp_path, "alice")
    path.chmod(0o644)
    env = clean_env(tmp_path, namenode.address)
    line = assert_error(run_pfs(env, "--token-file", str(path), "ls", "/"), "ls")
    assert str(path) in line and "0644" in line
    with pytest.raises(ConfigError, match="0644"):
        SyncClient(namenode.address, token_file=path)


def test_a_token_is_never_sent_in_plaintext(namenode: NamenodeProcess) -> None:
    with pytest.raises(ConfigError, match="plaintext"):
        Client(namenode.address, tls=False, token=TOKENS["alice"])


async def test_administration_needs_a_superuser(namenode: NamenodeProcess) -> None:
    async with Client(namenode.address, token=TOKENS["alice"]) as fs:
        assert await fs.listdir("/") == []  # alice is a user of the cluster
        with pytest.raises(OperationNotPermittedError, match="superuser"):
            await fs.datanodes()
        with pytest.raises(OperationNotPermittedError, match="superuser"):
            await fs.decommission(1)
        with pytest.raises(OperationNotPermittedError, match="superuser"):
            _ = [item async for item in fs.fsck("/")]
    async with Client(namenode.address) as fs:  # root, through PFS_TOKEN_FILE
        assert await fs.datanodes() == []


def test_the_session_names_the_user(namenode: NamenodeProcess) -> None:
    for name, token in TOKENS.items():
        with channel(namenode.address) as link:
            call = pb_grpc.NamenodeStub(link).Session(
                iter(()), metadata=(("authorization", f"Bearer {token}"),)
            )
            assert ("pfs-user", name) in tuple(call.initial_metadata())
            call.cancel()


def test_root_token_env_is_what_tests_act_with() -> None:
    assert Path(os.environ["PFS_TOKEN_FILE"]).read_text().strip() == TOKENS["root"]
