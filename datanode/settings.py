"""Datanode settings: environment variables PFS_DATANODE_*, or a TOML file
(PFS_DATANODE_CONFIG or --config), environment winning over the file."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from plasmafs.core.errors import PlasmaError
from plasmafs.core.host_identity import host_identity
from plasmafs.core.runtime.daemon import DaemonSettings
from plasmafs.core.sizes import parse_size
from plasmafs.core.value_checks import (
    DEFAULT_LOCATION,
    check_address,
    check_blocksize,
    check_location,
)


class DatanodeSettings(DaemonSettings):
    """Everything the datanode daemon can be told."""

    config_variable: ClassVar[str] = "PFS_DATANODE_CONFIG"
    model_config = SettingsConfigDict(env_prefix="PFS_DATANODE_", extra="forbid")

    volume: Path = Field(description="directory holding the volume files")
    capacity: int = Field(default=1024**3, description="volume size in bytes (e.g. 20G)")
    blocksize: int = Field(default=1024 * 1024, description="must equal the cluster's")
    listen: str = Field(default="127.0.0.1:0", description="host:port for gRPC")
    data_tls: bool = Field(
        default=True,
        description="serve block reads and writes over TLS; false sends the bulk data in "
        "plaintext on a trusted network (tickets still authorize every call; a sniffed "
        "ticket can be replayed until it expires)",
    )
    advertise: str | None = Field(default=None, description="host:port clients use")
    location: str = Field(
        default=DEFAULT_LOCATION,
        description="the rack or zone this datanode is in (e.g. /dc1/rack7): replicas of "
        "a block go to distinct locations when there are enough",
    )
    namenode: str = Field(
        default="127.0.0.1:7531",
        description="the namenode's registry address (its registry_listen), host:port; "
        "with standby namenodes, every one's, comma-separated",
    )
    host_identity: str = Field(
        default_factory=host_identity,
        description="the host clients compare with their own to read through shared "
        "memory (default: host name and network namespace)",
    )
    sync: str = Field(
        default="direct",
        description="direct (default: O_DIRECT writes, then fdatasync, and local reads "
        "around the page cache; through the page cache where the file system refuses "
        "O_DIRECT, unless asked for explicitly), fdatasync (through the page cache) or none",
    )
    local_socket: Path | None = Field(
        default=None, description="Unix socket for local reads (default: in the volume)"
    )
    local_reads: bool = Field(default=True, description="serve shared-memory local reads")
    local_read_connections: int = Field(
        default=64,
        ge=1,
        le=4096,
        description="local-read connections served at once (a thread and a shared-memory "
        "segment each); more are refused and those clients read over gRPC",
    )
    io_threads: int = Field(
        default=8, ge=1, le=256, description="threads for the disk I/O of gRPC reads and writes"
    )
    replication_streams: int = Field(
        default=2,
        ge=1,
        le=64,
        description="copy tasks (re-replication) run at once; more are queued here",
    )
    replication_bandwidth: int = Field(
        default=0, description="bytes/s for all copy tasks together (e.g. 100M; 0: unlimited)"
    )
    scrub_bandwidth: int = Field(
        default=16 * 1024**2,
        description="bytes/s the background scrub reads (e.g. 16M; 0: no scrub)",
    )
    scrub_pause: float = Field(default=3600.0, ge=0, description="seconds between scrub passes")
    metrics_listen: str = Field(
        default="", description="host:port for Prometheus /metrics (empty: off; port 0: any)"
    )
    ready_file: Path | None = None
    register_timeout: float = Field(default=60.0, gt=0)
    log_level: str = "INFO"

    @field_validator(
        "capacity", "blocksize", "replication_bandwidth", "scrub_bandwidth", mode="before"
    )
    @classmethod
    def _sizes(cls, value: str | int) -> int:
        return parse_size(value)

    @field_validator("location")
    @classmethod
    def _location(cls, value: str) -> str:
        try:
            return check_location(value)
        except PlasmaError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("namenode")
    @classmethod
    def _registry_addresses(cls, value: str) -> str:
        try:
            for address in value.split(","):
                check_address(address.strip(), "namenode")
        except PlasmaError as exc:
            raise ValueError(str(exc)) from None
        return value

    def registry_addresses(self) -> list[str]:
        """The registry address of every namenode, active or standby."""
        return [a.strip() for a in self.namenode.split(",")]

    @field_validator("blocksize")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        try:
            return check_blocksize(value)
        except PlasmaError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("metrics_listen")
    @classmethod
    def _metrics_address(cls, value: str) -> str:
        if not value:
            return value
        try:
            return check_address(value, "metrics_listen", any_port=True)
        except PlasmaError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("sync")
    @classmethod
    def _sync_policy(cls, value: str) -> str:
        if value not in ("fdatasync", "direct", "none"):
            raise ValueError("sync must be 'fdatasync', 'direct' or 'none'")
        return value

    @property
    def direct_required(self) -> bool:
        """Whether direct I/O was asked for (not just the default): then a file system
        that refuses it is an error instead of a fallback to the page cache."""
        return "sync" in self.model_fields_set
