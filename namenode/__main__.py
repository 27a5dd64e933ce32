"""`pfs-namenode`: the namenode daemon."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import uvloop
from pydantic import ValidationError

from plasmafs.client.errors import PlasmaError
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
    parser.add_argument("--dsn", help="PostgreSQL DSN")
    parser.add_argument("--ready-file", type=Path, help="write the bound address here")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(
            args.config, listen=args.listen, dsn=args.dsn, ready_file=args.ready_file
        )
    except (ValidationError, FileNotFoundError, ValueError) as exc:
        print(f"pfs-namenode: bad configuration: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        uvloop.run(serve(settings))
    except PlasmaError as exc:
        print(f"pfs-namenode: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
