"""The gRPC face of the namenode: it only translates between the wire and a Session."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator

import grpc

from plasmafs.core.errors import AuthenticationError, NotActiveError, NotFoundError, PlasmaError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import (
    INLINE_LIMIT_METADATA_KEY,
    TRASH_METADATA_KEY,
    USER_METADATA_KEY,
    abort_with,
    answered,
)
from plasmafs.namenode.caller_identity import Gate
from plasmafs.namenode.cluster_status import ClusterStatus
from plasmafs.namenode.copy_work import CopyOutcome, HeartbeatReport, HeartbeatWork
from plasmafs.namenode.datanode_lifecycle import DatanodeLifecycle
from plasmafs.namenode.datanodes import DatanodeRegistry
from plasmafs.namenode.fair_use import FairUse
from plasmafs.namenode.local_callers import CallerRights
from plasmafs.namenode.metrics import NamenodeMetrics
from plasmafs.namenode.replication_monitor import ReplicationMonitor
from plasmafs.namenode.session import Session
from plasmafs.namenode.settings import NamenodeSettings
from plasmafs.namenode.startup import NamespaceParts

VERSION = "0.1.0"


class NamenodeServicer(pb_grpc.NamenodeServicer):
    """Serves Session streams and Ping."""

    def __init__(
        self,
        parts: NamespaceParts,
        status: ClusterStatus,
        settings: NamenodeSettings,
        metrics: NamenodeMetrics,
        gate: Gate,
    ) -> None:
        self.parts = parts
        self.status = status
        self.settings = settings
        self.metrics = metrics
        self.gate = gate
        self.rights = CallerRights(gate.principals)
        self.started_ns = time.time_ns()
        self.counters: Counter[str] = Counter()
        self.open_sessions: set[Session] = set()
        self.fair = FairUse(
            settings.max_inflight_per_user,
            settings.max_transactions_per_user,
            settings.max_writing_per_user,
            settings.user_share,
        )

    @property
    def sessions(self) -> int:
        """Connected clients."""
        return len(self.open_sessions)

    @property
    def open_transactions(self) -> int:
        """Open transactions over all connections."""
        return sum(len(s.txns) for s in self.open_sessions)

    async def Session(
        self,
        request_iterator: AsyncIterator[pb.ClientFrame],
        context: grpc.aio.ServicerContext,
    ) -> None:
        """The multiplexed request stream of one client connection, authenticated once
        when it opens (the client learns the outcome from the initial metadata or the
        status) and cut when its credential is revoked or expires."""
        try:
            who = self.gate.user(context)
        except PlasmaError as exc:
            await abort_with(context, exc)
            return
        await context.send_initial_metadata(
            (
                (USER_METADATA_KEY, who.name),
                (INLINE_LIMIT_METADATA_KEY, str(self.parts.files.inline_limit)),
                (TRASH_METADATA_KEY, repr(float(self.settings.trash_interval))),
            )
        )
        session = Session(
            self.parts,
            self.status,
            self.settings,
            context.peer(),
            self.counters,
            self.metrics,
            who,
            self.rights,
            self.fair,
        )
        expiry = None
        if who.expires is not None:
            expiry = asyncio.get_running_loop().call_later(
                max(0.0, who.expires - time.time()),
                session.cut,
                AuthenticationError("credential expired"),
            )
        self.open_sessions.add(session)
        try:
            # A revocation applied while this stream was being admitted found no session
            # to cut: check again now that revocations will find it.
            self.gate.user(context)
        except PlasmaError as exc:
            session.cut(exc)
        try:
            await session.run(request_iterator, context.write)
        except PlasmaError as exc:
            await abort_with(context, exc)
        finally:
            self.open_sessions.discard(session)
            if expiry is not None:
                expiry.cancel()

    def cut_sessions(self, credentials: set[int], reason: str) -> int:
        """End the open sessions of these credentials; how many there were."""
        doomed = [s for s in self.open_sessions if s.user.credential_id in credentials]
        for session in doomed:
            session.cut(AuthenticationError(reason))
        return len(doomed)

    async def Ping(
        self, request: pb.PingRequest, context: grpc.aio.ServicerContext
    ) -> pb.PingReply:
        """Version and start time (for an authenticated caller)."""
        return await answered(context, self._ping(context))

    async def _ping(self, context: grpc.aio.ServicerContext) -> pb.PingReply:
        self.gate.user(context)
        leadership = self.parts.transactions.leadership
        return pb.PingReply(
            version=VERSION,
            started_ns=self.started_ns,
            requests=dict(self.counters),
            term=leadership.term,
            active_since_ns=int(leadership.since * 1e9),
        )


USED_BLOCKS_PAGE = 4096


class RegistryServicer(pb_grpc.DatanodeRegistryServicer):
    """Datanode registration, heartbeats (with their reports and work) and used blocks."""

    def __init__(
        self,
        registry: DatanodeRegistry,
        monitor: ReplicationMonitor,
        lifecycle: DatanodeLifecycle,
        gate: Gate,
        ticket_ttl: float,
    ) -> None:
        self.registry = registry
        self.monitor = monitor
        self.lifecycle = lifecycle
        self.gate = gate
        self.ticket_ttl = ticket_ttl

    async def Register(
        self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterReply:
        """Admit an authenticated datanode and hand it its id and the ticket secret."""
        return await answered(context, self._register(request, context))

    def _principal(
        self, context: grpc.aio.ServicerContext, datanode_id: int, identity: str
    ) -> None:
        self.registry.check_principal(datanode_id, identity, self.gate.datanode(context))

    async def _register(
        self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterReply:
        principal = self.gate.datanode(context)
        leadership = self.monitor.leadership
        term, heard_from = request.newest_term, request.newest_term_holder
        mine = leadership.current_term()
        if term > mine or (term == mine and heard_from not in ("", leadership.holder)):
            await leadership.step_past(term, f"datanode {request.address}")
            raise NotActiveError("this namenode is taking a newer term; register again")
        row = await self.registry.register(
            request.identity,
            request.host,
            request.address,
            request.blocksize,
            request.capacity_blocks,
            request.local_socket,
            principal,
            request.plaintext,
            request.location,
        )
        await self.lifecycle.returned(row.datanode_id)
        return pb.RegisterReply(
            datanode_id=row.datanode_id,
            ticket_secret=self.registry.secret,
            heartbeat_ms=self.registry.heartbeat_ms,
            term=self.monitor.leadership.term,
            term_holder=self.monitor.leadership.holder,
        )

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        """Note that a datanode lives, take its reports, give it work."""
        return await answered(context, self._heartbeat(request, context))

    async def _heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        self._principal(context, request.datanode_id, request.identity)
        self.lifecycle.heard(request.datanode_id, request.identity)
        work = await self.monitor.heartbeat(request.datanode_id, _heartbeat_report(request))
        reply = _heartbeat_reply(work)
        if not self.monitor.has_work_for(request.datanode_id) and not work.copies:
            reply.next_heartbeat_ms = self.registry.idle_heartbeat_ms
        reply.term = self.monitor.leadership.term
        reply.term_holder = self.monitor.leadership.holder
        principals = self.gate.principals
        if principals is not None:
            # Tickets live ticket_ttl: a credential revoked longer ago has none left.
            cutoff = time.time() - self.ticket_ttl
            reply.revoked_credentials.extend(principals.revoked_since(cutoff))
        return reply

    async def UsedBlocks(
        self, request: pb.UsedBlocksRequest, context: grpc.aio.ServicerContext
    ) -> pb.UsedBlocksReply:
        """A page of the datanode's committed block ranges (for its scrub)."""
        return await answered(context, self._used_blocks(request, context))

    async def _used_blocks(
        self, request: pb.UsedBlocksRequest, context: grpc.aio.ServicerContext
    ) -> pb.UsedBlocksReply:
        self._principal(context, request.datanode_id, request.identity)
        if self.registry.row(request.datanode_id) is None:
            raise NotFoundError(f"datanode {request.datanode_id} is not registered; register again")
        limit = max(1, min(request.limit or USED_BLOCKS_PAGE, USED_BLOCKS_PAGE))
        ranges = await self.monitor.replicas.used_ranges(
            request.datanode_id,
            request.after,
            limit,
            after_ino=request.after_ino,
            after_index=request.after_file_index,
        )
        reply = pb.UsedBlocksReply(more=len(ranges) == limit)
        for used in ranges:
            reply.ranges.add(block_start=used.start, block_count=used.blocks)
            ino, generation, file_index = used.owner
            reply.owners.add(ino=ino, generation=generation, file_index=file_index)
        if reply.more:
            last = ranges[-1]
            reply.next_after, reply.next_ino, reply.next_file_index = (
                last.start, last.ino, last.file_index,
            )  # fmt: skip
        return reply

    async def Peer(
        self, request: pb.PeerRequest, context: grpc.aio.ServicerContext
    ) -> pb.PeerReply:
        """Where another datanode serves its data, as it registered."""
        return await answered(context, self._peer(request, context))

    async def _peer(
        self, request: pb.PeerRequest, context: grpc.aio.ServicerContext
    ) -> pb.PeerReply:
        self._principal(context, request.datanode_id, request.identity)
        row = self.registry.row(request.peer_id)
        if row is None:
            raise NotFoundError(f"datanode {request.peer_id} is not registered")
        return pb.PeerReply(address=row.address, plaintext=row.plaintext)


def _heartbeat_report(request: pb.HeartbeatRequest) -> HeartbeatReport:
    return HeartbeatReport(
        finished=[
            CopyOutcome(
                task_id=r.task_id,
                ok=r.code == pb.OK,
                source_corrupt=r.code == pb.ECORRUPT,
                bytes_copied=r.bytes,
                message=r.message,
            )
            for r in request.finished
        ],
        running=list(request.running),
        corrupt=[(b.block_start, b.block_count, b.reason) for b in request.corrupt],
        verified=[(r.block_start, r.block_count) for r in request.verified],
    )


def _heartbeat_reply(work: HeartbeatWork) -> pb.HeartbeatReply:
    reply = pb.HeartbeatReply()
    reply.cancel.extend(work.cancel)
    for start, count in work.verify:
        reply.verify.add(block_start=start, block_count=count)
    for copy in work.copies:
        task = reply.copies.add(
            task_id=copy.task_id,
            source_datanode_id=copy.source_datanode_id,
            source_address=copy.source_address,
            source_plaintext=copy.source_plaintext,
            source_block_start=copy.source_block_start,
            block_start=copy.block_start,
            block_count=copy.block_count,
        )
        task.source_ticket.MergeFromString(copy.source_ticket)
    return reply
