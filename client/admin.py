"""Cluster administration through the namenode's Admin service: the datanodes and their
lifecycle (decommission, recommission, remove) and fsck, the check of every replica.

The calls are plain gRPC calls on the connection's channel, next to its request stream;
their rate does not matter. What they return are small frozen values, not protobufs,
and a refused call raises the plasmafs error the namenode reported (NotFoundError for
an unknown datanode, InvalidArgumentError or BusyError for a refused decommission).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

import grpc

from plasmafs.client.transaction import quota_from_wire
from plasmafs.core import paths
from plasmafs.core.attributes import Quota, ReplicaState
from plasmafs.core.errors import InvalidArgumentError, PlasmaError, StorageError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import service_error
from plasmafs.core.value_checks import DEFAULT_LOCATION

CALL_TIMEOUT = 60.0  # seconds for a unary admin call


class DatanodeState(enum.IntEnum):
    """A datanode's place in its lifecycle; the values are the wire's DatanodeState."""

    LIVE = pb.DATANODE_LIVE
    DEAD = pb.DATANODE_DEAD
    DECOMMISSIONING = pb.DATANODE_DECOMMISSIONING  # its replicas are being copied away
    DECOMMISSIONED = pb.DATANODE_DECOMMISSIONED  # none of its replicas is needed any more

    @property
    def label(self) -> str:
        """The lower-case name reports print."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class DatanodeStatus:
    """One datanode as the namenode sees it."""

    datanode_id: int
    address: str
    host: str
    state: DatanodeState
    alive: bool  # heard from recently (a decommissioned datanode may still be alive)
    capacity_bytes: int
    used_bytes: int  # committed, reserved or held back
    replica_blocks: int  # blocks of committed replicas on it
    last_heartbeat_age: float | None  # seconds; None: no heartbeat since the namenode started
    queued_copies: int  # copy tasks waiting for it as target
    running_copies: int  # copy tasks it is running
    location: str = DEFAULT_LOCATION  # its rack or zone

    @property
    def used_fraction(self) -> float:
        """Used bytes over capacity (0 for a datanode without capacity)."""
        return self.used_bytes / self.capacity_bytes if self.capacity_bytes else 0.0

    @classmethod
    def from_wire(cls, d: pb.DatanodeInfo) -> DatanodeStatus:
        """Build from the wire message."""
        return cls(
            d.datanode_id,
            d.address,
            d.host,
            DatanodeState(d.state),
            d.alive,
            d.capacity_bytes,
            d.used_bytes,
            d.replica_blocks,
            None if d.last_heartbeat_age < 0 else d.last_heartbeat_age,
            d.queued_copies,
            d.running_copies,
            d.location or DEFAULT_LOCATION,
        )


@dataclass(frozen=True, slots=True)
class FsckReplica:
    """One replica of a block group: blocks [block_start, +block_count) of a datanode."""

    datanode_id: int
    address: str
    block_start: int
    state: ReplicaState


@dataclass(frozen=True, slots=True)
class FsckBlock:
    """File blocks [file_index, file_index + block_count) and how they are replicated."""

    file_index: int
    block_count: int
    live: int  # replicas that count in the actual replication
    under_replicated: bool
    mis_replicated: bool  # two replicas on one datanode
    missing: bool  # no live replica
    corrupt: bool  # a replica is corrupt
    replicas: tuple[FsckReplica, ...]

    @property
    def file_end(self) -> int:
        """One past the last file block."""
        return self.file_index + self.block_count


@dataclass(frozen=True, slots=True)
class FsckFile:
    """A file fsck reports, with every block group it has."""

    path: str
    size: int
    replication: int
    blocks: tuple[FsckBlock, ...]

    @property
    def block_count(self) -> int:
        """File blocks, each counted once."""
        return sum(b.block_count for b in self.blocks)

    def count(self, flag: str) -> int:
        """File blocks in groups with `flag` set (under_replicated, mis_replicated,
        missing or corrupt)."""
        return sum(b.block_count for b in self.blocks if getattr(b, flag))

    @property
    def healthy(self) -> bool:
        """No block is under-replicated, mis-replicated, missing or corrupt."""
        return not any(
            b.under_replicated or b.mis_replicated or b.missing or b.corrupt for b in self.blocks
        )


