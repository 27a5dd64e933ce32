"""`pfs`: the command-line client.

Every command prints one line per error (`pfs: CMD: message`) and exits non-zero if
anything failed; it goes on with the other paths where that makes sense, as
coreutils do.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop

from plasmafs.client import config, formatting, paths, transfer
from plasmafs.client.attributes import Attr, FileKind
from plasmafs.client.client import Client
from plasmafs.client.errors import (
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PlasmaError,
)
from plasmafs.client.formatting import Mode, parse_mode, parse_owner, process_umask
from plasmafs.client.heap import reuse_freed_buffers
from plasmafs.client.sizes import parse_size as _parse_size
from plasmafs.client.transaction import Transaction

EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandFailed(Exception):
    """Some paths failed; their errors were printed already."""


class Reporter:
    """Prints errors the coreutils way and remembers that one happened."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.failed = False

    def error(self, message: str) -> None:
        print(f"pfs: {self.command}: {message}", file=sys.stderr)
        self.failed = True

    async def each(self, items: list[str], action: Callable[[str], Awaitable[None]]) -> None:
        for item in items:
            try:
                await action(item)
            except PlasmaError as exc:
                self.error(str(exc))
        if self.failed:
            raise CommandFailed


# --- ls -----------------------------------------------------------------------------------


