"""The gRPC face of snapshots: resolves the directory as its caller, checks what the
caller may do, and translates between the wire and namenode/snapshots.py."""

from __future__ import annotations

import grpc

from plasmafs.core.attributes import FileKind
from plasmafs.core.errors import NotDirectoryError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import answered
from plasmafs.namenode.addressing import Place
from plasmafs.namenode.caller_identity import Gate
from plasmafs.namenode.inode_records import Inode
from plasmafs.namenode.permissions import R, check_access
from plasmafs.namenode.principals import Principal
from plasmafs.namenode.snapshots import SnapshotInfo, Snapshots
from plasmafs.namenode.transactions import Transactions
from plasmafs.namenode.view import View


class SnapshotServicer(pb_grpc.SnapshotsServicer):
    """Taking, deleting and listing snapshots."""

    def __init__(
        self, snapshots: Snapshots, view: View, transactions: Transactions, gate: Gate
    ) -> None:
        self.snapshots = snapshots
        self.view = view
        self.transactions = transactions
        self.gate = gate

    async def _directory(
        self, context: grpc.aio.ServicerContext, request: pb.SnapshotRequest
    ) -> tuple[Principal, Inode, str]:
        who = self.gate.user(context)
        self.transactions.check_serving()
        place = Place.of(request.path or b"/")
        directory = await self.view.resolve_place(who, None, place, follow_last=True)
        if directory.kind is not FileKind.DIRECTORY:
            raise NotDirectoryError(f"{place.shown}: not a directory")
        return who, directory, place.shown

    async def CreateSnapshot(
        self, request: pb.SnapshotRequest, context: grpc.aio.ServicerContext
    ) -> pb.SnapshotInfo:
        """Take a snapshot of a directory."""

        async def create() -> pb.SnapshotInfo:
            who, directory, shown = await self._directory(context, request)
            await self.snapshots.check_may(who, directory, f"snapshot of {shown}")
            return _info(await self.snapshots.create(directory, request.name))

        return await answered(context, create())

    async def DeleteSnapshot(
        self, request: pb.SnapshotRequest, context: grpc.aio.ServicerContext
    ) -> pb.SnapshotList:
        """Delete a snapshot of a directory; the snapshots left."""

        async def delete() -> pb.SnapshotList:
            who, directory, shown = await self._directory(context, request)
            await self.snapshots.check_may(who, directory, f"snapshot of {shown}")
            await self.snapshots.delete(directory, request.name)
            return self._list(directory)

        return await answered(context, delete())

    async def ListSnapshots(
        self, request: pb.SnapshotRequest, context: grpc.aio.ServicerContext
    ) -> pb.SnapshotList:
        """A directory's snapshots, oldest first."""

        async def listed() -> pb.SnapshotList:
            who, directory, shown = await self._directory(context, request)
            a = directory.attr
            check_access(who, a.mode, a.uid, a.gid, R, shown)
            return self._list(directory)

        return await answered(context, listed())

    def _list(self, directory: Inode) -> pb.SnapshotList:
        return pb.SnapshotList(snapshots=[_info(s) for s in self.snapshots.listed(directory.ino)])


def _info(snapshot: SnapshotInfo) -> pb.SnapshotInfo:
    return pb.SnapshotInfo(
        name=snapshot.name,
        root_ino=snapshot.root_ino,
        created_ns=snapshot.created_ns,
        inodes=snapshot.inodes,
    )
