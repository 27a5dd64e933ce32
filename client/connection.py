"""One connection to the namenode: a long-lived bidirectional stream of framed requests.

Callers add requests to the frame being built (`new_request`) and await their
futures; a writer task sends the frame as soon as it can, so every request made while
the previous frame was being written travels in one message. Responses are matched
to requests by id. If the stream breaks, every waiting request fails with
ConnectionLostError (the namenode aborts the connection's open transactions), or
with AuthenticationError if the namenode refused or revoked the credential.

Closing does not cut the stream: the writer half-closes it, the namenode drops what
is still running for it and ends the stream, and only then the channel goes. Every
gRPC operation of the stream has reported back by then, so nothing completes on an
event loop after its owner closed it (a cancelled gRPC call can still report later).
"""

from __future__ import annotations

import asyncio

import grpc

from plasmafs.client.callers import stamp
from plasmafs.core import channel_options as channels
from plasmafs.core.errors import AuthenticationError, ConnectionLostError, PlasmaError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import (
    INLINE_LIMIT_METADATA_KEY,
    TRASH_METADATA_KEY,
    USER_METADATA_KEY,
    error_from_rpc,
)
from plasmafs.core.tls import ChannelTLS, open_channel

CLOSE_GRACE = 2.0  # seconds the namenode has to end a closed stream before it is cut