async def cmd_ls(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    targets = args.paths or ["/"]
    headers = len(targets) > 1 or args.recursive
    first = True
    for target in targets:
        try:
            path = paths.normalize(target)
            # As ls(1): with -l or -d a link is shown itself, unless a trailing slash
            # asks for the directory it leads to.
            follow = not (args.long or args.directory) or target.rstrip("/") != target
            attr = await _given_path(fs, path, follow=follow)
        except PlasmaError as exc:
            out.error(str(exc))
            continue
        if attr.kind is not FileKind.DIRECTORY or args.directory:
            await _print_entry(fs, args, path, path, attr)
            first = False
            continue
        queue = [path]
        while queue:
            directory = queue.pop(0)
            if headers:
                print(("" if first else "\n") + f"{directory}:")
            first = False
            subdirs: list[str] = []
            try:
                async for entry in fs.scandir(directory, plus=args.long or args.inode):
                    full = paths.join(directory, entry.name)
                    await _print_entry(fs, args, entry.name, full, entry.attr, entry.ino)
                    if args.recursive and entry.kind is FileKind.DIRECTORY:
                        subdirs.append(full)
            except PlasmaError as exc:
                out.error(f"{directory}: {exc}")
            queue[0:0] = subdirs
    if out.failed:
        raise CommandFailed


async def _given_path(fs: Client, path: str, *, follow: bool) -> Attr:
    """What `ls` shows for a path it was given, as ls(1) does: a symbolic link itself,
    unless `follow` and it leads to a directory (then that directory is listed). With -l
    or -d a link is shown as `name -> target`, even a dangling or looping one."""
    attr = await fs.lookup(path)
    if attr.kind is not FileKind.SYMLINK or not follow:
        return attr
    try:
        target = await fs.stat(path)
    except NotFoundError:
        return attr  # dangling: its name is listed
    return target if target.kind is FileKind.DIRECTORY else attr


async def _print_entry(
    fs: Client,
    args: argparse.Namespace,
    name: str,
    full: str,
    attr: Attr | None,
    ino: int | None = None,
) -> None:
    if args.long:
        assert attr is not None
        target = await fs.readlink(full) if attr.kind is FileKind.SYMLINK else None
        print(formatting.long_line(name, attr, inode=args.inode, target=target))
    elif args.inode:
        print(f"{(attr.ino if attr else ino):>10} {name}")
    else:
        print(name)


# --- namespace changes ------------------------------------------------------------------------


async def cmd_mkdir(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    # As mkdir(1): a symbolic mode changes a=rwx.
    mode = parse_mode(args.mode).apply(0o777, directory=True, umask=process_umask())

    async def one(path: str) -> None:
        await fs.mkdir(path, mode, parents=args.parents)

    await out.each(args.paths, one)


async def cmd_rmdir(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    await out.each(args.paths, fs.rmdir)


async def cmd_rm(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    async def one(path: str) -> None:
        try:
            attr = await fs.lookup(path)
        except NotFoundError:
            if args.force:
                return
            raise
        if attr.kind is FileKind.DIRECTORY:
            if paths.normalize(path) == "/":
                out.error("refusing to remove the root directory '/'")
                return
            if not args.recursive:
                out.error(f"{path}: is a directory (use -r)")
                return
            await remove_tree(fs, paths.normalize(path))
        else:
            await fs.unlink(path)

    await out.each(args.paths, one)


async def remove_tree(fs: Client, path: str, batch: int = 1000) -> None:
    """Remove `path` and everything below it, a transaction per batch of entries."""
    while True:
        entries, _ = await fs.readdir(path, limit=batch)
        if not entries:
            break
        for entry in entries:
            if entry.kind is FileKind.DIRECTORY:
                await remove_tree(fs, paths.join(path, entry.name), batch)
        files = [e for e in entries if e.kind is not FileKind.DIRECTORY]
        if files:
            async with fs.transaction() as t:
                results = await asyncio.gather(
                    *(t.unlink(paths.join(path, e.name)) for e in files), return_exceptions=True
                )
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, NotFoundError):
                    raise result
    await fs.rmdir(path)


async def cmd_mv(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    *sources, dest = args.paths
    dest = paths.normalize(dest)
    try:
        dest_attr: Attr | None = await fs.stat(dest)
    except NotFoundError:
        dest_attr = None
    into_dir = dest_attr is not None and dest_attr.kind is FileKind.DIRECTORY
    if len(sources) > 1 and not into_dir:
        raise_usage(f"target {dest} is not a directory")

    async def one(src: str) -> None:
        src = paths.normalize(src)
        target = paths.join(dest, paths.parent_and_name(src)[1]) if into_dir else dest
        await fs.rename(src, target)

    await out.each(sources, one)


async def cmd_touch(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    async def one(path: str) -> None:
        await fs.touch(path)

    await out.each(args.paths, one)


async def cmd_symlink(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    async def one(path: str) -> None:
        await fs.symlink(path, args.target)

    await out.each([args.path], one)


async def cmd_readlink(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    async def one(path: str) -> None:
        print(await fs.readlink(path))

    await out.each(args.paths, one)


async def cmd_chmod(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    mode = parse_mode(args.mode)
    umask = process_umask()

    async def one(path: str) -> None:
        if mode.absolute is not None:
            await fs.chmod(path, mode.absolute)
        else:
            await fs.run(lambda t: change_mode(t, path, mode, umask))

    await out.each(args.paths, one)


async def change_mode(t: Transaction, path: str, mode: Mode, umask: int) -> None:
    """Apply a symbolic mode to the current mode of `path` (symbolic links followed)."""
    attr = await t.stat(path)
    new = mode.apply(attr.mode, directory=attr.kind is FileKind.DIRECTORY, umask=umask)
    changed = await t.setattr(attr.ino, mode=new)
    # The stat read committed state before the inode was locked: a change committed
    # in between would be overwritten. Its version says; Client.run tries again.
    if changed.version != attr.version + 1:
        raise ConflictError(f"{path} changed while its mode was being changed")


async def cmd_chown(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    uid, gid = parse_owner(args.owner)

    async def one(path: str) -> None:
        await fs.chown(path, uid, gid)

    await out.each(args.paths, one)


async def cmd_stat(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    async def one(path: str) -> None:
        print(formatting.stat_block(paths.normalize(path), await fs.lookup(path)))

    await out.each(args.paths, one)


async def cmd_put(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    if args.replication is not None and args.replication < 1:
        raise InvalidArgumentError(f"replication must be at least 1, not {args.replication}")
    dest = paths.normalize(args.remote)
    try:
        into_dir = (await fs.stat(dest)).kind is FileKind.DIRECTORY
    except NotFoundError:
        into_dir = False
    if not into_dir and (len(args.local) > 1 or args.remote.endswith("/")):
        raise_usage(f"target {args.remote} is not a directory")

    async def one(local: str) -> None:
        if local == "-" and into_dir:
            raise InvalidArgumentError(
                f"-: standard input has no name to put into directory {dest}; give a file path"
            )
        if local != "-" and not os.path.isfile(local):
            raise InvalidArgumentError(f"{local}: not a readable local file")
        # As cp and `hdfs dfs -put`: into a directory under the local file's name.
        remote = paths.join(dest, os.path.basename(local)) if into_dir else dest
        await transfer.put(fs, local, remote, args.replication or 0)

    await out.each(args.local, one)


async def cmd_get(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    await transfer.get(fs, args.remote, args.local)


async def cmd_cat(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    async def one(path: str) -> None:
        await transfer.cat(fs, path)

    await out.each(args.paths, one)


async def cmd_blocks(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    reports: list[str] = []

    async def one(pattern: str) -> None:
        reports.extend(await transfer.blocks(fs, pattern))

    try:
        await out.each(args.patterns, one)
    finally:
        if reports:
            print("\n\n".join(reports))


async def cmd_fsstat(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    print(formatting.fsstat_report(await fs.fsstat()))


# --- argument helpers ---------------------------------------------------------------------


def raise_usage(message: str) -> None:
    raise InvalidArgumentError(message)


def parse_size(text: str) -> int:
    """Bytes from 123, 64K, 1M, 8G."""
    try:
        return _parse_size(text)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None


# --- local cluster ------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace) -> int:
    # Imported here: the local cluster's machinery would slow every other command's start.
    from plasmafs.client.local import cluster

    home = config.pfs_home()
    if args.action == "up":
        if args.datanodes is not None and args.datanodes < 0:
            raise InvalidArgumentError("--datanodes must be >= 0")
        state, started = cluster.up(
            home,
            args.datanodes,
            parse_size(args.capacity) if args.capacity else None,
            parse_size(args.blocksize) if args.blocksize else None,
        )
        verb = "started" if started else "already running"
        print(f"local cluster {verb} in {home}")
        print(f"  namenode:   {state.namenode_address} (pid {state.namenode_pid})")
        for k, d in enumerate(state.datanodes, start=1):
            print(f"  datanode {k}: {d['address']} (pid {d['pid']}, {d['dir']})")
        if state.metrics_address:
            print(f"  metrics:    http://{state.metrics_address}/metrics")
        where = f"embedded, {home / 'postgres'}" if state.embedded_postgres else "external"
        print(f"  postgresql: {where}")
        print(
            f"  client config: {home / config.CLIENT_CONFIG} (pfs commands in this PFS_HOME use it)"
        )
    elif args.action == "down":
        stopped = cluster.down(home)
        print("stopped: " + ", ".join(stopped) if stopped else "nothing was running")
    else:
        report = cluster.status(home)
        for name, line in report.items():
            print(f"{name + ':':<12} {line}")
        if any("NOT" in line or "not started" in line for line in report.values()):
            return EXIT_FAILED
    return 0


# --- entry point --------------------------------------------------------------------------

COMMANDS: dict[str, Callable[[Client, argparse.Namespace, Reporter], Awaitable[None]]] = {
    "ls": cmd_ls,
    "mkdir": cmd_mkdir,
    "rmdir": cmd_rmdir,
    "rm": cmd_rm,
    "mv": cmd_mv,
    "touch": cmd_touch,
    "symlink": cmd_symlink,
    "readlink": cmd_readlink,
    "chmod": cmd_chmod,
    "chown": cmd_chown,
    "stat": cmd_stat,
    "fsstat": cmd_fsstat,
    "put": cmd_put,
    "get": cmd_get,
    "cat": cmd_cat,
    "blocks": cmd_blocks,
}


class CommandParser(argparse.ArgumentParser):
    """A command's parser. With `leading_mode`, a first argument such as `-w` or
    `-x,o+r` is the mode, as chmod(1) reads `chmod -w FILE`, not an unknown option."""

    def __init__(self, *args: Any, leading_mode: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.leading_mode = leading_mode

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As ArgumentParser's, after marking a leading mode as positional."""
        if self.leading_mode and args and _looks_like_mode(args[0]):
            args = ["--", *args]
        return super().parse_known_args(args, namespace)


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
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("mv", help="rename or move into a directory")
    p.add_argument("paths", nargs="+", metavar="SRC... DST")
    p = sub.add_parser("touch", help="create empty files or update mtime")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("symlink", help="create a symbolic link PATH -> TARGET")
    p.add_argument("target")
    p.add_argument("path")
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
    p = sub.add_parser("local", help="a local cluster under PFS_HOME (default ~/.plasmafs)")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--datanodes", type=int, help="datanodes to run (up; default 2)")
    p.add_argument("--capacity", help="volume size per datanode (up, first time; default 2G)")
    p.add_argument("--blocksize", help="cluster blocksize (up, first time; default 1M)")
    return parser


async def _run(args: argparse.Namespace) -> None:
    if args.command == "mv" and len(args.paths) < 2:
        raise InvalidArgumentError("mv needs a source and a destination")
    fs = Client(
        config.namenode_address(args.namenode), local_reads=False if args.no_local_reads else None
    )
    try:
        await fs.connection()
        await COMMANDS[args.command](fs, args, Reporter(args.command))
    finally:
        await fs.close()


def open_standard_descriptors() -> None:
    """Give a closed stdin, stdout or stderr a stand-in before anything opens a descriptor.

    Otherwise the event loop's own descriptors land on 0-2, and libuv aborts the
    process when it closes one of them. The stand-ins keep the streams closed in
    effect: stdout is /dev/null opened for reading, so writing to it fails (EBADF) as
    writing to a closed stdout does; stdin is opened for writing, so reading it fails;
    a closed stderr swallows the error messages, the exit status still tells.
    """
    for fd, flags in ((0, os.O_WRONLY), (1, os.O_RDONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            stand_in = os.open(os.devnull, flags)
            if stand_in != fd:
                os.dup2(stand_in, fd)
                os.close(stand_in)
    # Python left these None; print() to a None stdout would drop the output silently
    # and an error printed to a None stderr would go to stdout. stdin stays None: `put -`
    # says that it is closed.
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    if sys.stderr is None:
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def flush_stdout(command: str) -> bool:
    """Flush what is left for stdout; on failure say so (except for a closed pipe, which
    ends output the usual way) and drop it, so that the interpreter's own flush at exit
    does not fail again. Returns True if everything was written."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError):
            print(f"pfs: {command}standard output: {exc.strerror or exc}", file=sys.stderr)
        discard_stdout()
        return False
    return True


def discard_stdout() -> None:
    """Point descriptor 1 at /dev/null: output still buffered goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


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
            return cmd_local(args)
        reuse_freed_buffers()  # put, get and cat move megabytes per message
        uvloop.run(_run(args))
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


def stdout_works() -> bool:
    """False if stdout is closed (its stand-in is open for reading only) or cannot take
    what is buffered for it: then a write error without a file name was stdout's."""
    try:
        if fcntl.fcntl(1, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            return False
        sys.stdout.flush()
    except OSError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
