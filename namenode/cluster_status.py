"""The state of the whole file system as `fsstat` reports it (namespace counts, space
of the live datanodes, replica health), and the report of a replica a client could not
read."""

from __future__ import annotations

from typing import Protocol

from plasmafs.core.attributes import FileKind, FsStat
from plasmafs.core.errors import InvalidArgumentError
from plasmafs.namenode.filedata import FileData
from plasmafs.namenode.kind_counts import KindCounts


class ReplicaAccounting(Protocol):
    """What the status asks replica health."""

    def counts(self) -> tuple[int, int, int]:
        """File blocks under-replicated, missing and with a corrupt replica."""
        ...

    def request_verify(self, datanode: int, start: int, count: int) -> None:
        """Have a datanode check blocks a client could not read."""
        ...


class ClusterStatus:
    """Answers fsstat and takes clients' reports of corrupt replicas."""

    def __init__(
        self,
        counts: KindCounts,
        data: FileData,
        accounting: ReplicaAccounting,
        blocksize: int,
    ) -> None:
        self._counts = counts
        self._data = data
        self._accounting = accounting
        self._blocksize = blocksize

    def fsstat(self) -> FsStat:
        """Committed namespace counts and the space of the live datanodes."""
        allocator, live = self._data.allocator, self._data.registry.live()
        capacity = allocator.capacity_blocks(live)
        free = sum(allocator.free_blocks(d) for d in live)
        bs = self._blocksize
        under, missing, corrupt = self._accounting.counts()
        counts = self._counts
        return FsStat(
            files=counts.get(FileKind.FILE),
            directories=counts.get(FileKind.DIRECTORY),
            symlinks=counts.get(FileKind.SYMLINK),
            capacity_bytes=capacity * bs,
            used_bytes=(capacity - free) * bs,
            live_datanodes=len(live),
            blocksize=bs,
            held_bytes=allocator.held_blocks(live) * bs,
            under_replicated_blocks=under,
            missing_blocks=missing,
            corrupt_blocks=corrupt,
        )

    def report_corrupt(self, datanode: int, start: int, count: int) -> None:
        """A client read failed a checksum on a replica: its datanode checks the blocks."""
        if count < 1:
            raise InvalidArgumentError("report at least one block")
        self._accounting.request_verify(datanode, start, count)
