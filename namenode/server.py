"""Build and run the namenode: PostgreSQL store, migrations, namespace, gRPC server.

A namenode process is a standby until it holds the lease (`leadership.py`), then the
active one until it stops or is deposed; a deposed one drops its state (cache,
allocator) and stands by again, on the same addresses, so a supervisor never has to
restart it and it never serves as a second active one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable
from dataclasses import dataclass

import grpc

from plasmafs.core import channel_options as channels
from plasmafs.core.errors import ConfigError, PlasmaError
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.tls import add_port
from plasmafs.namenode.account_store import AccountStore
from plasmafs.namenode.accounts_servicer import accounts_servicer
from plasmafs.namenode.admin_servicer import AdminServicer
from plasmafs.namenode.caller_identity import Gate
from plasmafs.namenode.cluster_status import ClusterStatus
from plasmafs.namenode.datanode_lifecycle import DatanodeLifecycle
from plasmafs.namenode.fsck import Fsck
from plasmafs.namenode.leadership import Leadership, place_of
from plasmafs.namenode.lease_store import LeaseStore
from plasmafs.namenode.metrics import NamenodeMetrics
from plasmafs.namenode.migrator import migrate_database
from plasmafs.namenode.principals import Principals
from plasmafs.namenode.replication_monitor import ReplicationMonitor
from plasmafs.namenode.s3_key_sealing import Sealer
from plasmafs.namenode.s3_key_store import S3KeyStore
from plasmafs.namenode.s3_keys_servicer import S3KeysServicer
from plasmafs.namenode.servicer import NamenodeServicer, RegistryServicer
from plasmafs.namenode.settings import NamenodeSettings
from plasmafs.namenode.snapshot_servicer import SnapshotServicer
from plasmafs.namenode.standby import StandbyPorts
from plasmafs.namenode.startup import NamespaceParts, open_namespace, start_replica_health
from plasmafs.namenode.store import Store
from plasmafs.namenode.trash import TrashEmptier

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

    async def stop(self, grace: float) -> None:
        """Stop accepting, let calls finish for `grace` seconds, flush commits, give the
        lease up (unless deposed) and close."""
        await self.server.stop(grace)
        await self.lifecycle.stop()
        await self.monitor.stop()
        await self.parts.stop()
        await self.leadership.stop(release=True)
        await self.parts.store.close()


async def start_namenode(
    settings: NamenodeSettings,
    store: Store,
    leadership: Leadership,
    metrics: NamenodeMetrics,
    deposed: asyncio.Event,
    listen: str,
    registry_listen: str,
) -> RunningNamenode:
    """Load the namespace of a namenode that took the lease and start serving on
    `listen` and `registry_listen`."""
    try:
        await store.open()
        parts = await open_namespace(settings, store, leadership, metrics.group_size.observe)
        monitor, lifecycle = await start_replica_health(settings, parts, leadership)
    except BaseException:
        await store.close()
        raise
    status = ClusterStatus(parts.counts, parts.data, monitor, parts.namespace.default_blocksize)
    server_tls = settings.server_tls()
    principals = await load_principals(store) if server_tls is not None else None
    gate = Gate(principals)
    servicer = NamenodeServicer(parts, status, settings, metrics, gate)
    server = grpc.aio.server(options=channels.NAMENODE_SERVER)
    pb_grpc.add_NamenodeServicer_to_server(servicer, server)
    data = parts.data
    registry = RegistryServicer(data.registry, monitor, lifecycle, gate, settings.ticket_ttl)
    pb_grpc.add_DatanodeRegistryServicer_to_server(registry, server)
    fsck = Fsck(monitor.replicas, monitor.health, data.registry, data.allocator, parts.usage, store)
    admin = AdminServicer(
        parts.namespace, monitor, lifecycle, fsck, gate, store.connect_apart, parts.quotas
    )
    pb_grpc.add_AdminServicer_to_server(admin, server)
    accounts = accounts_servicer(AccountStore(store), principals, gate, servicer.cut_sessions)
    pb_grpc.add_AccountsServicer_to_server(accounts, server)
    sealer = None if settings.s3_secret_file is None else Sealer.from_file(settings.s3_secret_file)
    s3_keys = S3KeysServicer(S3KeyStore(store), sealer, principals, gate)
    pb_grpc.add_S3KeysServicer_to_server(s3_keys, server)
    snapshots = SnapshotServicer(parts.snapshots, parts.view, parts.transactions, gate)
    pb_grpc.add_SnapshotsServicer_to_server(snapshots, server)
    # One server, two ports: clients on `listen`; datanodes on `registry_listen`, which
    # requires their certificates (the registry refuses calls that came without one).
    port = add_port(server, listen, server_tls)
    if port == 0:
        raise ConfigError(f"cannot listen on {listen}")
    registry_port = add_port(server, registry_listen, settings.registry_tls())
    if registry_port == 0:
        raise ConfigError(f"cannot listen on {registry_listen} (registry_listen)")
    await server.start()
    return RunningNamenode(
        server, port, registry_port, parts, servicer, leadership, deposed, monitor, lifecycle
    )


async def load_principals(store: Store) -> Principals:
    """Users, groups and credentials, held in memory to authenticate callers."""
    principals = Principals(await AccountStore(store).load())
    log.info("loaded %d users", len(principals.names().users))
    return principals


def role_gauges(leadership: Leadership | None, takeovers: int) -> dict[str, tuple[str, float]]:
    """Whether this namenode is the active one, its term, and how often it took over."""
    active = leadership is not None and leadership.leading
    return {
        "pfs_namenode_active": ("1 while this namenode is the active one, 0 standing by", active),
        "pfs_namenode_term": (
            "The term this namenode serves in (0 standing by)",
            leadership.term if active and leadership is not None else 0,
        ),
        "pfs_namenode_takeovers_total": ("Times this namenode became the active one", takeovers),
    }


def gauges(running: RunningNamenode) -> dict[str, tuple[str, float]]:
    """The values read at each scrape (names ending in _total are counters)."""
    servicer, parts, monitor = running.servicer, running.parts, running.monitor
    status = servicer.status
    txns = parts.transactions
    cache, stats, locks = parts.cache, txns.committer.stats, txns.locks
    registry, copies = parts.data.registry, monitor.stats
    balance = monitor.balancer.progress
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
        "pfs_namenode_cache_bytes": ("Bytes the cache's items are charged", cache.charged()),
        "pfs_namenode_cache_limit_bytes": ("The cache's memory bound", cache.memory),
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
        "pfs_replication_scans_total": ("Full passes over every block group", copies.scans),
        "pfs_balancer_running": ("A balancing run is on", float(balance.running)),
        "pfs_balancer_bytes_moved_total": ("Bytes the balancer moved", balance.bytes_moved),
        "pfs_balancer_moves_total": ("Replica groups the balancer moved", balance.moves_done),
        "pfs_replication_last_scan_seconds": (
            "How long the last full pass took",
            copies.last_scan_seconds,
        ),
        "pfs_namenode_usage_ready": (
            "1 once every directory's usage is counted (summaries and quotas use it)",
            float(parts.usage.ready),
        ),
        "pfs_namenode_usage_count_seconds": (
            "How long the last count of every directory's usage took",
            parts.usage.load_seconds,
        ),
        "pfs_namenode_summaries_from_usage_total": (
            "Summaries (du, count) answered from the usage kept, without a walk",
            parts.subtrees.from_usage,
        ),
        "pfs_namenode_quota_refusals_total": (
            "Commits refused because a directory's quota would be exceeded",
            parts.quotas.refused,
        ),
        "pfs_namenode_fair_use_held_seconds_total": (
            "Seconds users past their share of the namenode were held back",
            servicer.fair.held_seconds,
        ),
        "pfs_namenode_fair_use_refusals_total": (
            "Transactions and writes refused by a per-user limit",
            servicer.fair.refusals,
        ),
    }


class _Daemon:
    """One namenode process across its turns as standby and active: the addresses it
    bound (kept from turn to turn), its metrics, and the current turn's parts."""

    def __init__(self, settings: NamenodeSettings, stop: asyncio.Event) -> None:
        self.settings = settings
        self.stop = stop
        self.listen, self.registry_listen = settings.listen, settings.registry_listen
        self.metrics = NamenodeMetrics()
        self.metrics.add_gauges(self.gauges)
        self.metrics.add_labeled_counter(
            "pfs_namenode_user_held_seconds",
            "Seconds a user's flood of requests was held back (fair use), by user",
            "user",
            self.held_by_user,
        )
        self.metrics_port = 0
        self.announced = False  # the ready file is written
        self.leadership: Leadership | None = None
        self.running: RunningNamenode | None = None
        self.takeovers = 0

    def gauges(self) -> dict[str, tuple[str, float]]:
        """Role gauges always, the active namenode's own while it is active."""
        values = role_gauges(self.leadership, self.takeovers)
        if self.running is not None:
            values.update(gauges(self.running))
        return values

    def held_by_user(self) -> dict[str, float]:
        """Seconds each user was held back in this turn as the active namenode."""
        return dict(self.running.servicer.fair.held_by_user) if self.running else {}

    async def run(self) -> None:
        """Turns until stopped."""
        if self.settings.metrics_listen:
            self.metrics_port = self.metrics.serve(self.settings.metrics_listen)
        while not self.stop.is_set():
            await self._turn()

    async def _turn(self) -> None:
        """Stand by until the lease is taken, then serve until deposed or stopped."""
        store = Store(self.settings.dsn, self.settings.read_pool_size, self.settings.commit_lanes)
        deposed = asyncio.Event()
        leadership = Leadership(
            LeaseStore(self.settings.dsn, self.settings.lease_ttl / 3),
            self.settings.lease_ttl,
            lambda _: deposed.set(),
            unflushed=lambda: store.unflushed,
        )
        self.leadership = leadership
        try:
            await self._serve_turn(store, leadership, deposed)
        finally:
            await leadership.close()

    async def _serve_turn(
        self, store: Store, leadership: Leadership, deposed: asyncio.Event
    ) -> None:
        if not await self._stand_by(leadership):
            return
        self.takeovers += 1
        leadership.start()  # renewals from now: loading the namespace may take a while
        try:
            running = await start_namenode(
                self.settings, store, leadership, self.metrics, deposed,
                self.listen, self.registry_listen,
            )  # fmt: skip
        except BaseException:
            await leadership.stop(release=True)
            raise
        self.running = running
        self._announce()
        log.info("namenode active (term %d) on %s", leadership.term, self.listen)
        background = [asyncio.create_task(_forget_expired_releases(store))]
        if self.settings.trash_interval > 0:
            emptier = TrashEmptier(running.parts, self.settings.trash_interval)
            background.append(asyncio.create_task(emptier.run(), name="trash"))
        await _until(deposed.wait(), self.stop)
        for task in background:
            task.cancel()
        log.info("namenode stopping" if self.stop.is_set() else "deposed: dropping state")
        await running.stop(self.settings.grace_seconds)
        self.running = None

    async def _stand_by(self, leadership: Leadership) -> bool:
        """Bind the addresses with the standby's ports and take the lease, waiting as a
        standby while another namenode holds it: True once taken, False if the process
        is stopped first. The active server then binds the same addresses."""
        standby = StandbyPorts(leadership.refusal)
        port, registry_port = await standby.start(
            self.listen, self.settings.server_tls(), self.registry_listen,
            self.settings.registry_tls(),
        )  # fmt: skip
        try:
            self.listen = f"{self.listen.rpartition(':')[0]}:{port}"
            self.registry_listen = f"{self.registry_listen.rpartition(':')[0]}:{registry_port}"
            leadership.address = self.settings.advertised(self.listen)
            leadership.place = place_of(self.listen)  # bound: proven ours
            if await _try_take(leadership):
                return True
            self._announce()
            log.info("namenode standing by on %s", self.listen)
            return await _until(leadership.take(), self.stop)
        finally:
            await standby.stop()

    def _announce(self) -> None:
        """The first time: log the addresses and write the ready file (the process is
        up, as standby or active)."""
        if self.announced:
            return
        self.announced = True
        log.info("namenode on %s, datanodes' registry on %s", self.listen, self.registry_listen)
        if self.metrics_port:
            host = self.listen.rpartition(":")[0]
            log.info("metrics on http://%s:%d/metrics", host, self.metrics_port)
        ready = self.settings.ready_file
        if ready is not None:
            tmp = ready.with_suffix(".tmp")
            tmp.write_text(f"{self.listen}\n{self.registry_listen}\n")
            tmp.replace(ready)


async def serve(settings: NamenodeSettings) -> None:
    """Stand by until this namenode holds the lease, serve as the active one until
    deposed (then stand by again) or until SIGTERM or SIGINT, then stop gracefully and
    give the lease to a standby."""
    applied = await migrate_database(settings.dsn)
    if applied:
        log.info("applied migrations %s", applied)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await _Daemon(settings, stop).run()


async def _try_take(leadership: Leadership) -> bool:
    """Take the lease now if nobody holds it (a namenode alone starts active at once)."""
    try:
        return await leadership.try_take()
    except PlasmaError as exc:
        log.warning("cannot take the lease yet: %s", exc)
        return False


async def _until(work: Awaitable[object], stop: asyncio.Event) -> bool:
    """Run `work` until it ends (True) or `stop` is set first (False, `work` cancelled)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if task.done():
        task.result()
        return True
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return False


async def _forget_expired_releases(store: Store, period: float = 60.0) -> None:
    # The allocator frees quarantined blocks by itself; this only trims the table.
    while True:
        await asyncio.sleep(period)
        with contextlib.suppress(Exception):
            await store.forget_expired_releases()