@dataclass(frozen=True, slots=True)
class FsckSummary:
    """The totals of a check (the last item fsck yields)."""

    files: int
    directories: int
    symlinks: int
    blocks: int  # file blocks, each counted once
    replica_blocks: int  # blocks of live replicas
    bytes: int
    under_replicated_blocks: int
    mis_replicated_blocks: int
    missing_blocks: int
    corrupt_blocks: int
    corrupt_files: int  # files with a missing or corrupt block
    live_datanodes: int
    datanodes: int
    record_errors: tuple[str, ...]  # where the namenode's records disagree with each other
    queued_copies: int
    running_copies: int

    @property
    def healthy(self) -> bool:
        """Nothing missing or corrupt, and the namenode's records agree."""
        return not (self.missing_blocks or self.corrupt_blocks or self.record_errors)

    @property
    def average_replication(self) -> float:
        """Live replica blocks per file block."""
        return self.replica_blocks / self.blocks if self.blocks else 0.0


def _file_from_wire(f: pb.FsckFile) -> FsckFile:
    return FsckFile(
        f.path.decode("utf-8", errors="replace"),
        f.size,
        f.replication,
        tuple(
            FsckBlock(
                b.file_index,
                b.block_count,
                b.live,
                b.under_replicated,
                b.mis_replicated,
                b.missing,
                b.corrupt,
                tuple(
                    FsckReplica(r.datanode_id, r.address, r.block_start, ReplicaState(r.state))
                    for r in b.replicas
                ),
            )
            for b in f.blocks
        ),
    )


def _summary_from_wire(s: pb.FsckSummary) -> FsckSummary:
    return FsckSummary(
        s.files,
        s.directories,
        s.symlinks,
        s.blocks,
        s.replica_blocks,
        s.bytes,
        s.under_replicated_blocks,
        s.mis_replicated_blocks,
        s.missing_blocks,
        s.corrupt_blocks,
        s.corrupt_files,
        s.live_datanodes,
        s.datanodes,
        tuple(s.record_errors),
        s.queued_copies,
        s.running_copies,
    )


def check_datanode_id(datanode_id: int) -> int:
    """A datanode id is a positive 32-bit number."""
    if not 0 < datanode_id <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"datanode id must be a positive integer, not {datanode_id}")
    return datanode_id


def _count(value: int, what: str, least: int) -> int:
    if not least <= value < 2**63:
        raise InvalidArgumentError(f"a quota on {what} is a whole number of at least {least}")
    return value


def _error(exc: grpc.RpcError, address: str) -> PlasmaError:
    return service_error(exc, address, "Admin")


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """What `load` wrote."""

    rows: dict[str, int]  # by table
    credentials_skipped: int  # their ids were the cluster's own credentials'
    datanodes_added: int  # dumped datanodes the cluster had not seen
    seconds: float

    @property
    def entries(self) -> int:
        """Directory entries loaded."""
        return self.rows.get("entries", 0)


@dataclass(frozen=True, slots=True)
class BalanceStatus:
    """A balancing run as the namenode reports it (fractions of capacity)."""

    running: bool
    balanced: bool  # every datanode within the threshold of the mean now
    threshold: float
    bandwidth: int  # bytes per second (0: unlimited)
    mean_used: float
    least_used: float
    most_used: float
    bytes_moved: int
    moves_done: int
    moves_failed: int
    moves_running: int
    seconds: float
    note: str

    @classmethod
    def from_wire(cls, s: pb.BalanceStatus) -> BalanceStatus:
        """Build from the wire message."""
        return cls(
            s.running, s.balanced, s.threshold, s.bandwidth, s.mean_used, s.least_used,
            s.most_used, s.bytes_moved, s.moves_done, s.moves_failed, s.moves_running,
            s.seconds, s.note,
        )  # fmt: skip


