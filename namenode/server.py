"""Build and run the namenode: PostgreSQL store, migrations, namespace, gRPC server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass

import grpc

from plasmafs.core import channel_options as channels
from plasmafs.core.errors import ConfigError, NotActiveError
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.tls import add_port
from plasmafs.namenode.account_store import AccountStore
from plasmafs.namenode.accounts_servicer import accounts_servicer
from plasmafs.namenode.admin_servicer import AdminServicer
from plasmafs.namenode.caller_identity import Gate
from plasmafs.namenode.cluster_status import ClusterStatus
from plasmafs.namenode.datanode_lifecycle import DatanodeLifecycle
from plasmafs.namenode.fsck import Fsck
from plasmafs.namenode.leadership import Leadership
from plasmafs.namenode.metrics import NamenodeMetrics
from plasmafs.namenode.migrator import migrate_database
from plasmafs.namenode.principals import Principals
from plasmafs.namenode.replication_monitor import ReplicationMonitor
from plasmafs.namenode.servicer import NamenodeServicer, RegistryServicer
from plasmafs.namenode.settings import NamenodeSettings
from plasmafs.namenode.startup import NamespaceParts, open_namespace, start_replica_health
from plasmafs.namenode.store import Store

log = logging.getLogger(__name__)


@dataclass
class RunningNamenode:
    """A started namenode and what to stop."""

    server: grpc.aio.Server
    port: int
    registry_port: int
    parts: NamespaceParts
    servicer: NamenodeServicer
    leadership: Leadership
    deposed: asyncio.Event
    monitor: ReplicationMonitor
    lifecycle: DatanodeLifecycle
    metrics_port: int = 0

    async def stop(self, grace: float) -> None:
        """Stop accepting, let calls finish for `grace` seconds, flush commits, close."""
        await self.server.stop(grace)
        await self.lifecycle.stop()
        await self.monitor.stop()
        await self.leadership.stop()
        await self.parts.stop()
        await self.parts.store.close()


async def start_namenode(settings: NamenodeSettings) -> RunningNamenode:
    """Migrate the database, take the active lock, load the namespace and start serving."""
    applied = await migrate_database(settings.dsn)
    if applied:
        log.info("applied migrations %s", applied)
    store = Store(settings.dsn, settings.read_pool_size, settings.commit_lanes)
    deposed = asyncio.Event()
    leadership = Leadership(store, settings.leader_check_interval, lambda _: deposed.set())
    metrics = NamenodeMetrics()
    try:
        await leadership.take()
        await store.open()
        parts = await open_namespace(settings, store, leadership, metrics.group_size.observe)
        monitor, lifecycle = await start_replica_health(settings, parts, leadership)
    except BaseException:
        await store.close()
        raise
    leadership.start()
    status = ClusterStatus(parts.counts, parts.data, monitor, parts.namespace.default_blocksize)
    server_tls = settings.server_tls()
    principals = await load_principals(store) if server_tls is not None else None
    gate = Gate(principals)
    servicer = NamenodeServicer(parts, status, settings, metrics, gate)
    metrics.add_gauges(lambda: gauges(servicer, parts, status, monitor))
    server = grpc.aio.server(options=channels.NAMENODE_SERVER)
    pb_grpc.add_NamenodeServicer_to_server(servicer, server)
    data = parts.data
    registry = RegistryServicer(data.registry, monitor, lifecycle, gate, settings.ticket_ttl)
    pb_grpc.add_DatanodeRegistryServicer_to_server(registry, server)
    fsck = Fsck(monitor.replicas, monitor.health, data.registry, data.allocator)
    admin = AdminServicer(parts.namespace, monitor, lifecycle, fsck, gate)
    pb_grpc.add_AdminServicer_to_server(admin, server)
    accounts = accounts_servicer(AccountStore(store), principals, gate, servicer.cut_sessions)
    pb_grpc.add_AccountsServicer_to_server(accounts, server)
    # One server, two ports: clients on `listen`; datanodes on `registry_listen`, which
    # requires their certificates (the registry refuses calls that came without one).
    port = add_port(server, settings.listen, server_tls)
    if port == 0:
        raise ConfigError(f"cannot listen on {settings.listen}")
    registry_port = add_port(server, settings.registry_listen, settings.registry_tls())
    if registry_port == 0:
        raise ConfigError(f"cannot listen on {settings.registry_listen} (registry_listen)")
    await server.start()
    metrics_port = metrics.serve(settings.metrics_listen) if settings.metrics_listen else 0
    return RunningNamenode(
        server,
        port,
        registry_port,
        parts,
        servicer,
        leadership,
        deposed,
        monitor,
        lifecycle,
        metrics_port,
    )


async def load_principals(store: Store) -> Principals:
    """Users, groups and credentials, held in memory to authenticate callers."""
    principals = Principals(await AccountStore(store).load())
    log.info("loaded %d users", len(principals.names().users))
    return principals


def gauges(
    servicer: NamenodeServicer,
    parts: NamespaceParts,
    status: ClusterStatus,
    monitor: ReplicationMonitor,
) -> dict[str, tuple[str, float]]:
    """The values read at each scrape (names ending in _total are counters)."""
    txns = parts.transactions
    cache, stats, locks = parts.cache, txns.committer.stats, txns.locks
    registry, copies = parts.data.registry, monitor.stats
    fs = status.fsstat()
    return {
        "pfs_namenode_sessions": ("Connected clients", servicer.sessions),
        "pfs_namenode_open_transactions": ("Open transactions", servicer.open_transactions),
        "pfs_namenode_commits_total": ("Committed transactions", stats.commits),
        "pfs_namenode_commit_groups_total": ("PostgreSQL group commits", stats.groups),
        "pfs_namenode_commit_failures_total": ("Failed commits", stats.failed),
        "pfs_namenode_lock_conflicts_total": ("Lock conflicts", locks.conflicts),
        "pfs_namenode_lock_waits_total": ("Lock waits", locks.waits),
        "pfs_namenode_cache_inode_hits_total": ("Inode cache hits", cache.inodes.hits),
        "pfs_namenode_cache_inode_misses_total": ("Inode cache misses", cache.inodes.misses),
        "pfs_namenode_cache_entry_hits_total": ("Entry cache hits", cache.entries.hits),
        "pfs_namenode_cache_entry_misses_total": ("Entry cache misses", cache.entries.misses),
        "pfs_namenode_cached_inodes": ("Inodes in the cache", len(cache.inodes)),
        "pfs_namenode_cached_entries": ("Entries in the cache", len(cache.entries)),
        "pfs_namenode_files": ("Files", fs.files),
        "pfs_namenode_directories": ("Directories", fs.directories),
        "pfs_datanodes_live": ("Live datanodes", fs.live_datanodes),
        "pfs_datanodes_registered": ("Registered datanodes", len(registry.rows())),
        "pfs_capacity_bytes": ("Capacity of the live datanodes", fs.capacity_bytes),
        "pfs_used_bytes": ("Used (or held back) bytes of the live datanodes", fs.used_bytes),
        "pfs_held_bytes": (
            "Released bytes held back while read tickets for them live",
            fs.held_bytes,
        ),
        "pfs_under_replicated_blocks": (
            "File blocks with fewer live replicas than requested",
            fs.under_replicated_blocks,
        ),
        "pfs_missing_blocks": ("File blocks with no live replica", fs.missing_blocks),
        "pfs_corrupt_blocks": ("File blocks with a corrupt replica", fs.corrupt_blocks),
        "pfs_replication_queued": ("Block groups waiting for a copy", monitor.queued_for()),
        "pfs_replication_running": ("Copies datanodes are running", len(monitor.jobs)),
        "pfs_replication_copies_total": ("Copies recorded", copies.copies_done),
        "pfs_replication_failed_total": ("Copies that failed", copies.copies_failed),
        "pfs_replication_discarded_total": (
            "Copies discarded (the file changed meanwhile)",
            copies.copies_discarded,
        ),
        "pfs_replication_bytes_total": ("Bytes copied by datanodes", copies.bytes_copied),
        "pfs_replicas_dropped_total": (
            "Surplus, lost, corrupt or drained replicas dropped",
            copies.replicas_dropped,
        ),
    }


async def serve(settings: NamenodeSettings) -> None:
    """Run until SIGTERM or SIGINT, then stop gracefully."""
    running = await start_namenode(settings)
    host = settings.listen.rpartition(":")[0]
    address = f"{host}:{running.port}"
    registry = f"{settings.registry_listen.rpartition(':')[0]}:{running.registry_port}"
    log.info("namenode serving on %s, datanodes' registry on %s", address, registry)
    if running.metrics_port:
        log.info("metrics on http://%s:%d/metrics", host, running.metrics_port)
    if settings.ready_file is not None:
        tmp = settings.ready_file.with_suffix(".tmp")
        tmp.write_text(f"{address}\n{registry}\n")
        tmp.replace(settings.ready_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sweeper = asyncio.create_task(_forget_expired_releases(running.parts.store))
    deposed = asyncio.create_task(running.deposed.wait())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait([deposed, stopped], return_when=asyncio.FIRST_COMPLETED)
    log.info("namenode stopping")
    sweeper.cancel()
    deposed.cancel()
    stopped.cancel()
    await running.stop(settings.grace_seconds)
    if running.leadership.deposed:
        raise NotActiveError(running.leadership.deposed)


async def _forget_expired_releases(store: Store, period: float = 60.0) -> None:
    # The allocator frees quarantined blocks by itself; this only trims the table.
    while True:
        await asyncio.sleep(period)
        with contextlib.suppress(Exception):
            await store.forget_expired_releases()
