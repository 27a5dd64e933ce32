"""Running the gateway: connect to the cluster as the gateway's credential, serve the
S3 application on `listen` until SIGTERM or SIGINT, then stop taking requests and let
those in flight finish."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
import time
from typing import Literal

from aiohttp import web

from plasmafs.client import Client, config
from plasmafs.client.removing import remove_tree
from plasmafs.client.s3_keys import SigningKey
from plasmafs.core.errors import ConfigError, ExistsError, PlasmaError
from plasmafs.core.secret_files import write_private
from plasmafs.core.tls import ChannelTLS
from plasmafs.gateway.app import make_app
from plasmafs.gateway.multipart import DONE_PREFIX, UPLOAD_PREFIX
from plasmafs.gateway.object_keys import staging_path
from plasmafs.gateway.requests import Gateway
from plasmafs.gateway.settings import GatewaySettings
from plasmafs.gateway.signing_keys import SigningKeys

log = logging.getLogger(__name__)
SHUTDOWN_GRACE = 30.0
STALE_UPLOAD_NS = 24 * 3600 * 1_000_000_000
# A multipart upload no part came to for a week is abandoned (S3 keeps them until a
# lifecycle rule removes them; this gateway has no lifecycle rules).
ABANDONED_MULTIPART_NS = 7 * 24 * 3600 * 1_000_000_000
SWEEP_EVERY = 3600.0  # seconds


def _client(settings: GatewaySettings) -> Client:
    tls: ChannelTLS | Literal[False] | None = None
    if settings.insecure:
        tls = False
    elif settings.tls_ca is not None:
        tls = ChannelTLS.from_files(settings.tls_ca)
    address = config.namenode_address(settings.namenode)
    return Client(address, tls=tls, token_file=settings.token_file)


async def prepare_staging(fs: Client, root: str) -> None:
    """Make the staging directory uploads are written in (anyone may create files in
    it; the sticky bit keeps them their owners'), then sweep it."""
    staging = staging_path(root, "").rstrip("/")
    try:
        await fs.mkdir(staging, 0o1777)
        await fs.chmod(staging, 0o1777)  # as asked, whatever the namenode's umask
    except ExistsError:
        pass
    await sweep_staging(fs, root)


async def sweep_staging(fs: Client, root: str) -> None:
    """Remove what uploads cut off by a crash left in the staging directory more than a
    day ago, multipart uploads no part came to for a week, and the notes of uploads
    completed more than a day ago."""
    staging = staging_path(root, "").rstrip("/")
    now = time.time_ns()
    async for entry in fs.scandir(staging, plus=True):
        attr, path = entry.attr, f"{staging}/{entry.name}"
        if attr is None:
            continue
        with contextlib.suppress(PlasmaError):
            if not attr.is_dir:
                if attr.mtime_ns < now - STALE_UPLOAD_NS:
                    await fs.unlink(path)
            elif entry.name.startswith(UPLOAD_PREFIX):
                if attr.mtime_ns < now - ABANDONED_MULTIPART_NS:
                    await remove_tree(fs, path)
            elif entry.name.startswith(DONE_PREFIX) and attr.mtime_ns < now - STALE_UPLOAD_NS:
                await remove_tree(fs, path)


async def _sweep_hourly(fs: Client, root: str) -> None:
    while True:
        await asyncio.sleep(SWEEP_EVERY)
        try:
            await sweep_staging(fs, root)
        except PlasmaError as exc:
            log.warning("sweeping the staging directory failed: %s; next try in an hour", exc)


def _https(settings: GatewaySettings) -> ssl.SSLContext | None:
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.tls_cert, settings.tls_key)
    return context


async def serve(settings: GatewaySettings) -> None:
    """Serve until stopped."""
    fs = _client(settings)
    try:
        root = await fs.stat(settings.root)
        if not root.is_dir:
            raise ConfigError(f"the gateway's root {settings.root} is not a directory")
        await prepare_staging(fs, settings.root)

        async def fetch(access_key_id: str, date: str, region: str) -> SigningKey:
            return await (await fs.s3_keys()).signing_key(access_key_id, date, region)

        gateway = Gateway(
            fs, settings.root, settings.region, SigningKeys(fetch), settings.min_part_size
        )
        runner = web.AppRunner(make_app(gateway), access_log=None, handle_signals=False)
        await runner.setup()
        host, _, port = settings.listen.rpartition(":")
        site = web.TCPSite(
            runner, host.strip("[]"), int(port), ssl_context=_https(settings),
            shutdown_timeout=SHUTDOWN_GRACE,
        )  # fmt: skip
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(f"cannot listen on {settings.listen}: {exc.strerror}") from None
        bound = runner.addresses[0]
        address = f"{bound[0]}:{bound[1]}"
        scheme = "https" if settings.tls_cert else "http"
        log.info("S3 gateway serving %s://%s (root %s)", scheme, address, settings.root)
        if settings.ready_file is not None:
            write_private(settings.ready_file, address.encode())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        sweeping = asyncio.create_task(_sweep_hourly(fs, settings.root), name="sweep")
        await stop.wait()
        log.info("stopping")
        sweeping.cancel()
        await runner.cleanup()
    finally:
        await fs.close()
