"""`pfs`: the command-line client.

Every command prints one line per error (`pfs: CMD: message`) and exits non-zero if
anything failed; it goes on with the other paths where that makes sense, as
coreutils do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from plasmafs.cli import certificates
from plasmafs.cli import quotas as quota_commands
from plasmafs.cli import snapshots as snapshot_commands
from plasmafs.cli import xattrs as xattr_commands
from plasmafs.cli.exits import EXIT_FAILED, CommandFailed
from plasmafs.cli.modes import parse_mode
from plasmafs.cli.stdio import (
    discard_stdout,
    flush_stdout,
    open_standard_descriptors,
    stdout_works,
)
from plasmafs.core.errors import InvalidArgumentError, PlasmaError


class CommandParser(argparse.ArgumentParser):
    """A command's parser. With `leading_mode`, a first argument such as `-w` or
    `-x,o+r` is the mode, as chmod(1) reads `chmod -w FILE`, not an unknown option.
    The options in `signed_values` take the next argument even when it starts with
    "-", as find(1) reads `-size -10K`."""

    def __init__(
        self,
        *args: Any,
        leading_mode: bool = False,
        signed_values: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("allow_abbrev", False)  # "--" options; below: "-" ones too
        super().__init__(*args, **kwargs)
        self.leading_mode = leading_mode
        self.signed_values = signed_values

    def _get_option_tuples(self, option_string: str) -> list[Any]:
        # argparse matches "-s" to "-skipTrash" whatever allow_abbrev says: keep only
        # a one-letter option with its value attached ("-m755").
        name = option_string.split("=", 1)[0]
        found = super()._get_option_tuples(option_string)
        return [t for t in found if t[1] == name or len(t[1]) == 2]

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As ArgumentParser's, after marking a leading mode as positional and joining
        signed values to their options."""
        if self.leading_mode and args and _looks_like_mode(args[0]):
            args = ["--", *args]
        if self.signed_values and args:
            args = _join_signed_values(list(args), self.signed_values)
        return super().parse_known_args(args, namespace)


def _join_signed_values(args: list[str], options: tuple[str, ...]) -> list[str]:
    joined: list[str] = []
    rest = iter(args)
    for arg in rest:
        value = next(rest, None) if arg in options else None
        joined.append(arg if value is None else f"{arg}={value}")
    return joined


