"""`pfs snapshot create|delete|list|diff`: read-only images of a directory's tree,
read at DIR/.snapshot/NAME (as `hdfs dfs -createSnapshot`, `-deleteSnapshot`,
`lsSnapshot` and `snapshotDiff`)."""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from plasmafs.cli.exits import Reporter
from plasmafs.client.client import Client


def add_parsers(sub: Any) -> None:
    """The snapshot command and its verbs."""
    p = sub.add_parser(
        "snapshot",
        help="read-only images of a directory's tree, read at DIR/.snapshot/NAME",
    )
    verbs = p.add_subparsers(dest="snapshot_command", required=True, metavar="VERB")
    q = verbs.add_parser("create", help="take a snapshot of DIR named NAME")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("name", metavar="NAME")
    q = verbs.add_parser("delete", help="delete snapshot NAME of DIR (its unshared space is freed)")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("name", metavar="NAME")
    q = verbs.add_parser("list", help="the snapshots of DIR, oldest first")
    q.add_argument("dir", metavar="DIR")
    q = verbs.add_parser(
        "diff",
        help="what changed in DIR's tree from snapshot FROM to snapshot TO (default: now): "
        "+ created, - deleted, M modified",
    )
    q.add_argument("dir", metavar="DIR")
    q.add_argument("since", metavar="FROM")
    q.add_argument("until", metavar="TO", nargs="?")


async def cmd_snapshot(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """Run one snapshot verb."""
    snaps = await fs.snapshots()
    verb = args.snapshot_command
    if verb == "create":
        taken = await snaps.create(args.dir, args.name)
        print(f"created {taken.path(args.dir)} ({taken.inodes} entries)")
    elif verb == "delete":
        await snaps.delete(args.dir, args.name)
    elif verb == "list":
        for s in await snaps.list(args.dir):
            when = datetime.datetime.fromtimestamp(s.created_ns / 1e9).strftime("%Y-%m-%d %H:%M")
            print(f"{when} {s.inodes:>10} {s.path(args.dir)}")
    else:
        async for change in snaps.diff(args.dir, args.since, args.until):
            print(f"{change.change}\t./{change.path}")
