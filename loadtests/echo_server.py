"""A trivial unary gRPC echo service: the floor a unary design cannot beat.

Run as `python -m loadtests.echo_server READY_FILE`; it writes its address there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grpc
import uvloop

from loadtests.harness import serve_floor

SERVICE = "plasmafs.bench.Echo"
METHOD = f"/{SERVICE}/Echo"


def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


async def serve(ready: Path) -> None:
    """Serve until SIGTERM."""
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Echo": grpc.unary_unary_rpc_method_handler(
                _echo, request_deserializer=None, response_serializer=None
            )
        },
    )
    await serve_floor(handler, ready)


if __name__ == "__main__":
    uvloop.run(serve(Path(sys.argv[1])))
