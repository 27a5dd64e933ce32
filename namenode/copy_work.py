"""What a datanode's heartbeat and the namenode's reply carry for re-replication, as
the monitor sees them (the registry servicer translates them to and from the wire):
the copies a datanode finished or still runs, the blocks it found corrupt or
verified, and the copies, cancellations and verifications it is given."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from plasmafs.namenode.inode_records import ExtentRow


@dataclass(slots=True)
class CopyJob:
    """One copy given to a target datanode."""

    task_id: int
    ino: int
    source: ExtentRow
    target: ExtentRow  # the reserved blocks on the target datanode
    given: float = field(default_factory=time.monotonic)
    acknowledged: bool = False  # the target reported it running (or finished)
    move_from: int | None = None  # a balancer's move: drop this datanode's replica after


@dataclass(frozen=True, slots=True)
class CopyOutcome:
    """A copy a datanode finished, well or not."""

    task_id: int
    ok: bool
    source_corrupt: bool  # it failed because the source failed a checksum
    bytes_copied: int
    message: str


@dataclass(frozen=True, slots=True)
class HeartbeatReport:
    """What a datanode tells in a heartbeat."""

    finished: list[CopyOutcome]
    running: list[int]  # task ids
    corrupt: list[tuple[int, int, str]]  # block start, count, reason
    verified: list[tuple[int, int]]  # block start, count


@dataclass(frozen=True, slots=True)
class CopyTask:
    """A copy a datanode is to run: pull blocks from a source with a read ticket."""

    task_id: int
    source_datanode_id: int
    source_address: str
    source_plaintext: bool
    source_block_start: int
    source_ticket: bytes  # a serialized datanode Ticket
    block_start: int
    block_count: int


@dataclass(slots=True)
class HeartbeatWork:
    """What the namenode answers a heartbeat with."""

    cancel: list[int] = field(default_factory=list)  # task ids it does not know
    verify: list[tuple[int, int]] = field(default_factory=list)  # block start, count
    copies: list[CopyTask] = field(default_factory=list)
