"""Where the client finds its namenode: an explicit address, PFS_CLIENT_NAMENODE, or the
local cluster's client.json under PFS_HOME (default ~/.plasmafs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from plasmafs.client import values
from plasmafs.client.errors import ConfigError

CLIENT_CONFIG = "client.json"


def pfs_home() -> Path:
    """The directory of the local cluster and the CLI's configuration."""
    return Path(os.environ.get("PFS_HOME") or "~/.plasmafs").expanduser()


def check_address(address: str) -> str:
    """Validate the namenode's host:port."""
    return values.check_address(address, "namenode address")


def namenode_address(explicit: str | None = None) -> str:
    """The namenode's host:port for this client."""
    if explicit:
        return check_address(explicit)
    from_env = os.environ.get("PFS_CLIENT_NAMENODE")
    if from_env:
        return check_address(from_env)
    path = pfs_home() / CLIENT_CONFIG
    if path.is_file():
        try:
            address = json.loads(path.read_text())["namenode"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path} is not a valid client config: {exc}") from exc
        return check_address(str(address))
    raise ConfigError(
        "no namenode configured: run `pfs local up`, set PFS_CLIENT_NAMENODE=host:port, "
        "or pass --namenode"
    )


def write_client_config(home: Path, address: str) -> Path:
    """Record the namenode address for clients using `home` as PFS_HOME."""
    path = home / CLIENT_CONFIG
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"namenode": check_address(address)}, indent=2) + "\n")
    tmp.replace(path)
    return path
