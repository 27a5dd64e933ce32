"""`pfs gateway s3`: the S3 gateway in the foreground, against the cluster `pfs` is
configured for (or --namenode, as the credential of --token-file); the same as the
`pfs-gateway` daemon with flags."""

from __future__ import annotations

import argparse

from plasmafs.core.errors import ConfigError


def cmd_gateway(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit status."""
    try:
        from plasmafs.gateway.__main__ import run
    except ImportError as exc:
        raise ConfigError(
            f"pfs gateway s3 needs the gateway extra ({exc}): pip install 'plasmafs[gateway]'"
        ) from None
    return run(args, "pfs gateway s3")
