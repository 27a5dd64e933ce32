"""`pfs-gateway`: the S3 gateway daemon (`pfs gateway s3` runs the same in the
foreground with flags)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from plasmafs.core.runtime.daemon import run_daemon
from plasmafs.gateway.server import serve
from plasmafs.gateway.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, load settings and serve until stopped."""
    parser = argparse.ArgumentParser(
        prog="pfs-gateway",
        description="plasmafs S3 gateway. Settings come from PFS_GATEWAY_* variables or a "
        "TOML file; flags override both.",
    )
    parser.add_argument("--config", type=Path, help="TOML settings file")
    parser.add_argument("--listen", help="host:port (default 127.0.0.1:7580)")
    parser.add_argument("--namenode", help="namenode address(es) (default: pfs's)")
    parser.add_argument("--token-file", type=Path, help="the gateway's credential")
    parser.add_argument("--tls-cert", type=Path, help="HTTPS certificate (PEM)")
    parser.add_argument("--tls-key", type=Path, help="its private key (PEM)")
    parser.add_argument("--root", help="the directory whose subdirectories are buckets")
    parser.add_argument("--region", help="the region reported (default us-east-1)")
    parser.add_argument("--ready-file", type=Path, help="write the bound address here")
    args = parser.parse_args(argv)
    return run(args, "pfs-gateway")


def run(args: argparse.Namespace, prog: str) -> int:
    """Serve with the settings `args` give over the environment's."""
    return run_daemon(
        prog,
        lambda: load_settings(
            getattr(args, "config", None),
            listen=args.listen,
            namenode=args.namenode,
            token_file=args.token_file,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            root=args.root,
            region=args.region,
            ready_file=getattr(args, "ready_file", None),
        ),
        serve,
    )


if __name__ == "__main__":
    sys.exit(main())
