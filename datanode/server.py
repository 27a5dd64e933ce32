"""Run a datanode: open the volume, register with the namenode, serve, and keep the
background work going (heartbeats, copy tasks, the scrub, metrics)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from concurrent.futures import ThreadPoolExecutor

import grpc

from plasmafs.core import channel_options as channels
from plasmafs.core.errors import ConfigError
from plasmafs.core.tls import add_port
from plasmafs.datanode.copier import Copier
from plasmafs.datanode.heartbeat import Heartbeats, NamenodeLink, Outbox
from plasmafs.datanode.inflight import InflightWrites
from plasmafs.datanode.metrics import DatanodeMetrics, values
from plasmafs.datanode.peers import Peers
from plasmafs.datanode.ratelimit import RateLimit
from plasmafs.datanode.registration import Registration
from plasmafs.datanode.scrubber import Scrubber
from plasmafs.datanode.service import DatanodeServicer, add_to_server
from plasmafs.datanode.settings import DatanodeSettings
from plasmafs.datanode.shm_server import LocalDataServer
from plasmafs.datanode.volume import Volume

log = logging.getLogger(__name__)


TERM_FILE = "namenode.term"  # the newest namenode term heard of (Registration)


async def serve(settings: DatanodeSettings) -> None:
    """Serve until SIGTERM or SIGINT."""
    volume = Volume.open(
        settings.volume,
        settings.blocksize,
        settings.capacity,
        sync=settings.sync != "none",
        direct=settings.sync == "direct",
        direct_required=settings.direct_required,
    )
    io = ThreadPoolExecutor(settings.io_threads, thread_name_prefix="pfs-io")
    # The scrub reads on a thread of its own: a pass never takes the threads clients need.
    scrub_reader = ThreadPoolExecutor(1, thread_name_prefix="pfs-scrub")
    registration = Registration(settings.volume / TERM_FILE)
    inflight = InflightWrites()
    local = None
    if settings.local_reads:
        local = LocalDataServer(
            settings.local_socket or settings.volume / "datanode.sock",
            volume,
            registration,
            inflight,
            settings.local_read_connections,
        )
    try:
        await _serve(settings, volume, registration, inflight, io, scrub_reader, local)
    finally:
        # Every thread that reads or writes the volume has ended before it closes.
        if local is not None:
            await asyncio.to_thread(local.stop)
        await asyncio.to_thread(io.shutdown)
        await asyncio.to_thread(scrub_reader.shutdown)
        volume.close()


async def _serve(
    settings: DatanodeSettings,
    volume: Volume,
    registration: Registration,
    inflight: InflightWrites,
    io: ThreadPoolExecutor,
    scrub_reader: ThreadPoolExecutor,
    local: LocalDataServer | None,
) -> None:
    tls = settings.channel_tls()
    outbox = Outbox()
    copier = Copier(
        volume,
        inflight,
        io,
        RateLimit(settings.replication_bandwidth),
        settings.replication_streams,
        outbox.copy_ended,
        tls,
    )
    peers = Peers()
    servicer = DatanodeServicer(volume, registration, io, inflight, copier, peers)
    server = grpc.aio.server(options=channels.DATANODE_SERVER)
    add_to_server(servicer, server)
    # Data in plaintext (data_tls = false) for trusted networks: tickets still authorize
    # every call, and the registry link keeps its TLS and certificate.
    port = add_port(server, settings.listen, settings.server_tls() if settings.data_tls else None)
    if port == 0:
        raise ConfigError(f"cannot listen on {settings.listen}")
    host = settings.listen.rpartition(":")[0]
    address = settings.advertise or f"{host}:{port}"
    if local is not None:
        local.start()
    link = NamenodeLink(settings, volume, registration, address, local.path if local else None, tls)
    peers.lookup = link.peer
    scrubber = Scrubber(
        volume,
        inflight,
        scrub_reader,
        link.used_blocks,
        outbox.bad_blocks,
        RateLimit(settings.scrub_bandwidth),
        settings.scrub_pause,
    )
    link.registered = scrubber.owners_due.set  # a namenode's records meet our stamps
    heartbeats = Heartbeats(link, outbox, copier, scrubber)
    metrics = DatanodeMetrics(lambda: values(servicer, local, copier, scrubber, heartbeats))
    background: list[asyncio.Task[None]] = []
    try:
        await link.register()
        await server.start()
        log.info("datanode serving %s on %s", settings.volume, address)
        if settings.metrics_listen:
            log.info("metrics on port %d", metrics.serve(settings.metrics_listen))
        if settings.ready_file is not None:
            tmp = settings.ready_file.with_suffix(".tmp")
            tmp.write_text(f"{address}\n")
            tmp.replace(settings.ready_file)
        background.append(asyncio.create_task(heartbeats.run(), name="heartbeats"))
        background.append(asyncio.create_task(scrubber.run_owner_checks(), name="owners"))
        if settings.scrub_bandwidth > 0:
            background.append(asyncio.create_task(scrubber.run(), name="scrub"))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        for task in background:
            task.cancel()
        for task in background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await copier.close()  # returns once no copy writes any more
        await server.stop(5)
        await link.close()
        metrics.stop()
