"""Run a datanode: open the volume, register with the namenode, serve, heartbeat."""

from __future__ import annotations

import asyncio
import logging
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from plasmafs.client import channels
from plasmafs.client.errors import ConfigError
from plasmafs.client.proto import namenode_pb2 as pb
from plasmafs.client.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.client.rpc_status import error_from_rpc
from plasmafs.datanode.local import LocalReadServer
from plasmafs.datanode.registration import Registration
from plasmafs.datanode.service import DatanodeServicer, add_to_server
from plasmafs.datanode.settings import DatanodeSettings
from plasmafs.datanode.volume import Volume

log = logging.getLogger(__name__)


async def register(
    settings: DatanodeSettings,
    volume: Volume,
    address: str,
    registration: Registration,
    local_socket: Path | None,
) -> int:
    """Register with the namenode (retrying until it answers); return the heartbeat period."""
    request = pb.RegisterRequest(
        local_socket=str(local_socket) if local_socket else "",
        identity=volume.info.identity,
        host=settings.host_identity,
        address=address,
        blocksize=volume.info.blocksize,
        capacity_blocks=volume.info.capacity_blocks,
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.register_timeout
    async with grpc.aio.insecure_channel(settings.namenode) as channel:
        stub = pb_grpc.DatanodeRegistryStub(channel)
        while True:
            try:
                reply = await stub.Register(request, timeout=10)
                break
            except grpc.RpcError as exc:
                error = error_from_rpc(exc)
                if exc.code() not in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                ):
                    raise error from exc
                if loop.time() > deadline:
                    raise ConfigError(
                        f"the namenode at {settings.namenode} did not answer within "
                        f"{settings.register_timeout:g}s"
                    ) from exc
                await asyncio.sleep(0.5)
    registration.datanode_id = reply.datanode_id
    registration.secret = reply.ticket_secret
    log.info("registered as datanode %d (volume %s)", reply.datanode_id, volume.info.identity)
    return reply.heartbeat_ms


async def heartbeats(
    settings: DatanodeSettings, volume: Volume, registration: Registration, period_ms: int
) -> None:
    """Tell the namenode every period that this datanode lives."""
    async with grpc.aio.insecure_channel(settings.namenode) as channel:
        stub = pb_grpc.DatanodeRegistryStub(channel)
        request = pb.HeartbeatRequest(
            datanode_id=registration.datanode_id, identity=volume.info.identity
        )
        while True:
            await asyncio.sleep(period_ms / 1000)
            try:
                await stub.Heartbeat(request, timeout=period_ms / 1000)
            except grpc.RpcError as exc:
                log.warning("heartbeat failed: %s", error_from_rpc(exc))


async def serve(settings: DatanodeSettings) -> None:
    """Serve until SIGTERM or SIGINT."""
    volume = Volume.open(
        settings.volume,
        settings.blocksize,
        settings.capacity,
        sync=settings.sync != "none",
        direct=settings.sync == "direct",
    )
    io = ThreadPoolExecutor(settings.io_threads, thread_name_prefix="pfs-io")
    registration = Registration()
    local = None
    if settings.local_reads:
        local = LocalReadServer(
            settings.local_socket or settings.volume / "datanode.sock",
            volume,
            registration,
            settings.local_read_connections,
        )
    try:
        await _serve(settings, volume, registration, io, local)
    finally:
        # Every thread that reads or writes the volume has ended before it closes.
        if local is not None:
            await asyncio.to_thread(local.stop)
        await asyncio.to_thread(io.shutdown)
        volume.close()


async def _serve(
    settings: DatanodeSettings,
    volume: Volume,
    registration: Registration,
    io: ThreadPoolExecutor,
    local: LocalReadServer | None,
) -> None:
    server = grpc.aio.server(options=channels.DATANODE_SERVER)
    add_to_server(DatanodeServicer(volume, registration, io), server)
    port = server.add_insecure_port(settings.listen)
    if port == 0:
        raise ConfigError(f"cannot listen on {settings.listen}")
    host = settings.listen.rpartition(":")[0]
    address = settings.advertise or f"{host}:{port}"
    if local is not None:
        local.start()
    period = await register(settings, volume, address, registration, local.path if local else None)
    await server.start()
    log.info("datanode serving %s on %s", settings.volume, address)
    if settings.ready_file is not None:
        tmp = settings.ready_file.with_suffix(".tmp")
        tmp.write_text(f"{address}\n")
        tmp.replace(settings.ready_file)
    beating = asyncio.create_task(heartbeats(settings, volume, registration, period))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    beating.cancel()
    await server.stop(5)
