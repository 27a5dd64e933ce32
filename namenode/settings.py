"""Namenode settings: environment variables PFS_NAMENODE_*, or a TOML file
(PFS_NAMENODE_CONFIG or --config), environment winning over the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import SettingsConfigDict

from plasmafs.core.errors import PlasmaError
from plasmafs.core.runtime.daemon import DaemonSettings
from plasmafs.core.sizes import parse_size
from plasmafs.core.tls import ServerTLS
from plasmafs.core.value_checks import check_address


class NamenodeSettings(DaemonSettings):
    """Everything the namenode daemon can be told."""

    config_variable: ClassVar[str] = "PFS_NAMENODE_CONFIG"
    model_config = SettingsConfigDict(env_prefix="PFS_NAMENODE_", extra="forbid")

    dsn: str | None = Field(
        default=None,
        description="PostgreSQL DSN; when unset, the standard PG* variables are used",
    )
    listen: str = Field(default="127.0.0.1:7530", description="host:port to serve gRPC on")
    registry_listen: str = Field(
        default="127.0.0.1:7531",
        description="host:port where datanodes register and send heartbeats; with TLS it "
        "admits only callers presenting a certificate of tls_ca",
    )
    ready_file: Path | None = Field(
        default=None, description="write the bound address here once serving"
    )
    read_pool_size: int = Field(default=4, ge=1, le=64)
    cache_size: int = Field(
        default=512 * 1024 * 1024,
        ge=64 * 1024,
        description="bytes of memory the inode and entry cache may use, however large the "
        "namespace (e.g. 512M, 4G): about 1 KiB per file cached with its entry, plus small "
        "files' content",
    )
    directory_load_limit: int = Field(
        default=100_000,
        ge=0,
        description="a directory of at most this many entries that keeps missing the "
        "cache is read whole, so that lookups and creates in it need no query (0: never; "
        "at most a quarter of what the cache holds is used)",
    )
    max_group: int = Field(default=512, ge=1, le=10_000)
    commit_lanes: int = Field(default=1, ge=1, le=16)
    ticket_ttl: float = Field(
        default=600.0, gt=0, description="seconds a block ticket lives (a write ticket)"
    )
    read_ticket_ttl: float = Field(
        default=60.0,
        gt=0,
        description="seconds a read ticket lives: a reader open longer gets new ones; "
        "blocks a file read lately gives up are reused this long after its last read",
    )
    lease_ttl: float = Field(
        default=3.0,
        ge=0.3,
        le=600,
        description="seconds the active namenode's lease lasts: a standby takes over this "
        "long after the active one stopped renewing it (renewed every third of it)",
    )
    advertise: str = Field(
        default="",
        description="host:port clients reach this namenode at, as other namenodes show it "
        "(default: listen)",
    )
    datanode_dead_after: float = Field(default=10.0, gt=0)
    replica_lost_after: float = Field(
        default=600.0,
        gt=0,
        description="seconds a dead datanode's replicas stay suspect before they are "
        "declared lost and copied anew (as HDFS's 10 minutes)",
    )
    replication_streams: int = Field(
        default=2,
        ge=1,
        le=64,
        description="copies a datanode runs at once as target, and serves as source",
    )
    replication_scan_interval: float = Field(
        default=300.0, gt=0, description="seconds between full scans of the block groups"
    )
    replication_check_interval: float = Field(
        default=1.0, gt=0, description="seconds between checks of what changed"
    )
    balance_threshold: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="balance in the background: move replicas whenever a datanode's used "
        "fraction is farther than this from the mean (e.g. 0.1; 0: only when asked, "
        "pfs admin balance)",
    )
    balance_bandwidth: int = Field(
        default=0, description="bytes/s the background balancer moves at most (0: unlimited)"
    )
    heartbeat_ms: int = Field(default=1000, ge=50)
    metrics_listen: str = Field(
        default="", description="host:port for Prometheus /metrics (empty: off; port 0: any)"
    )
    default_replication: int = Field(default=1, ge=1, le=32)
    default_blocksize: int = Field(default=1024 * 1024)
    trash_interval: float = Field(
        default=86400.0,
        ge=0,
        le=365 * 86400,
        description="seconds an entry removed with `pfs rm` (and the library's and "
        "fsspec's removes) stays in its remover's trash, /.Trash/<user>/, before the "
        "namenode deletes it; 0: removes delete at once",
    )
    inline_limit: int = Field(
        default=4096,
        ge=0,
        le=65536,
        description="files up to this many bytes keep their content in the namespace "
        "(PostgreSQL and the inode cache): no blocks, no datanode call; 0: never",
    )
    max_transactions_per_session: int = Field(default=100_000, ge=1)
    max_inflight_per_session: int = Field(default=8192, ge=1)
    max_inflight_per_user: int = Field(
        default=65536,
        ge=1,
        description="requests one user may have in flight over all its connections; "
        "more wait (the namenode stops reading that user's streams)",
    )
    max_transactions_per_user: int = Field(
        default=100_000,
        ge=1,
        description="open transactions one user may have over all its connections; "
        "a begin past it is refused (BusyError)",
    )
    max_writing_per_user: int = Field(
        default=10_000,
        ge=1,
        description="files one user may be writing (blocks allocated, not yet committed) "
        "over all its open transactions; an allocation past it is refused (BusyError)",
    )
    user_share: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="while a user with few requests in flight (8 or fewer) is active, the "
        "most of the namenode's time a user with more in flight may take: a flood past it "
        "is held back (1: users' requests only take turns, nobody is held back). Low by "
        "default because clients on the namenode's host share its cores; raise it on a "
        "namenode host of its own",
    )
    max_readdir_page: int = Field(default=4096, ge=1, le=65536)
    lease_recall_timeout: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="seconds a session waits for the holder of a directory lease to "
        "release it before the lease is taken away",
    )
    grace_seconds: float = Field(default=5.0, ge=0)
    s3_secret_file: Path | None = Field(
        default=None,
        description="32 random bytes (mode 0600, the same on every namenode) sealing the "
        "secrets of S3 access keys in the database; without it no S3 key can be made or used",
    )
    log_level: str = Field(default="INFO")

    @field_validator("cache_size", "balance_bandwidth", mode="before")
    @classmethod
    def _sizes(cls, value: str | int) -> int:
        return parse_size(value)

    @field_validator("listen", "registry_listen")
    @classmethod
    def _listen_has_port(cls, value: str, info: ValidationInfo) -> str:
        try:
            return check_address(value, info.field_name or "listen", any_port=True)
        except PlasmaError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("advertise")
    @classmethod
    def _advertise_has_port(cls, value: str) -> str:
        if not value:
            return value
        try:
            return check_address(value, "advertise")
        except PlasmaError as exc:
            raise ValueError(str(exc)) from None

    def advertised(self, listen: str) -> str:
        """The address clients reach this namenode at: `advertise`, else `listen` (with
        the port it bound)."""
        return self.advertise or listen

    def registry_tls(self) -> ServerTLS | None:
        """TLS of the registry port: the server's certificate, and datanodes' client
        certificates required and checked against tls_ca (None when plaintext)."""
        tls = self.server_tls()
        return tls.requiring_client_certificates() if tls is not None else None


def load_settings(config: Path | None = None, **overrides: Any) -> NamenodeSettings:
    """Settings from the environment, an optional TOML file, and explicit overrides."""
    if config is not None:
        if not config.is_file():
            raise FileNotFoundError(f"namenode config file not found: {config}")
        os.environ["PFS_NAMENODE_CONFIG"] = str(config)
    return NamenodeSettings(**{k: v for k, v in overrides.items() if v is not None})