class Connection:
    """A multiplexed request stream to one namenode."""

    def __init__(self, address: str, channel: grpc.aio.Channel, token: str | None = None) -> None:
        self.address = address
        self._channel = channel
        self._stub = pb_grpc.NamenodeStub(channel)
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._call = self._stub.Session(metadata=self.metadata)
        self.user = ""  # the name the namenode authenticated, once admitted
        self.inline_limit = 0  # files up to this size may keep their content inline
        self.trash_interval = 0.0  # seconds removed entries stay in trash (0: no trash)
        self._frame = pb.ClientFrame()
        self._waiting: dict[int, asyncio.Future[pb.Response]] = {}
        self._next_request = 1
        self._next_txn = 1
        self._wake = asyncio.Event()
        self._closed: PlasmaError | None = None
        self._writer = asyncio.create_task(self._write_loop(), name="pfs-conn-writer")
        self._reader = asyncio.create_task(self._read_loop(), name="pfs-conn-reader")

    @classmethod
    async def open(
        cls,
        address: str,
        timeout: float,
        tls: ChannelTLS | None = None,
        token: str | None = None,
    ) -> Connection:
        """Connect to the namenode at host:port, waiting up to `timeout` seconds (over TLS
        verified with `tls` when given), as the user `token` authenticates;
        AuthenticationError when the namenode refuses it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        channel = open_channel(address, channels.NAMENODE_CHANNEL, tls)
        try:
            async with asyncio.timeout(timeout):
                await channel.channel_ready()
        except asyncio.CancelledError:
            await channel.close()
            raise
        except TimeoutError:
            await channel.close()
            speaking = "TLS (is PFS_CLIENT_CA the cluster's CA?)" if tls else "plaintext"
            raise ConnectionLostError(
                f"cannot reach the namenode at {address} within {timeout:g}s over {speaking}"
            ) from None
        conn = cls(address, channel, token)
        try:
            await conn._admitted(max(0.1, deadline - loop.time()))
        except asyncio.CancelledError:
            await conn.close()
            raise
        return conn

    async def _admitted(self, timeout: float) -> None:
        """Wait until the namenode accepted the stream (its initial metadata names the
        user at once) or refused it (it ends the call with no initial metadata); a
        refusal closes the connection and is raised."""
        try:
            async with asyncio.timeout(timeout):
                metadata = await self._call.initial_metadata()
        except (TimeoutError, grpc.RpcError) as exc:
            self._fail_all(ConnectionLostError(f"the namenode at {self.address} did not answer"))
            await self.close()
            raise ConnectionLostError(
                f"the namenode at {self.address} did not accept the connection: {exc}"
            ) from None
        values = dict(metadata or ())
        user = values.get(USER_METADATA_KEY)
        if user is not None:
            self.user = str(user)
            self.inline_limit = int(values.get(INLINE_LIMIT_METADATA_KEY, 0))
            self.trash_interval = float(values.get(TRASH_METADATA_KEY, 0))
            return
        await asyncio.wait([self._reader], timeout=timeout)  # it ends with the status
        reason = self._closed or ConnectionLostError(f"{self.address} ended the stream")
        await self.close()
        raise _failure(reason)

    @property
    def channel(self) -> grpc.aio.Channel:
        """The gRPC channel to the namenode, for its other services (Admin)."""
        return self._channel

    @property
    def closed(self) -> bool:
        """True once the stream has ended."""
        return self._closed is not None

    @property
    def ended_by(self) -> PlasmaError | None:
        """Why the stream ended (None while it is open)."""
        return self._closed

    def next_txn_id(self) -> int:
        """A transaction id unused on this connection."""
        txn = self._next_txn
        self._next_txn += 1
        return txn

    def new_request(self) -> tuple[pb.Request, asyncio.Future[pb.Response]]:
        """Add a request to the next frame; fill it in before awaiting anything."""
        if self._closed is not None:
            raise _failure(self._closed)
        request = self._frame.requests.add()
        request.id = rid = self._next_request
        stamp(request)
        self._next_request += 1
        future: asyncio.Future[pb.Response] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        self._wake.set()
        return request, future

    async def ping(self, timeout: float = 5.0) -> pb.PingReply:
        """The namenode's version (a unary call)."""
        try:
            reply: pb.PingReply = await self._stub.Ping(
                pb.PingRequest(), timeout=timeout, metadata=self.metadata
            )
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc
        return reply

    async def close(self) -> None:
        """End the stream (the namenode aborts open transactions) and the channel."""
        if self._closed is None:
            self._fail_all(ConnectionLostError("the connection was closed"))
        tasks = (self._writer, self._reader)
        try:
            _, pending = await asyncio.wait(tasks, timeout=CLOSE_GRACE)
        finally:
            if not all(task.done() for task in tasks):
                self._call.cancel()
        if pending:
            # The namenode did not end the stream in time: cut it. The operations in
            # flight fail at once and the tasks end when gRPC has reported them (its
            # own watch on the call's status may still report a moment later).
            await asyncio.wait(tasks)
        await self._channel.close()

    async def _write_loop(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self._closed is not None:
                    break
                if len(self._frame.requests) == 0:
                    continue
                frame, self._frame = self._frame, pb.ClientFrame()
                await self._call.write(frame)
            await self._call.done_writing()
        except asyncio.CancelledError:
            raise
        except grpc.RpcError as exc:
            self._fail_all(self._lost(exc))
        except Exception as exc:
            self._fail_all(ConnectionLostError(f"stream to {self.address} failed: {exc}"))

    async def _read_loop(self) -> None:
        reason: PlasmaError = ConnectionLostError(
            f"the namenode at {self.address} closed the stream"
        )
        try:
            async for frame in self._call:
                waiting = self._waiting
                for response in frame.responses:
                    future = waiting.pop(response.id, None)
                    if future is not None and not future.done():
                        future.set_result(response)
        except asyncio.CancelledError:
            raise
        except grpc.RpcError as exc:
            reason = self._lost(exc)
        except Exception as exc:
            reason = ConnectionLostError(f"stream to {self.address} failed: {exc}")
        self._fail_all(reason)

    def _lost(self, exc: grpc.RpcError) -> PlasmaError:
        reason = error_from_rpc(exc)
        if isinstance(reason, (ConnectionLostError, AuthenticationError)):
            return reason
        return ConnectionLostError(f"stream to {self.address} failed: {reason}")

    def _fail_all(self, reason: PlasmaError) -> None:
        if self._closed is None:
            self._closed = reason
        self._wake.set()  # the writer ends the stream
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(_failure(reason))
                # Retrieved here: a request nobody awaits any more (a transaction's
                # begin, a caller that gave up) must not log "exception never retrieved";
                # whoever still awaits its future gets the error all the same.
                future.exception()


def _failure(reason: PlasmaError) -> PlasmaError:
    """What a request on a connection that ended with `reason` fails with."""
    if isinstance(reason, AuthenticationError):
        # Not a lost connection: callers that reconnect on those would be refused again.
        return AuthenticationError(str(reason))
    return ConnectionLostError(str(reason))
