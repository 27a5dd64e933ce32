"""The datanode's Prometheus metrics, served over HTTP when `metrics_listen` is set:
scrub progress, copy tasks and their bytes, and the bytes the gRPC service and the
local data path read and wrote, next to the process' own CPU and memory.

The values are plain counters the event loop keeps on the servicer, the copier and the
scrubber. prometheus_client serves scrapes on its own threads, so a scrape asks the
loop for a snapshot of them and waits for it rather than reading them itself.
"""

from __future__ import annotations

from collections.abc import Callable

from plasmafs.core.runtime.metrics import LoopMetrics, Values
from plasmafs.datanode.copier import Copier
from plasmafs.datanode.heartbeat import Heartbeats
from plasmafs.datanode.scrubber import Scrubber
from plasmafs.datanode.service import DatanodeServicer
from plasmafs.datanode.shm_server import LocalDataServer


def values(
    servicer: DatanodeServicer,
    local: LocalDataServer | None,
    copier: Copier,
    scrubber: Scrubber,
    heartbeats: Heartbeats,
) -> Values:
    """Every exported value, read on the event loop."""
    return {
        "pfs_datanode_read_bytes_total": ("Bytes served by ReadBlocks", servicer.bytes_read),
        "pfs_datanode_written_bytes_total": (
            "Bytes made durable by WriteBlocks",
            servicer.bytes_written,
        ),
        "pfs_datanode_local_read_bytes_total": (
            "Bytes served through shared memory to clients on this host",
            local.bytes_read if local is not None else 0,
        ),
        "pfs_datanode_local_written_bytes_total": (
            "Bytes made durable from shared memory for clients on this host",
            local.bytes_written if local is not None else 0,
        ),
        "pfs_datanode_copies_started_total": ("Copy tasks started", copier.started),
        "pfs_datanode_copies_succeeded_total": ("Copy tasks that ended OK", copier.succeeded),
        "pfs_datanode_copies_failed_total": ("Copy tasks that ended with an error", copier.failed),
        "pfs_datanode_copies_cancelled_total": (
            "Copy tasks the namenode cancelled",
            copier.cancelled,
        ),
        "pfs_datanode_copy_bytes_total": (
            "Bytes written into the volume by copies (re-replication and clients')",
            copier.bytes,
        ),
        "pfs_datanode_client_copies_total": (
            "Clients' server-side copies made durable here",
            copier.client_copies,
        ),
        "pfs_datanode_client_copy_bytes_total": (
            "Bytes written by clients' server-side copies",
            copier.client_bytes,
        ),
        "pfs_datanode_copies_running": ("Copy tasks running now", copier.running),
        "pfs_datanode_copies_queued": ("Copy tasks waiting for a stream", copier.queued),
        "pfs_datanode_scrub_passes_total": ("Scrub passes completed", scrubber.passes),
        "pfs_datanode_scrub_pass_blocks": ("Used blocks in this scrub pass", scrubber.pass_blocks),
        "pfs_datanode_scrub_pass_verified_blocks": (
            "Blocks of this scrub pass verified so far",
            scrubber.pass_verified,
        ),
        "pfs_datanode_scrub_bytes_total": ("Bytes the scrub read", scrubber.bandwidth.taken),
        "pfs_datanode_corrupt_blocks_total": (
            "Blocks found failing their checksum (scrub and verifications)",
            scrubber.corrupt_blocks,
        ),
        "pfs_datanode_foreign_blocks_total": (
            "Used blocks found holding another file's or version's data (owner stamps)",
            scrubber.foreign_blocks,
        ),
        "pfs_datanode_owner_checks_total": (
            "Owner checks completed (each scrub pass and each registration)",
            scrubber.owner_checks,
        ),
        "pfs_datanode_heartbeats_total": ("Heartbeats the namenode answered", heartbeats.sent),
        "pfs_datanode_heartbeat_failures": (
            "Heartbeats in a row that got no answer",
            heartbeats.failed,
        ),
        "pfs_datanode_revoked_credentials": (
            "Credentials whose tickets are refused (revoked within a ticket lifetime)",
            len(heartbeats.link.registration.revoked),
        ),
    }


class DatanodeMetrics(LoopMetrics):
    """A registry exporting `read()` (run on the event loop) and the process' figures."""

    def __init__(self, read: Callable[[], Values]) -> None:
        super().__init__()
        self.add_values(read)
