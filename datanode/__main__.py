"""`pfs-datanode`: the datanode daemon."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import uvloop
from pydantic import ValidationError

from plasmafs.client.errors import PlasmaError
from plasmafs.datanode.server import serve
from plasmafs.datanode.settings import DatanodeSettings


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, load settings and serve until stopped."""
    parser = argparse.ArgumentParser(
        prog="pfs-datanode",
        description="plasmafs datanode. Settings come from PFS_DATANODE_* variables or a "
        "TOML file; flags override both.",
    )
    parser.add_argument("--config", type=Path, help="TOML settings file")
    parser.add_argument("--volume", type=Path, help="volume directory")
    parser.add_argument("--capacity", help="volume size, e.g. 20G")
    parser.add_argument("--blocksize", help="block size, e.g. 1M (must match the cluster)")
    parser.add_argument("--listen", help="host:port (default 127.0.0.1:0)")
    parser.add_argument("--namenode", help="namenode host:port")
    parser.add_argument("--ready-file", type=Path, help="write the bound address here")
    args = parser.parse_args(argv)
    if args.config is not None:
        if not args.config.is_file():
            print(f"pfs-datanode: config file not found: {args.config}", file=sys.stderr)
            return 2
        os.environ["PFS_DATANODE_CONFIG"] = str(args.config)
    overrides = {
        k: v
        for k, v in {
            "volume": args.volume,
            "capacity": args.capacity,
            "blocksize": args.blocksize,
            "listen": args.listen,
            "namenode": args.namenode,
            "ready_file": args.ready_file,
        }.items()
        if v is not None
    }
    try:
        settings = DatanodeSettings(**overrides)
    except (ValidationError, ValueError) as exc:
        first = str(exc).splitlines()
        print(f"pfs-datanode: bad configuration: {' '.join(first[:3])}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        uvloop.run(serve(settings))
    except PlasmaError as exc:
        print(f"pfs-datanode: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
