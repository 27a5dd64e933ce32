"""Gateway settings: environment variables PFS_GATEWAY_*, or a TOML file
(PFS_GATEWAY_CONFIG or --config), environment winning over the file; `pfs gateway s3`
flags over both.

`tls_cert` and `tls_key` are the gateway's HTTPS certificate (without them it serves
plain HTTP: keep it on 127.0.0.1, or behind a TLS proxy); `tls_ca` verifies the
namenode (default: as `pfs` does); the cluster and the gateway's own credential come
from `namenode` and `token_file` (default: as `pfs` does). That credential must be
allowed to act for the users of the access keys it serves (a superuser's, or one
granted their uids with `pfs admin user set NAME --act-for-callers`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from plasmafs.core.errors import PlasmaError
from plasmafs.core.runtime.daemon import DaemonSettings
from plasmafs.core.value_checks import check_address


class GatewaySettings(DaemonSettings):
    """Everything the S3 gateway can be told."""

    config_variable: ClassVar[str] = "PFS_GATEWAY_CONFIG"
    model_config = SettingsConfigDict(env_prefix="PFS_GATEWAY_", extra="forbid")

    listen: str = Field(default="127.0.0.1:7580", description="host:port to serve HTTP(S) on")
    namenode: str | None = Field(
        default=None, description="namenode address(es), comma-separated (default: pfs's)"
    )
    token_file: Path | None = Field(
        default=None, description="the gateway's own credential (default: pfs's)"
    )
    root: str = Field(default="/", description="the directory whose subdirectories are buckets")
    region: str = Field(default="us-east-1", description="the region the gateway reports")
    min_part_size: int = Field(
        default=5 * 1024 * 1024,
        ge=1,
        description="the smallest size of a multipart upload's parts but the last (S3's)",
    )
    ready_file: Path | None = Field(
        default=None, description="write the bound host:port here once serving"
    )
    log_level: str = Field(default="INFO")

    @field_validator("listen")
    @classmethod
    def _listen_has_port(cls, value: str) -> str:
        try:
            return check_address(value, "listen", any_port=True)
        except PlasmaError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("root")
    @classmethod
    def _absolute_root(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("root is an absolute path")
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9-]{1,64}", value):
            raise ValueError("a region is lowercase letters, digits and '-'")
        return value

    def check_security(self) -> None:
        """Plain HTTP is allowed (its default address is the loopback)."""


def load_settings(config: Path | None = None, **overrides: Any) -> GatewaySettings:
    """Settings from the environment, an optional TOML file, and explicit overrides."""
    if config is not None:
        if not config.is_file():
            raise FileNotFoundError(f"gateway config file not found: {config}")
        os.environ["PFS_GATEWAY_CONFIG"] = str(config)
    return GatewaySettings(**{k: v for k, v in overrides.items() if v is not None})
