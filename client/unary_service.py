"""Plain unary calls of one namenode service (Accounts, S3Keys, Snapshots) on a connection's
channel, with its credential; a refused call raises the plasmafs error the namenode
reported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from plasmafs.core.rpc_status import service_error

if TYPE_CHECKING:
    from plasmafs.client.connection import Connection

CALL_TIMEOUT = 30.0  # seconds for one call


class UnaryService:
    """The stub of `service` on one connection."""

    def __init__(self, conn: Connection, stub: Any, service: str) -> None:
        self._stub = stub(conn.channel)
        self._address = conn.address
        self._metadata = conn.metadata
        self._service = service

    async def _call(self, method: Any, request: Any, timeout: float = CALL_TIMEOUT) -> Any:
        try:
            return await method(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise service_error(exc, self._address, self._service) from None
