"""`pfs-namenode`: the namenode daemon."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from plasmafs.core.runtime.daemon import run_daemon
from plasmafs.namenode.server import serve
from plasmafs.namenode.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, load settings and serve until stopped."""
    parser = argparse.ArgumentParser(
        prog="pfs-namenode",
        description="plasmafs namenode. Settings come from PFS_NAMENODE_* variables "
        "or a TOML file; flags override both.",
    )
    parser.add_argument("--config", type=Path, help="TOML settings file")
    parser.add_argument("--listen", help="host:port (default 127.0.0.1:7530)")
    parser.add_argument(
        "--registry-listen", help="host:port for datanodes (default 127.0.0.1:7531)"
    )
    parser.add_argument("--dsn", help="PostgreSQL DSN")
    parser.add_argument("--ready-file", type=Path, help="write the bound address here")
    args = parser.parse_args(argv)
    return run_daemon(
        "pfs-namenode",
        lambda: load_settings(
            args.config,
            listen=args.listen,
            registry_listen=args.registry_listen,
            dsn=args.dsn,
            ready_file=args.ready_file,
        ),
        serve,
    )


if __name__ == "__main__":
    sys.exit(main())
