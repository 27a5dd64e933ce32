"""How the namenode's parts are put together at start, each given its collaborators:
the cache, the datanodes and their space, file data, transactions and the committer,
the namespace and file rules, and replica health on top.

What runs after a commit is one list, in order, that the committer is given: replica
health forgets corruption of released blocks (those no snapshot still names), file
data publishes the block lists and settles the allocator, the kind counts count, and
(once replica health runs) the replication monitor looks again at the files the
commit touched.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from plasmafs.namenode.allocator import Allocator
from plasmafs.namenode.attribute_rules import AttributeRules
from plasmafs.namenode.cache import NamespaceCache
from plasmafs.namenode.coalescing_reader import CoalescingReader
from plasmafs.namenode.committer import CommitObserver, Committer
from plasmafs.namenode.datanode_lifecycle import DatanodeLifecycle
from plasmafs.namenode.datanodes import DatanodeRegistry
from plasmafs.namenode.directory_leases import LeaseTable
from plasmafs.namenode.file_locks import FileLocks
from plasmafs.namenode.file_rules import FileRules
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.inode_numbers import InodeNumbers
from plasmafs.namenode.kind_counts import KindCounts
from plasmafs.namenode.leadership import Leadership
from plasmafs.namenode.locks import LockManager
from plasmafs.namenode.namespace import Namespace
from plasmafs.namenode.quotas import Quotas
from plasmafs.namenode.replica_health import ReplicaHealth
from plasmafs.namenode.replica_store import ReplicaStore
from plasmafs.namenode.replication_monitor import ReplicationMonitor
from plasmafs.namenode.settings import NamenodeSettings
from plasmafs.namenode.snapshot_store import SnapshotStore
from plasmafs.namenode.snapshots import Snapshots
from plasmafs.namenode.store import Store
from plasmafs.namenode.subtree import Subtrees
from plasmafs.namenode.transactions import Transactions
from plasmafs.namenode.tree_store import TreeStore
from plasmafs.namenode.usage import DirectoryUsage
from plasmafs.namenode.view import View
from plasmafs.namenode.xattr_requests import Xattrs

log = logging.getLogger(__name__)


@dataclass
class NamespaceParts:
    """The namenode's state and rules over one opened store."""

    store: Store
    cache: NamespaceCache
    data: FileData
    health: ReplicaHealth
    counts: KindCounts
    transactions: Transactions
    inode_numbers: InodeNumbers
    leases: LeaseTable
    view: View
    subtrees: Subtrees
    usage: DirectoryUsage
    quotas: Quotas
    namespace: Namespace
    files: FileRules
    attributes: AttributeRules
    xattrs: Xattrs
    locks: FileLocks
    snapshots: Snapshots
    after_commit: list[CommitObserver]

    counting: asyncio.Task[None]  # the usage totals' first count

    async def stop(self) -> None:
        """Finish queued commits."""
        self.counting.cancel()
        await self.usage.close()
        await self.transactions.committer.stop()