def _looks_like_mode(arg: str) -> bool:
    if not arg.startswith("-") or arg in ("--", "-h", "--help"):
        return False
    try:
        parse_mode(arg)
    except InvalidArgumentError:
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(prog="pfs", description="plasmafs command-line client")
    parser.add_argument(
        "--namenode",
        help="host:port (default: PFS_CLIENT_NAMENODE or the local cluster's PFS_HOME/client.json)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="act as the user of this credential (default: PFS_TOKEN_FILE or the local cluster's)",
    )
    parser.add_argument(
        "--no-local-reads",
        action="store_true",
        help="read through gRPC even from datanodes on this host (like PFS_LOCAL_READS=0)",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )

    p = sub.add_parser("ls", help="list directories")
    p.add_argument("-l", dest="long", action="store_true", help="long format")
    p.add_argument("-i", dest="inode", action="store_true", help="show inode numbers")
    p.add_argument("-R", dest="recursive", action="store_true", help="recurse")
    p.add_argument("-d", dest="directory", action="store_true", help="list directories themselves")
    p.add_argument("paths", nargs="*")
    p = sub.add_parser("mkdir", help="create directories")
    p.add_argument("-p", dest="parents", action="store_true", help="create parents, allow existing")
    p.add_argument(
        "-m", dest="mode", default="755", help="octal or symbolic mode, as chmod (default 755)"
    )
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("rmdir", help="remove empty directories")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("rm", help="remove files (and trees with -r)")
    p.add_argument("-r", "-R", dest="recursive", action="store_true", help="remove directories too")
    p.add_argument("-f", dest="force", action="store_true", help="ignore missing paths")
    p.add_argument(
        "-skipTrash", "--skip-trash", dest="skip_trash", action="store_true",
        help="delete at once, not into the trash (/.Trash/USER/)",
    )  # fmt: skip
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("expunge", help="empty your trash of what is older than the trash interval")
    p.add_argument("-immediate", "--immediate", action="store_true", help="empty all of your trash")
    p = sub.add_parser("mv", help="rename or move into a directory")
    p.add_argument("paths", nargs="+", metavar="SRC... DST")
    p = sub.add_parser("touch", help="create empty files or update mtime")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("symlink", help="create a symbolic link PATH -> TARGET")
    p.add_argument("target")
    p.add_argument("path")
    p = sub.add_parser("ln", help="a hard link LINK to TARGET (-s: a symbolic one), as ln")
    p.add_argument("-s", dest="symbolic", action="store_true", help="a symbolic link")
    p.add_argument("target")
    p.add_argument("link", help="the new name (in it, if it is a directory)")
    p = sub.add_parser(
        "concat",
        help="append SOURCES to TARGET without copying their data, and remove them (sizes "
        "but the last's whole blocks), as hdfs dfs -concat",
    )
    p.add_argument("target")
    p.add_argument("sources", nargs="+")
    p = sub.add_parser("readlink", help="print symbolic link targets")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser(
        "chmod",
        help="change permission bits: octal (755) or symbolic (u+x,go-w)",
        leading_mode=True,
    )
    p.add_argument("mode")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("chown", help="change owner and/or group (OWNER, OWNER:GROUP, :GROUP)")
    p.add_argument("owner")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("stat", help="show attributes")
    p.add_argument("paths", nargs="+")
    sub.add_parser("fsstat", help="namespace counts and cluster space")
    p = sub.add_parser(
        "put", help="copy local files (or - for stdin) into plasmafs, or into a directory there"
    )
    p.add_argument("-rep", "--replication", type=int, help="replicas (default: the cluster's)")
    p.add_argument("local", nargs="+", metavar="LOCAL")
    p.add_argument("remote", metavar="REMOTE")
    p = sub.add_parser("get", help="copy a file out of plasmafs (to - for stdout)")
    p.add_argument("remote")
    p.add_argument("local")
    p = sub.add_parser("cat", help="write files to stdout")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("blocks", help="show block lists (PlasmaFS format); globs allowed")
    p.add_argument("patterns", nargs="+")
    p = sub.add_parser("fsck", help="check the replicas of every file under a path (as hdfs fsck)")
    p.add_argument("path", nargs="?", default="/", metavar="PATH")
    p.add_argument(
        "-files", dest="files", action="store_true", help="a line per file, not only problems"
    )
    p.add_argument(
        "-blocks", dest="blocks", action="store_true", help="a line per block group (and -files)"
    )
    p.add_argument(
        "-locations",
        dest="locations",
        action="store_true",
        help="every replica of each block group with its state (and -blocks)",
    )
    p.add_argument(
        "-list-corrupt",
        dest="list_corrupt",
        action="store_true",
        help="only the block groups that are missing or corrupt",
    )
    p = sub.add_parser(
        "setrep", help="change the replication of files (of every file below a directory)"
    )
    p.add_argument(
        "-w", dest="wait", action="store_true", help="wait until every block has N live replicas"
    )
    p.add_argument("replication", metavar="N")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p = sub.add_parser(
        "admin", help="cluster administration: datanodes and their lifecycle, users and groups"
    )
    actions = p.add_subparsers(
        dest="admin_command", required=True, metavar="ACTION", parser_class=CommandParser
    )
    actions.add_parser("datanodes", help="list datanodes: state, space, blocks, copy work")
    actions.add_parser(
        "namenodes", help="each configured namenode: active (its term, since when) or standby"
    )
    for action, text in [
        ("decommission", "copy a datanode's replicas elsewhere and take no new data on it"),
        ("recommission", "undo a decommission"),
        ("remove", "forget a dead or decommissioned datanode"),
    ]:
        q = actions.add_parser(action, help=text)
        q.add_argument("datanode_id", metavar="ID")
    q = actions.add_parser(
        "balance",
        help="move replicas from fuller to emptier datanodes until every one is within "
        "the threshold of the mean (the namenode runs it; this shows its progress)",
    )
    q.add_argument(
        "--threshold", default="10", metavar="PCT",
        help="percent of capacity a datanode's use may differ from the mean (default 10)",
    )  # fmt: skip
    q.add_argument(
        "--bandwidth", default="0", metavar="RATE",
        help="bytes/s all moves together, e.g. 100M (default 0: unlimited)",
    )  # fmt: skip
    q.add_argument("--status", action="store_true", help="only show how a run stands")
    q.add_argument("--stop", action="store_true", help="end the run")
    q.add_argument("--no-wait", action="store_true", help="start the run and return (it goes on)")
    q = actions.add_parser(
        "dump", help="write the namespace and accounts, one consistent snapshot, to FILE"
    )
    q.add_argument("file", metavar="FILE|-")
    q = actions.add_parser(
        "load", help="load a dump into this cluster, whose namespace must be empty"
    )
    q.add_argument("file", metavar="FILE|-")
    _account_parsers(actions)
    quota_commands.add_parsers(actions)
    certificates.add_parsers(actions)
    sub.add_parser("whoami", help="the user this credential acts as: name, uid, groups")
    p = sub.add_parser("local", help="a local cluster under PFS_HOME (default ~/.plasmafs)")
    p.add_argument(
        "action",
        choices=["up", "down", "status", "stop-datanode", "start-datanode", "add-datanode"],
    )
    p.add_argument("number", nargs="?", metavar="N", help="datanode (stop-/start-datanode; 1..)")
    p.add_argument("--datanodes", type=int, help="datanodes to run (up; default 2)")
    p.add_argument(
        "--racks",
        type=int,
        help="spread the datanodes over R racks, round robin (up; default 1)",
    )
    p.add_argument(
        "--location",
        help="the new datanode's rack or zone (add-datanode; default: the next rack)",
    )
    p.add_argument(
        "--namenodes",
        type=int,
        help="namenodes to run, the first active, the others standbys (up; default 1)",
    )
    p.add_argument("--capacity", help="volume size per datanode (up, first time; default 2G)")
    p.add_argument("--blocksize", help="cluster blocksize (up, first time; default 1M)")
    _mount_parsers(sub)
    _gateway_parsers(sub)
    _tree_parsers(sub)
    xattr_commands.add_parsers(sub)
    snapshot_commands.add_parsers(sub)
    return parser


def _tree_parsers(sub: Any) -> None:
    """The commands over whole subtrees: du, count, find, cp."""
    p = sub.add_parser(
        "du",
        add_help=False,
        help="SIZE SPACE PATH: bytes and space with replication of each directory below "
        "PATHs (of PATHs alone with -s)",
    )
    p.add_argument("--help", action="help", help="show this help message and exit")
    p.add_argument("-s", dest="summarize", action="store_true", help="one line per path")
    p.add_argument("-h", dest="human", action="store_true", help="sizes as 1.5 GiB")
    p.add_argument("paths", nargs="*", metavar="PATH")
    p = sub.add_parser(
        "count",
        add_help=False,
        help="DIR_COUNT FILE_COUNT CONTENT_SIZE PATHNAME, as hdfs dfs -count "
        "(files include symbolic links)",
    )
    p.add_argument("--help", action="help", help="show this help message and exit")
    p.add_argument("-h", dest="human", action="store_true", help="sizes as 1.5 GiB")
    p.add_argument("-v", dest="header", action="store_true", help="a header line first")
    p.add_argument(
        "-q", dest="quotas", action="store_true",
        help="QUOTA REM_QUOTA SPACE_QUOTA REM_SPACE_QUOTA columns first",
    )  # fmt: skip
    p.add_argument("paths", nargs="+", metavar="PATH")
    p = sub.add_parser(
        "find", signed_values=("-size",), help="paths below PATHs that pass every test given"
    )
    p.add_argument("-name", metavar="GLOB", help="the last name matches GLOB (as fnmatch)")
    p.add_argument("-type", choices=["f", "d", "l"], help="file, directory or symbolic link")
    p.add_argument(
        "-size",
        metavar="[+-]N",
        help="files of exactly N bytes, more (+N) or less (-N); N may end in K, M, G, T",
    )
    p.add_argument("paths", nargs="*", metavar="PATH")
    p = sub.add_parser(
        "cp", help="copy files (trees with -r) inside the cluster; into DST if a directory"
    )
    p.add_argument("-r", "-R", dest="recursive", action="store_true", help="copy directories")
    p.add_argument(
        "-rep", "--replication", type=int, help="replicas of the copies (default: the source's)"
    )
    p.add_argument("paths", nargs="+", metavar="SRC... DST")


def _gateway_parsers(sub: Any) -> None:
    """`pfs gateway s3`."""
    p = sub.add_parser("gateway", help="serve the cluster over another protocol")
    kinds = p.add_subparsers(
        dest="gateway_command", required=True, metavar="PROTOCOL", parser_class=CommandParser
    )
    q = kinds.add_parser(
        "s3",
        help="an S3-compatible HTTP server (foreground; needs plasmafs[gateway]); access "
        "keys: pfs admin user s3-key NAME",
    )
    q.add_argument("--listen", metavar="HOST:PORT", help="default 127.0.0.1:7580")
    q.add_argument("--tls-cert", type=Path, metavar="PEM", help="serve HTTPS with this")
    q.add_argument("--tls-key", type=Path, metavar="PEM", help="the certificate's key")
    q.add_argument("--root", help="the directory whose subdirectories are buckets (default /)")
    q.add_argument("--region", help="the region reported (default us-east-1)")


def _mount_parsers(sub: Any) -> None:
    """`pfs mount` and `pfs umount`."""
    p = sub.add_parser("mount", help="mount plasmafs at a directory (FUSE)")
    p.add_argument("mountpoint", type=Path)
    p.add_argument(
        "-o",
        dest="mount_options",
        default="",
        metavar="OPTIONS",
        help="comma-separated: replication=N, attr_timeout=S, entry_timeout=S, "
        "negative_timeout=S, ro, allow_other, sync, no_write_behind, writeback_cache, "
        "failover_timeout=S",
    )
    p.add_argument("--foreground", action="store_true", help="stay in this process")
    p.add_argument("--log-file", type=Path, help="default: PFS_HOME/mounts/NAME.log")
    p = sub.add_parser("umount", help="unmount a plasmafs mount")
    p.add_argument("mountpoint", type=Path)


NON_ROOT_UIDS = "1-4294967295"  # what --act-for-callers grants without a range


def _account_parsers(actions: Any) -> None:
    """`pfs admin user ...` and `pfs admin group ...`."""
    user = actions.add_parser("user", help="users and their credentials (a superuser's)")
    verbs = user.add_subparsers(
        dest="user_command", required=True, metavar="ACTION", parser_class=CommandParser
    )
    q = verbs.add_parser("add", help="add a user; its first token goes to a new file")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--uid", help="default: the next free from 1000")
    q.add_argument("--gid", help="primary group, gid or name (default: one named as the user)")
    q.add_argument("--groups", help="supplementary groups: gids or names, comma-separated")
    q.add_argument("--superuser", action="store_true", help="may manage the cluster")
    _token_options(q)
    q = verbs.add_parser("set", help="change what a user may do")
    q.add_argument("name", metavar="NAME")
    rights = q.add_mutually_exclusive_group(required=True)
    rights.add_argument(
        "--act-for-callers",
        nargs="?",
        const=NON_ROOT_UIDS,
        metavar="FIRST-LAST",
        help="its mounts (-o callers) may act for these local uids "
        f"(default {NON_ROOT_UIDS}: all but root)",
    )
    rights.add_argument(
        "--no-act-for-callers", action="store_true", help="its mounts act as itself only"
    )
    q = verbs.add_parser("del", help="remove a user and its credentials (its files stay)")
    q.add_argument("name", metavar="NAME")
    q = verbs.add_parser("list", help="users and the ids of their live credentials")
    q.add_argument("--credentials", action="store_true", help="every credential, one per line")
    q = verbs.add_parser("token", help="a new credential of a user, written to a new file")
    q.add_argument("name", metavar="NAME")
    _token_options(q)
    q = verbs.add_parser("revoke", help="revoke a user's credentials, or one by its id")
    q.add_argument("name", nargs="?", metavar="NAME", help="every credential of this user")
    q.add_argument("--credential", metavar="ID", help="this credential only")
    q = verbs.add_parser(
        "s3-key", help="a new S3 access key pair of a user (for the S3 gateway), printed once"
    )
    q.add_argument("name", metavar="NAME")
    q = verbs.add_parser("s3-keys", help="the S3 access keys of a user, or of everyone")
    q.add_argument("name", nargs="?", default="", metavar="NAME")
    q = verbs.add_parser("s3-revoke", help="revoke an S3 access key")
    q.add_argument("access_key_id", metavar="ACCESS_KEY_ID")
    group = actions.add_parser("group", help="groups of users (a superuser's)")
    verbs = group.add_subparsers(
        dest="group_command", required=True, metavar="ACTION", parser_class=CommandParser
    )
    q = verbs.add_parser("add", help="add a group")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--gid", help="default: the first free from 1000")
    q.add_argument("--members", help="user names, comma-separated")
    q = verbs.add_parser("del", help="remove a group (not a user's primary group)")
    q.add_argument("name", metavar="NAME")
    verbs.add_parser("list", help="groups and their members")


def _token_options(parser: argparse.ArgumentParser) -> None:
    # Not dest=token_file: that is the top-level option naming the caller's own token.
    parser.add_argument(
        "--token-file",
        dest="new_token_file",
        type=Path,
        required=True,
        metavar="PATH",
        help="where the new token goes (mode 0600; must not exist)",
    )
    parser.add_argument("--label", default="", help="what the credential is for")
    parser.add_argument(
        "--expires", metavar="D", help="lifetime: 90m, 12h, 30d, 2w (default: never)"
    )


def main(argv: list[str] | None = None) -> int:
    """Run one pfs command; return the exit status."""
    open_standard_descriptors()
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed
        if not flush_stdout("") and exc.code in (0, None):
            raise SystemExit(EXIT_FAILED) from None
        raise
    status = run_command(args)
    if not flush_stdout(f"{args.command}: ") and status == 0:
        return EXIT_FAILED
    return status


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; return the exit status."""
    try:
        if args.command == "local":
            from plasmafs.cli.commands import cmd_local

            return cmd_local(args)
        if args.command == "admin" and args.admin_command in ("ca", "cert"):
            return certificates.cmd_certificates(args)
        if args.command == "gateway":
            from plasmafs.cli.gateways import cmd_gateway

            return cmd_gateway(args)
        if args.command in ("mount", "umount"):
            from plasmafs.cli.mounts import cmd_mount, cmd_umount

            return (cmd_mount if args.command == "mount" else cmd_umount)(args)
        import uvloop  # here: the client library is loaded only to run a command

        from plasmafs.cli.commands import run
        from plasmafs.core.runtime.freed_buffers import reuse_freed_buffers

        reuse_freed_buffers()  # put, get and cat move megabytes per message
        uvloop.run(run(args))
    except CommandFailed:
        return EXIT_FAILED
    except PlasmaError as exc:
        print(f"pfs: {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        discard_stdout()
        return EXIT_FAILED
    except OSError as exc:  # the local side of put/get: missing directory, permissions, disk
        if exc.filename is None and not stdout_works():
            where = "standard output: "
            discard_stdout()
        else:
            where = f"{exc.filename}: " if exc.filename else ""
        print(f"pfs: {args.command}: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
