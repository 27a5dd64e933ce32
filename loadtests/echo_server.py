"""A trivial unary gRPC echo service: the floor a unary design cannot beat.

Run as `python -m loadtests.echo_server READY_FILE`; it writes its address there.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import grpc
import uvloop

SERVICE = "plasmafs.bench.Echo"
METHOD = f"/{SERVICE}/Echo"


def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


async def serve(ready: Path) -> None:
    """Serve until SIGTERM."""
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Echo": grpc.unary_unary_rpc_method_handler(
                _echo, request_deserializer=None, response_serializer=None
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    ready.write_text(f"127.0.0.1:{port}\n")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(0)


if __name__ == "__main__":
    uvloop.run(serve(Path(sys.argv[1])))
