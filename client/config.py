"""Where the client finds its namenode: an explicit address, PFS_CLIENT_NAMENODE, or the
local cluster's client.json under PFS_HOME (default ~/.plasmafs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from plasmafs.core import value_checks as values
from plasmafs.core.errors import ConfigError

if TYPE_CHECKING:
    from plasmafs.core.tls import ChannelTLS

CLIENT_CONFIG = "client.json"


def pfs_home() -> Path:
    """The directory of the local cluster and the CLI's configuration."""
    return Path(os.environ.get("PFS_HOME") or "~/.plasmafs").expanduser()


def check_address(address: str) -> str:
    """Validate the namenode's host:port, or several, comma-separated."""
    split_addresses(address)
    return address


def split_addresses(address: str) -> list[str]:
    """The host:port of each namenode in a comma-separated list."""
    found = [values.check_address(a.strip(), "namenode address") for a in address.split(",")]
    if len(set(found)) != len(found):
        raise ConfigError(f"a namenode is listed twice in {address!r}")
    return found


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


def client_tls(address: str | None = None) -> ChannelTLS | None:
    """How the client verifies the namenode at `address` (None: the configured one): the
    CA in PFS_CLIENT_CA, else the CA the local cluster's client.json records when that
    names this namenode; None: plaintext."""
    from plasmafs.core.tls import ChannelTLS

    ca = os.environ.get("PFS_CLIENT_CA") or _recorded_for(address).get("ca")
    return ChannelTLS.from_files(Path(ca)) if ca else None


def client_token(address: str | None = None, token_file: Path | None = None) -> str | None:
    """The credential the client presents to the namenode at `address`: the token in
    `token_file` (--token-file), else in the file PFS_TOKEN_FILE names, else in the
    local cluster's token file when client.json names this namenode; None: no token."""
    from plasmafs.core.credentials import TOKEN_FILE_ENV, find_token

    recorded = None
    if token_file is None and not os.environ.get(TOKEN_FILE_ENV):
        path = _recorded_for(address).get("token_file")
        recorded = Path(path) if path else None
    return find_token(token_file, recorded)


def _recorded_for(address: str | None) -> dict[str, str]:
    """client.json's record when it describes the namenode at `address` (None: the one
    the client is configured with), else nothing."""
    recorded = _recorded() or {}
    configured = address is None and not os.environ.get("PFS_CLIENT_NAMENODE")
    return recorded if configured or recorded.get("namenode") == address else {}


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


def write_client_config(
    home: Path, address: str, ca: Path | None = None, token_file: Path | None = None
) -> Path:
    """Record the namenode address (the CA to verify it with, the token file of the
    user to act as) for clients using `home` as PFS_HOME."""
    path = home / CLIENT_CONFIG
    tmp = path.with_suffix(".tmp")
    record: dict[str, str] = {"namenode": check_address(address)}
    if ca is not None:
        record["ca"] = str(ca)
    if token_file is not None:
        record["token_file"] = str(token_file)
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
    return path