class Admin:
    """The Admin service of the namenode behind one gRPC channel."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        address: str,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self._stub = pb_grpc.AdminStub(channel)
        self._address = address
        self._metadata = metadata  # the caller's credential

    async def datanodes(self) -> list[DatanodeStatus]:
        """Every datanode the namenode knows, in id order."""
        try:
            reply = await self._stub.ListDatanodes(
                pb.ListDatanodesRequest(), timeout=CALL_TIMEOUT, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise _error(exc, self._address) from None
        return sorted(
            (DatanodeStatus.from_wire(d) for d in reply.datanodes), key=lambda d: d.datanode_id
        )

    async def decommission(self, datanode_id: int) -> DatanodeStatus:
        """Stop placing data on a datanode and copy its replicas elsewhere; it becomes
        DECOMMISSIONED once none of its replicas is needed."""
        return await self._on_datanode(self._stub.Decommission, datanode_id)

    async def recommission(self, datanode_id: int) -> DatanodeStatus:
        """Undo a decommission: the datanode takes new data again."""
        return await self._on_datanode(self._stub.Recommission, datanode_id)

    async def remove_datanode(self, datanode_id: int) -> list[DatanodeStatus]:
        """Forget a dead or decommissioned datanode; returns the datanodes left."""
        request = pb.DatanodeRequest(datanode_id=check_datanode_id(datanode_id))
        try:
            reply = await self._stub.RemoveDatanode(
                request, timeout=CALL_TIMEOUT, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise _error(exc, self._address) from None
        return sorted(
            (DatanodeStatus.from_wire(d) for d in reply.datanodes), key=lambda d: d.datanode_id
        )

    async def balance(
        self, threshold: float = 0.0, bandwidth: int = 0, *, stop: bool = False,
        status_only: bool = False,
    ) -> BalanceStatus:  # fmt: skip
        """Start (or retune) a balancing run, stop it, or just ask how it stands."""
        if threshold and not 0 < threshold < 1:
            raise InvalidArgumentError(
                f"threshold {threshold:g}: a fraction of capacity between 0 and 1"
            )
        if bandwidth < 0:
            raise InvalidArgumentError(f"bandwidth {bandwidth}: bytes per second, 0 or more")
        request = pb.BalanceRequest(
            threshold=threshold, bandwidth=bandwidth, stop=stop, status_only=status_only
        )
        try:
            reply = await self._stub.Balance(request, timeout=CALL_TIMEOUT, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _error(exc, self._address) from None
        return BalanceStatus.from_wire(reply)

    async def _on_datanode(self, method: object, datanode_id: int) -> DatanodeStatus:
        request = pb.DatanodeRequest(datanode_id=check_datanode_id(datanode_id))
        try:
            reply = await method(  # type: ignore[operator]
                request, timeout=CALL_TIMEOUT, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise _error(exc, self._address) from None
        return DatanodeStatus.from_wire(reply)

    async def set_quota(
        self, path: str, *, entries: int | None = None, space: int | None = None
    ) -> Quota:
        """Limit the entries and the space (bytes with replication) of the tree at
        directory `path` (None keeps that limit as it is); the quota."""
        request = pb.QuotaRequest(path=paths.encode(path))
        if entries is not None:
            request.max_entries = _count(entries, "entries", 1)
        if space is not None:
            request.max_space = _count(space, "space", 0)
        return await self._quota(request)

    async def clear_quota(self, path: str) -> None:
        """Remove directory `path`'s quota (none: nothing happens)."""
        await self._quota(pb.QuotaRequest(path=paths.encode(path), clear=True))

    async def _quota(self, request: pb.QuotaRequest) -> Quota:
        try:
            reply = await self._stub.SetQuota(
                request, timeout=CALL_TIMEOUT, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise _error(exc, self._address) from None
        return quota_from_wire(reply)

    async def fsck(
        self, path: str = "/", *, all_files: bool = False, list_corrupt: bool = False
    ) -> AsyncIterator[FsckFile | FsckSummary]:
        """Check every file under `path`: yields the files with problems (every file with
        `all_files`, only those with missing or corrupt blocks with `list_corrupt`), then
        one FsckSummary, last."""
        request = pb.FsckRequest(
            path=paths.encode(path), all_files=all_files, list_corrupt=list_corrupt
        )
        call = self._stub.Fsck(request, metadata=self._metadata)
        summary: FsckSummary | None = None
        try:
            async for reply in call:
                if reply.HasField("summary"):
                    summary = _summary_from_wire(reply.summary)
                else:
                    yield _file_from_wire(reply.file)
        except grpc.RpcError as exc:
            raise _error(exc, self._address) from None
        finally:
            if not call.done():
                call.cancel()  # the caller stopped early: no stream is left running
        if summary is None:
            raise StorageError(f"the namenode at {self._address} ended fsck without its summary")
        yield summary

    async def dump(self) -> AsyncIterator[bytes]:
        """The namespace and accounts as one consistent snapshot, in pieces, for `load`
        (a format of the namenode's own: write the pieces as they come)."""
        call = self._stub.Dump(pb.DumpRequest(), metadata=self._metadata)
        try:
            async for chunk in call:
                yield chunk.data
        except grpc.RpcError as exc:
            raise _error(exc, self._address) from None
        finally:
            if not call.done():
                call.cancel()

    async def load(self, pieces: AsyncIterable[bytes]) -> LoadSummary:
        """Load a dump (its bytes, in pieces of any size up to a few MiB) into the
        cluster, whose namespace must be empty; the namenode starts over afterwards
        (clients see a failover)."""

        async def requests() -> AsyncIterator[pb.LoadChunk]:
            async for piece in pieces:
                yield pb.LoadChunk(data=piece)

        try:
            reply = await self._stub.Load(requests(), metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _error(exc, self._address) from None
        return LoadSummary(
            dict(reply.rows), reply.credentials_skipped, reply.datanodes_added, reply.seconds
        )
