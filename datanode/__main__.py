"""`pfs-datanode`: the datanode daemon."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from plasmafs.core.runtime.daemon import run_daemon
from plasmafs.core.runtime.freed_buffers import reuse_freed_buffers
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
    parser.add_argument("--namenode", help="the namenode's registry host:port")
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
    reuse_freed_buffers()  # every data message is megabytes
    return run_daemon("pfs-datanode", lambda: DatanodeSettings(**overrides), serve)


if __name__ == "__main__":
    sys.exit(main())
