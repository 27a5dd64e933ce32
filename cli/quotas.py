"""`pfs admin quota set|clear|get` and the quota columns of `pfs count -q`, as HDFS
prints them (QUOTA REM_QUOTA SPACE_QUOTA REM_SPACE_QUOTA: "none" and "inf" where a
directory has no limit of that kind)."""

from __future__ import annotations

import argparse
from typing import Any

from plasmafs.cli import formatting
from plasmafs.client.client import Client
from plasmafs.core import paths
from plasmafs.core.attributes import Quota
from plasmafs.core.errors import InvalidArgumentError
from plasmafs.core.sizes import parse_size

QUOTA_HEADER = f"{'QUOTA':>12} {'REM_QUOTA':>12} {'SPACE_QUOTA':>15} {'REM_SPACE_QUOTA':>15}"


def add_parsers(actions: Any) -> None:
    """`quota` among the admin actions."""
    p = actions.add_parser(
        "quota",
        help="limit the entries and the space (with replication) of a directory's tree",
    )
    verbs = p.add_subparsers(dest="quota_command", required=True, metavar="VERB")
    q = verbs.add_parser("set", help="set limits (a limit not given stays as it is)")
    q.add_argument("path", metavar="PATH")
    q.add_argument(
        "--entries", metavar="N", help="names in the tree at most, the directory included"
    )
    q.add_argument("--bytes", metavar="SIZE", help="space with replication at most, e.g. 10G")
    q = verbs.add_parser("clear", help="remove a directory's quota")
    q.add_argument("path", metavar="PATH")
    q = verbs.add_parser("get", help="a directory's quota and what its tree uses of it")
    q.add_argument("path", metavar="PATH")


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse bad limits before connecting."""
    if args.command != "admin" or args.admin_command != "quota":
        return
    if args.quota_command == "set":
        if args.entries is None and args.bytes is None:
            raise InvalidArgumentError("quota set needs --entries, --bytes or both")
        _limits(args)


def _limits(args: argparse.Namespace) -> tuple[int | None, int | None]:
    entries = None
    if args.entries is not None:
        text = args.entries
        if not (text.isascii() and text.isdigit()) or int(text) < 1:
            raise InvalidArgumentError(f"--entries must be a positive integer, not {text!r}")
        entries = int(text)
    space = None
    if args.bytes is not None:
        try:
            space = parse_size(args.bytes)
        except ValueError as exc:
            raise InvalidArgumentError(f"--bytes: {exc}") from None
    return entries, space


async def cmd_quota(fs: Client, args: argparse.Namespace) -> None:
    """Set, clear or show a directory's quota."""
    path = paths.normalize(args.path)
    if args.quota_command == "set":
        entries, space = _limits(args)
        print(describe(path, await fs.set_quota(path, entries=entries, space=space)))
    elif args.quota_command == "clear":
        await fs.clear_quota(path)
    else:
        summary = await fs.summarize(path)
        print(describe(path, summary.quota))


def describe(path: str, quota: Quota | None) -> str:
    """One line: the limits and what is left of them."""
    if quota is None:
        return f"{path}: no quota"
    parts = []
    if quota.max_entries is not None:
        parts.append(f"entries {quota.entries:,} of {quota.max_entries:,}")
    if quota.max_space is not None:
        used, most = formatting.human_bytes(quota.space), formatting.human_bytes(quota.max_space)
        parts.append(f"space {used} of {most}")
    return f"{path}: " + "; ".join(parts)


def columns(quota: Quota | None, human: bool) -> str:
    """The four quota columns of `count -q`."""

    def size(n: int) -> str:
        return formatting.human_bytes(n) if human else str(n)

    if quota is None or quota.max_entries is None:
        names = f"{'none':>12} {'inf':>12}"
    else:
        names = f"{quota.max_entries:>12} {quota.remaining_entries:>12}"
    if quota is None or quota.max_space is None:
        space = f"{'none':>15} {'inf':>15}"
    else:
        space = f"{size(quota.max_space):>15} {size(quota.remaining_space or 0):>15}"
    return f"{names} {space}"
