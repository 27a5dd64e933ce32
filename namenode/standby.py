"""A standby namenode's ports: its client and registry addresses answer every call at
once with NotActiveError (UNAVAILABLE) naming the active namenode, so that clients
and datanodes that reach a standby go on to their next address instead of waiting
for a connect timeout, and a health check sees the process up. At takeover these
ports close and the active namenode's server opens on the same addresses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from plasmafs.core import channel_options as channels
from plasmafs.core.errors import ConfigError, NotActiveError
from plasmafs.core.rpc_status import abort_with
from plasmafs.core.tls import ServerTLS, add_port


class _Refusing(grpc.GenericRpcHandler):
    """Every method, whatever its kind, ends at once with NotActiveError."""

    def __init__(self, why: Callable[[], str]) -> None:
        self._why = why

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        why = self._why

        async def refuse(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> None:
            await abort_with(context, NotActiveError(why()))

        return grpc.stream_stream_rpc_method_handler(refuse)


class StandbyPorts:
    """The gRPC server of a standby (see the module's docstring)."""

    def __init__(self, why: Callable[[], str]) -> None:
        self._server = grpc.aio.server(options=channels.NAMENODE_SERVER)
        self._server.add_generic_rpc_handlers((_Refusing(why),))

    async def start(
        self,
        listen: str,
        client_tls: ServerTLS | None,
        registry_listen: str,
        registry_tls: ServerTLS | None,
    ) -> tuple[int, int]:
        """Open both ports; their bound port numbers."""
        port = add_port(self._server, listen, client_tls)
        if port == 0:
            raise ConfigError(f"cannot listen on {listen}")
        registry_port = add_port(self._server, registry_listen, registry_tls)
        if registry_port == 0:
            raise ConfigError(f"cannot listen on {registry_listen} (registry_listen)")
        await self._server.start()
        return port, registry_port

    async def stop(self) -> None:
        """Close both ports (calls under way end at once)."""
        await self._server.stop(0)
