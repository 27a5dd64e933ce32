"""The bare gRPC streaming floor: a server that streams N messages of 1 MiB.

`python -m loadtests.stream_server READY_FILE` serves; `python -m loadtests.stream_server
pull ADDRESS N` is the client side, in its own process so that both ends cost what they
cost. `--tuned` gives both ends the allocator settings pfs and the datanodes run with
(plasmafs.core.runtime.freed_buffers): the floor our data path is held to, since the same settings
alone make the bare stream ~40% faster here."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import uvloop

from loadtests.harness import serve_floor
from plasmafs.core.runtime.freed_buffers import reuse_freed_buffers

SERVICE = "plasmafs.bench.Stream"
METHOD = f"/{SERVICE}/Pull"
MIB = 1024 * 1024
OPTIONS = [("grpc.max_receive_message_length", 8 * MIB), ("grpc.max_send_message_length", 8 * MIB)]


async def _pull(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    payload = bytes(MIB)
    for _ in range(int(request.decode())):
        yield payload


async def serve(ready: Path) -> None:
    """Serve until SIGTERM."""
    handler = grpc.method_handlers_generic_handler(
        SERVICE, {"Pull": grpc.unary_stream_rpc_method_handler(_pull)}
    )
    await serve_floor(handler, ready, OPTIONS)


async def pull(address: str, mib: int) -> float:
    """MB/s of receiving `mib` messages of 1 MiB."""
    async with grpc.aio.insecure_channel(address, options=OPTIONS) as channel:
        call = channel.unary_stream(METHOD)
        start = time.perf_counter()
        n = 0
        async for message in call(str(mib).encode()):
            n += len(message)
        return n / (time.perf_counter() - start) / 1e6


if __name__ == "__main__":
    if "--tuned" in sys.argv:
        sys.argv.remove("--tuned")
        reuse_freed_buffers()
    if sys.argv[1] == "pull":
        print(uvloop.run(pull(sys.argv[2], int(sys.argv[3]))))
    else:
        uvloop.run(serve(Path(sys.argv[1])))
