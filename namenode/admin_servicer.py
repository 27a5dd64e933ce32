"""The gRPC face of cluster administration: datanodes' states and lifecycle, fsck, and
the namespace's dump and load. It only translates between the wire and the
replication monitor, registry, fsck and namespace_dump. Every call is a superuser's
(fsck sees every file's name and placement)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import asyncpg
import grpc

from plasmafs.core import paths
from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import (
    BusyError,
    InvalidArgumentError,
    NotDirectoryError,
    NotFoundError,
    PlasmaError,
)
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import abort_with, answered
from plasmafs.namenode import namespace_dump
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.balancer import DEFAULT_BALANCE_THRESHOLD
from plasmafs.namenode.caller_identity import Gate
from plasmafs.namenode.datanode_lifecycle import DatanodeLifecycle
from plasmafs.namenode.datanodes import DECOMMISSIONED, DECOMMISSIONING, NORMAL
from plasmafs.namenode.fsck import CheckedFile, Fsck, FsckTotals
from plasmafs.namenode.migrator import schema_version
from plasmafs.namenode.namespace import Namespace
from plasmafs.namenode.principals import SUPERUSER
from plasmafs.namenode.quotas import Quotas
from plasmafs.namenode.replication_monitor import ReplicationMonitor
from plasmafs.namenode.store import domain_errors

T = TypeVar("T")

_ADMIN_STATE = {
    DECOMMISSIONING: pb.DATANODE_DECOMMISSIONING,
    DECOMMISSIONED: pb.DATANODE_DECOMMISSIONED,
}


class AdminServicer(pb_grpc.AdminServicer):
    """Datanode administration and fsck."""

    def __init__(
        self,
        namespace: Namespace,
        monitor: ReplicationMonitor,
        lifecycle: DatanodeLifecycle,
        fsck: Fsck,
        gate: Gate,
        connect: Callable[[str], Awaitable[asyncpg.Connection]],
        quotas: Quotas,
    ) -> None:
        self.quotas = quotas
        self.gate = gate
        self.connect = connect  # a PostgreSQL connection of its own, by application name
        self.ns = namespace
        self.monitor = monitor
        self.lifecycle = lifecycle
        self.registry = monitor.registry
        self.fsck = fsck

    async def _info(
        self, datanode: int, replica_blocks: dict[int, int] | None = None
    ) -> pb.DatanodeInfo:
        registry, allocator = self.registry, self.monitor.data.allocator
        row = registry.row(datanode)
        if row is None:
            raise NotFoundError(f"no datanode {datanode}")
        if replica_blocks is None:
            replica_blocks = await self.monitor.replicas.replica_blocks()
        alive = registry.alive(datanode)
        admin = registry.admin_state(datanode)
        state = _ADMIN_STATE.get(admin, pb.DATANODE_LIVE if alive else pb.DATANODE_DEAD)
        capacity = allocator.capacity_blocks([datanode])
        free = allocator.free_blocks(datanode) if allocator.knows(datanode) else 0
        bs = row.blocksize
        return pb.DatanodeInfo(
            datanode_id=datanode,
            address=row.address,
            host=row.host,
            state=state,
            alive=alive,
            capacity_bytes=capacity * bs,
            used_bytes=(capacity - free) * bs,
            replica_blocks=replica_blocks.get(datanode, 0),
            last_heartbeat_age=registry.last_heartbeat_age(datanode),
            queued_copies=self.monitor.queued_for(datanode) if admin == NORMAL else 0,
            running_copies=self.monitor.running_on(datanode),
            location=row.location,
        )

    async def ListDatanodes(
        self, request: pb.ListDatanodesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDatanodesReply:
        """Every registered datanode."""
        return await self._superuser(context, "admin datanodes", self._list)

    async def _superuser(
        self,
        context: grpc.aio.ServicerContext,
        what: str,
        work: Callable[[], Awaitable[T]],
    ) -> T:
        """The reply of `work`, done for a superuser only."""

        async def checked() -> T:
            self.gate.superuser(context, what)
            return await work()

        return await answered(context, checked())

    async def _list(self) -> pb.ListDatanodesReply:
        blocks = await self.monitor.replicas.replica_blocks()
        return pb.ListDatanodesReply(
            datanodes=[await self._info(d, blocks) for d in self.registry.ids()]
        )

    async def Decommission(
        self, request: pb.DatanodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.DatanodeInfo:
        """Drain a datanode."""

        async def drain() -> pb.DatanodeInfo:
            await self.lifecycle.decommission(request.datanode_id)
            return await self._info(request.datanode_id)

        return await self._superuser(context, "admin decommission", drain)

    async def Recommission(
        self, request: pb.DatanodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.DatanodeInfo:
        """Put a drained or draining datanode back in service."""

        async def restore() -> pb.DatanodeInfo:
            await self.lifecycle.recommission(request.datanode_id)
            return await self._info(request.datanode_id)

        return await self._superuser(context, "admin recommission", restore)

    async def RemoveDatanode(
        self, request: pb.DatanodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDatanodesReply:
        """Forget a dead or decommissioned datanode."""

        async def forget() -> pb.ListDatanodesReply:
            await self.lifecycle.remove(request.datanode_id)
            return await self._list()

        return await self._superuser(context, "admin remove", forget)

    async def Fsck(
        self, request: pb.FsckRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.FsckReply]:
        """Files under a path (those with problems, or all), then the summary."""
        try:
            self.gate.superuser(context, "fsck")
            raw = request.path or b"/"
            attr = await self.ns.lookup(None, Place.of(raw), True, who=SUPERUSER)
            root_path = paths.normalize(raw.decode())
            totals = FsckTotals()
            if attr.kind is FileKind.SYMLINK:
                raise BusyError(f"{root_path} is a dangling symbolic link")
            async for checked in self.fsck.walk(attr.ino, root_path, totals):
                wanted = (
                    checked.corrupt
                    if request.list_corrupt
                    else request.all_files or checked.problem
                )
                if wanted:
                    yield pb.FsckReply(file=self._file(checked))
            yield pb.FsckReply(summary=self._summary(totals))
        except PlasmaError as exc:
            await abort_with(context, exc)

    async def SetQuota(
        self, request: pb.QuotaRequest, context: grpc.aio.ServicerContext
    ) -> pb.Quota:
        """Set or clear a directory's quota; the quota and its tree's usage."""

        async def change() -> pb.Quota:
            self.monitor.leadership.current_term()  # the active namenode's alone
            place = Place.of(request.path or b"/")
            attr = await self.ns.lookup(None, place, True, who=SUPERUSER)
            if attr.kind is not FileKind.DIRECTORY:
                raise NotDirectoryError(
                    f"{place.shown}: not a directory (only a directory has a quota)"
                )
            if request.clear:
                await self.quotas.clear(attr.ino)
            else:
                entries = request.max_entries if request.HasField("max_entries") else None
                space = request.max_space if request.HasField("max_space") else None
                await self._limit(attr.ino, entries, space)
            reply = pb.Quota()
            await self.quotas.fill(attr.ino, reply)
            return reply

        return await self._superuser(context, "admin quota", change)

    async def _limit(self, ino: int, entries: int | None, space: int | None) -> None:
        """Set a quota once no session leases a directory in its tree: a lease's
        holder answers creates itself, before the namenode could check them."""
        quotas = self.quotas
        quotas.limited.add(ino)  # no new lease in the tree from now on
        try:
            await self.ns.leases.recall_below(ino, self.ns.view.committed_parent)
            await quotas.set(ino, entries, space)
        finally:
            if quotas.limit_of(ino) is None:
                quotas.limited.discard(ino)

    async def Dump(self, request: pb.DumpRequest, context: grpc.aio.ServicerContext) -> None:
        """The namespace and accounts, as one snapshot, streamed."""
        try:
            self.gate.superuser(context, "admin dump")
            with domain_errors("namespace dump"):
                conn = await self.connect("pfs-namenode-dump")
                try:

                    async def send(chunk: bytes) -> None:
                        await context.write(pb.DumpChunk(data=chunk))

                    await namespace_dump.dump(conn, schema_version(), send)
                finally:
                    await conn.close()
        except PlasmaError as exc:
            await abort_with(context, exc)

    async def Load(
        self, request_iterator: AsyncIterator[pb.LoadChunk], context: grpc.aio.ServicerContext
    ) -> pb.LoadReply:
        """Load a dump into the empty namespace, then start over with it."""

        async def load() -> pb.LoadReply:
            self.gate.superuser(context, "admin load")
            leadership = self.monitor.leadership

            async def chunks() -> AsyncIterator[bytes]:
                async for chunk in request_iterator:
                    yield chunk.data

            with domain_errors("namespace load"):
                conn = await self.connect("pfs-namenode-load")
                try:
                    result = await namespace_dump.load(
                        conn, schema_version(), leadership.current_term(), chunks()
                    )
                finally:
                    await conn.close()
            # Its cache and allocator know nothing of what was loaded: take over anew.
            leadership.depose("a namespace was loaded; starting over with it")
            return pb.LoadReply(
                rows=result.rows,
                credentials_skipped=result.credentials_skipped,
                datanodes_added=result.datanodes_added,
                seconds=result.seconds,
            )

        return await answered(context, load())

    async def Balance(
        self, request: pb.BalanceRequest, context: grpc.aio.ServicerContext
    ) -> pb.BalanceStatus:
        """Start, retune or stop a balancing run; how it stands."""

        async def balance() -> pb.BalanceStatus:
            balancer = self.monitor.balancer
            if request.stop:
                balancer.stop()
            elif not request.status_only:
                threshold = request.threshold or DEFAULT_BALANCE_THRESHOLD
                if not 0 < threshold < 1:
                    raise InvalidArgumentError(
                        f"threshold {threshold:g}: a fraction of capacity between 0 and 1"
                    )
                balancer.start(threshold, request.bandwidth)
                self.monitor.wake()
            return self._balance_status()

        return await self._superuser(context, "admin balance", balance)

    def _balance_status(self) -> pb.BalanceStatus:
        balancer = self.monitor.balancer
        progress = balancer.progress
        placeable = frozenset(self.registry.placeable())
        used, mean = balancer.fractions(placeable)
        moving = sum(1 for j in self.monitor.jobs.values() if j.move_from is not None)
        return pb.BalanceStatus(
            running=progress.running,
            balanced=balancer.balanced(used, mean),
            threshold=progress.threshold,
            bandwidth=progress.bandwidth,
            mean_used=mean,
            least_used=min(used.values(), default=0.0),
            most_used=max(used.values(), default=0.0),
            bytes_moved=progress.bytes_moved,
            moves_done=progress.moves_done,
            moves_failed=progress.moves_failed,
            moves_running=moving,
            seconds=(progress.finished or time.time()) - progress.started
            if progress.started
            else 0.0,
            note=progress.note,
        )

    def _summary(self, t: FsckTotals) -> pb.FsckSummary:
        return pb.FsckSummary(
            files=t.files,
            directories=t.directories,
            symlinks=t.symlinks,
            blocks=t.blocks,
            replica_blocks=t.replica_blocks,
            bytes=t.bytes,
            under_replicated_blocks=t.under_replicated,
            mis_replicated_blocks=t.mis_replicated,
            missing_blocks=t.missing,
            corrupt_blocks=t.corrupt,
            corrupt_files=t.corrupt_files,
            live_datanodes=len(self.registry.live()),
            datanodes=len(self.registry.ids()),
            record_errors=t.record_errors,
            queued_copies=self.monitor.queued_for(),
            running_copies=len(self.monitor.jobs),
        )

    def _file(self, checked: CheckedFile) -> pb.FsckFile:
        entry = checked.entry
        out = pb.FsckFile(path=entry.path.encode(), size=entry.size, replication=entry.replication)
        for g in checked.groups:
            block = out.blocks.add(
                file_index=g.group.file_index,
                block_count=g.group.block_count,
                live=len(g.health.live),
                under_replicated=g.health.counts.under_replicated,
                mis_replicated=g.health.counts.misplaced,
                missing=g.health.counts.missing,
                corrupt=g.health.counts.corrupt,
            )
            for row, state in g.health.states:
                block.replicas.add(
                    datanode_id=row.datanode_id,
                    address=self.registry.address(row.datanode_id),
                    block_start=row.block_start,
                    state=int(state),
                )
        return out
