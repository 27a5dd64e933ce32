"""Where the client finds its namenode: an explicit address, PFS_CLIENT_NAMENODE, or the
local cluster's client.json under PFS_HOME (default ~/.plasmafs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from plasmafs.client import values
from plasmafs.client.errors import ConfigError

if TYPE_CHECKING:
    from plasmafs.client.security import ChannelTLS

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
    recorded = _recorded()
    if recorded is not None:
        if "namenode" not in recorded:
            raise ConfigError(f"{pfs_home() / CLIENT_CONFIG} names no namenode")
        return check_address(str(recorded["namenode"]))
    raise ConfigError(
        "no namenode configured: run `pfs local up`, set PFS_CLIENT_NAMENODE=host:port, "
        "or pass --namenode"
    )


def client_tls(explicit_address: str | None = None) -> ChannelTLS | None:
    """How the client verifies the cluster: the CA in PFS_CLIENT_CA, else (for the
    namenode of the local cluster's client.json) the CA recorded there; None: plaintext."""
    from plasmafs.client.security import ChannelTLS

    ca = os.environ.get("PFS_CLIENT_CA")
    if not ca and not explicit_address and not os.environ.get("PFS_CLIENT_NAMENODE"):
        ca = (_recorded() or {}).get("ca")
    return ChannelTLS.from_files(Path(ca)) if ca else None


def _recorded() -> dict[str, str] | None:
    """What `pfs local up` recorded in PFS_HOME/client.json, or None without one."""
    path = pfs_home() / CLIENT_CONFIG
    if not path.is_file():
        return None
    try:
        recorded = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"{path} is not a valid client config: {exc}") from exc
    if not isinstance(recorded, dict):
        raise ConfigError(f"{path} is not a valid client config: not an object")
    return recorded


def write_client_config(home: Path, address: str, ca: Path | None = None) -> Path:
    """Record the namenode address (and the CA to verify it with) for clients using
    `home` as PFS_HOME."""
    path = home / CLIENT_CONFIG
    tmp = path.with_suffix(".tmp")
    record: dict[str, str] = {"namenode": check_address(address)}
    if ca is not None:
        record["ca"] = str(ca)
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
    return path
