"""A namenode that refuses the credential: calls fail with AuthenticationError, never
with ConnectionLostError, and the client does not reconnect until it is closed.

The namenode here is an in-process gRPC server whose every call ends UNAUTHENTICATED
with no errno, as an authentication gate ends it: a Session either at once (the
credential is refused when the stream opens, so connecting fails) or after accepting
it and one request (it was revoked meanwhile).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from plasmafs.client import AuthenticationError, Client
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc


class _Refusing(pb_grpc.NamenodeServicer):
    def __init__(self) -> None:
        self.sessions = 0
        self.accept_first = True  # admit the stream, then cut it at its first request

    async def Session(self, request_iterator: Any, context: Any) -> AsyncIterator[pb.ServerFrame]:
        self.sessions += 1
        if self.accept_first:
            await context.send_initial_metadata((("pfs-user", "alice"),))
            await anext(request_iterator, None)  # the refusal reaches a request in flight
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "credential revoked")
        yield pb.ServerFrame()  # unreachable: makes this an async generator

    async def Ping(self, request: pb.PingRequest, context: Any) -> pb.PingReply:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "credential revoked")
        raise AssertionError("unreachable")


@pytest.fixture
async def refusing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[tuple[str, _Refusing]]:
    """The address of a plaintext namenode that refuses every call, and its servicer;
    clients made with the defaults find no CA or token to use with it."""
    for name in ("PFS_CLIENT_CA", "PFS_TOKEN_FILE", "PFS_CLIENT_NAMENODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PFS_HOME", str(tmp_path))
    servicer = _Refusing()
    server = grpc.aio.server()
    pb_grpc.add_NamenodeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(None)


async def test_a_refused_stream_fails_its_requests_with_authentication_error(
    refusing: tuple[str, _Refusing],
) -> None:
    address, servicer = refusing
    async with Client(address) as fs:
        conn = await fs.connection()
        with pytest.raises(AuthenticationError, match="credential revoked"):
            await fs.getattr(1)
        assert isinstance(conn.ended_by, AuthenticationError)
        with pytest.raises(AuthenticationError):
            conn.new_request()
    assert servicer.sessions == 1


async def test_the_client_does_not_reconnect_after_a_refusal_until_closed(
    refusing: tuple[str, _Refusing],
) -> None:
    address, servicer = refusing
    fs = Client(address)
    try:
        with pytest.raises(AuthenticationError):
            await fs.getattr(1)
        for _ in range(3):
            with pytest.raises(AuthenticationError, match="credential revoked"):
                await fs.getattr(1)
        assert servicer.sessions == 1
        await fs.close()
        with pytest.raises(AuthenticationError):
            await fs.getattr(1)  # closing starts over: one new attempt
        assert servicer.sessions == 2
    finally:
        await fs.close()


async def test_a_credential_refused_at_the_start_fails_the_connect(
    refusing: tuple[str, _Refusing],
) -> None:
    address, servicer = refusing
    servicer.accept_first = False
    fs = Client(address)
    try:
        with pytest.raises(AuthenticationError, match="credential revoked"):
            await fs.connection()
        with pytest.raises(AuthenticationError, match="credential revoked"):
            await fs.getattr(1)
        assert servicer.sessions == 1
    finally:
        await fs.close()


async def test_a_refused_unary_call_is_an_authentication_error(
    refusing: tuple[str, _Refusing],
) -> None:
    address, _ = refusing
    async with Client(address) as fs:
        with pytest.raises(AuthenticationError, match="credential revoked"):
            await fs.ping()