async def open_namespace(
    settings: NamenodeSettings,
    store: Store,
    leadership: Leadership,
    on_group: Callable[[int], None] | None = None,
) -> NamespaceParts:
    """The namespace over an opened store, with its datanodes, allocator and counts
    loaded and its committer started (`on_group` is told each group commit's size)."""
    blocksize, secret = await store.cluster_settings(
        settings.default_blocksize, secrets.token_bytes(32)
    )
    if blocksize != settings.default_blocksize:
        log.warning("the cluster's blocksize is %d; default_blocksize is ignored", blocksize)
    cache = NamespaceCache(settings.cache_size)
    allocator = Allocator()
    registry = DatanodeRegistry(
        store,
        allocator,
        blocksize,
        secret,
        settings.datanode_dead_after,
        settings.heartbeat_ms,
        settings.replica_lost_after,
    )
    await registry.load()
    health = ReplicaHealth(registry)
    data = FileData(
        store, cache, allocator, registry, settings.ticket_ttl, health.state,
        term=lambda: leadership.term, read_ticket_ttl=settings.read_ticket_ttl,
    )  # fmt: skip
    await data.load()
    counts = KindCounts()
    await counts.load(store)
    after_commit: list[CommitObserver] = [
        health.forget_released,  # first: it asks whether snapshots name released blocks
        data.publish_committed,
        counts.committed,
    ]
    committer = Committer(
        store,
        cache,
        settings.max_group,
        leadership.current_term,
        leadership.depose,
        observers=after_commit,
        on_group=on_group,
        lanes=settings.commit_lanes,
    )
    transactions = Transactions(LockManager(), committer, data, leadership)
    leases = LeaseTable(settings.lease_recall_timeout)
    # One directory read whole must not push most of the cache out.
    load_limit = min(settings.directory_load_limit, cache.entry_capacity // 4)
    reader = CoalescingReader(store, cache, settings.read_pool_size, load_limit)
    view = View(store, cache, reader, leases)
    usage = DirectoryUsage(view)
    quotas = Quotas(usage, store)
    await quotas.load()
    usage.quotas = quotas
    committer.on_unknown.append(usage.recount)
    transactions.usage = usage
    after_commit.append(usage.committed)
    inode_numbers = InodeNumbers(store)
    namespace = Namespace(
        store,
        cache,
        view,
        transactions,
        inode_numbers,
        leases,
        data,
        default_replication=settings.default_replication,
        default_blocksize=blocksize,
    )
    namespace.no_leases_below = quotas.limited

    async def limited(ino: int) -> bool:
        """Whether a quota limits directory `ino`, one above it or one below it."""
        if not quotas.limits_any():
            return False
        await usage.wait_ready()
        if any(quotas.limit_of(d) is not None for d in usage.above(ino)):
            return True
        return any(ino in usage.above(q) for q in list(quotas.limited))

    snapshots = Snapshots(
        SnapshotStore(store),
        data,
        cache,
        leadership.current_term,
        limited,
        leadership.depose,
        transactions.locks,
    )
    await snapshots.load()
    view.snapdirs, view.snapdir_parents = snapshots.snapdir_by_dir, snapshots.dir_by_snapdir
    namespace.snapshotted = snapshots.snapdir_by_dir
    files = FileRules(view, transactions, data, inline_limit=settings.inline_limit)
    files.quotas = quotas
    committer.start()
    counting = asyncio.create_task(usage.follow(store, committer), name="pfs-usage-count")
    return NamespaceParts(
        counting=counting,
        store=store,
        cache=cache,
        data=data,
        health=health,
        counts=counts,
        transactions=transactions,
        inode_numbers=inode_numbers,
        leases=leases,
        view=view,
        subtrees=Subtrees(TreeStore(store), view, usage),
        usage=usage,
        quotas=quotas,
        namespace=namespace,
        files=files,
        attributes=AttributeRules(view, transactions, leases, data),
        xattrs=Xattrs(view, transactions, leases),
        locks=FileLocks(),
        snapshots=snapshots,
        after_commit=after_commit,
    )


async def start_replica_health(
    settings: NamenodeSettings, parts: NamespaceParts, leadership: Leadership
) -> tuple[ReplicationMonitor, DatanodeLifecycle]:
    """Replica accounting and re-replication over an opened namespace, and the datanodes'
    lifecycle that tells it what changed. The monitor joins the commit observers here:
    it needs transactions, which need the committer."""
    monitor = ReplicationMonitor(
        parts.files,
        parts.data,
        parts.view,
        leadership,
        ReplicaStore(parts.store),
        parts.health,
        streams_per_datanode=settings.replication_streams,
        scan_interval=settings.replication_scan_interval,
        check_interval=settings.replication_check_interval,
    )
    parts.after_commit.append(monitor.committed)
    lifecycle = DatanodeLifecycle(
        parts.data.registry,
        monitor.replicas,
        parts.health,
        parts.data.allocator,
        monitor,
        ticket_ttl=settings.ticket_ttl,
        check_interval=settings.replication_check_interval,
    )
    if settings.balance_threshold:
        monitor.balancer.start(
            settings.balance_threshold, settings.balance_bandwidth, background=True
        )
    await monitor.start()
    lifecycle.start()
    return monitor, lifecycle
