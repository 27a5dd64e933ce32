"""The mount's process: connect, mount, serve FUSE requests until unmounted.

    python -m plasmafs.mount MOUNTPOINT [--options TEXT] [--namenode ADDR]
        [--token-file PATH] [--ready-fd N] [--log-file PATH]

`pfs mount` starts this in the background and waits on `--ready-fd` for one line:
"ok" once the file system is mounted, or the error that kept it from mounting. SIGTERM
and SIGINT unmount and exit; so does `pfs umount` (fusermount3 -u), which ends the
FUSE session. Writes not yet committed when the mount goes away are aborted: nothing
half-written becomes visible.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

import pyfuse3
import uvloop

from plasmafs.client import Client, config
from plasmafs.client.accounts import accounts
from plasmafs.core.errors import ConfigError, PlasmaError
from plasmafs.core.runtime.freed_buffers import reuse_freed_buffers
from plasmafs.core.runtime.gc_tuning import tune_for_daemon
from plasmafs.mount import request_wait
from plasmafs.mount.callers import CallerIds
from plasmafs.mount.file_locks import locks_cross_hosts
from plasmafs.mount.mountpoints import is_mounted, mounted_device
from plasmafs.mount.operations import PlasmaOperations
from plasmafs.mount.options import MountOptions

log = logging.getLogger(__name__)

MAX_TASKS = 256  # FUSE requests handled at once
# A system call on a name another transaction has locked waits, as on a local file
# system, rather than failing with EAGAIN.
LOCK_WAIT = 30.0
# While the namenode is down, each call waits this long to reconnect, then fails (EIO).
CONNECT_TIMEOUT = 3.0
# The largest read the kernel sends in one request (libfuse's 256 pages): what the
# kernel may read ahead on the mount.
READ_AHEAD = 1024 * 1024


def fuse_options(options: MountOptions, *, callers: bool = False) -> set[str]:
    """The libfuse mount options. Acting for the host's users (`callers`), every one
    may use the mount and the kernel checks their permissions as the namenode does
    (with the groups the process has now). Otherwise no default_permissions: the
    namenode decides, for the mount's plasmafs user, whoever the local caller is."""
    chosen = {"fsname=plasmafs", "subtype=pfs"}
    if options.ro:
        chosen.add("ro")
    if options.allow_other or callers:
        chosen.add("allow_other")
    if callers:
        chosen.add("default_permissions")
    return chosen


async def why_not_callers(fs: Client) -> str | None:
    """Why the mount's plasmafs user may not act for the host's users; None if it may
    (a superuser, a user granted the right, or anyone on an insecure namenode)."""
    try:
        me = await (await accounts(fs)).whoami()
    except ConfigError:  # an insecure namenode: every caller is the superuser
        return None
    if me.superuser or me.act_for_callers is not None:
        return None
    return (
        f"user {me.name} may not act for this host's users (an administrator grants it "
        f"with `pfs admin user set {me.name} --act-for-callers`): mounted for {me.name} "
        "alone"
    )


def check_mountpoint(mountpoint: Path) -> Path:
    """The mount point as an absolute path, if it is a directory this user may use."""
    path = mountpoint.expanduser().absolute()
    if is_mounted(path):
        raise ConfigError(f"{path} is already a mount point (pfs umount it first)")
    if not path.is_dir():
        raise ConfigError(f"mount point {path} is not a directory")
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise ConfigError(f"mount point {path}: permission denied")
    return path


async def widen_read_ahead(mountpoint: Path) -> None:
    """Let the kernel read ahead a whole request (READ_AHEAD) on this mount, where allowed.

    A FUSE mount's read-ahead is at most the kernel's default of 128 KiB: FUSE's INIT
    handshake can only lower it. Only its backing device's read_ahead_kb in sysfs
    raises it, which takes root, and only after INIT is done (a stat of the mount point
    waits for that; it runs in a thread, for this process answers it). A 1 MiB file
    read with cp then costs two requests instead of four.
    """
    with contextlib.suppress(OSError):
        await asyncio.to_thread(os.stat, mountpoint)
    device = mounted_device(mountpoint)
    if device is None:
        return
    setting = Path("/sys/class/bdi") / device / "read_ahead_kb"
    wanted = READ_AHEAD // 1024
    try:
        if int(setting.read_text()) < wanted:
            setting.write_text(f"{wanted}\n")
    except (OSError, ValueError) as exc:
        log.info("kernel read-ahead left as it is (%s): %s", setting, exc)


class Ready:
    """The one line `pfs mount` waits for on a descriptor: said once, then closed."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def say(self, line: str) -> None:
        """Send `line` ("ok", "ok: " and a note, or why mounting failed) unless a line
        was sent already (without a descriptor, a note goes to stderr)."""
        fd, self._fd = self._fd, None
        if fd is None:
            if line.startswith("ok: "):
                print(f"pfs: mount: {line[4:]}", file=sys.stderr)
            return
        with contextlib.suppress(OSError), os.fdopen(fd, "w") as out:
            out.write(line.replace("\n", " ") + "\n")


async def serve(mountpoint: Path, options: MountOptions, fs: Client, ready: Ready) -> None:
    """Mount `fs` at `mountpoint` and answer requests until the file system is
    unmounted or a signal asks to stop."""
    await fs.connection()  # fail before mounting when the namenode is unreachable
    refusal = await why_not_callers(fs) if options.callers else None
    callers = options.callers and refusal is None
    operations = PlasmaOperations(fs, options, CallerIds() if callers else None)
    request_wait.enable()
    pyfuse3.init(operations, str(mountpoint), fuse_options(options, callers=callers))
    operations.locks.device = mounted_device(mountpoint)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, pyfuse3.terminate)
    widening = loop.create_task(widen_read_ahead(mountpoint))
    try:
        log.info("mounted %s at %s", fs.address, mountpoint)
        notes = [refusal] if refusal is not None else []
        if not locks_cross_hosts():
            notes.append(
                "file locks hold on this host only (pyfuse3 without lock handlers: "
                "scripts/pyfuse3-with-locks builds it)"
            )
        for note in notes:
            log.warning("%s", note)
        ready.say("ok: " + "; ".join(notes) if notes else "ok")
        await pyfuse3.main(max_tasks=MAX_TASKS)
    finally:
        widening.cancel()
        await operations.close()
        pyfuse3.close(unmount=True)
        log.info("unmounted %s", mountpoint)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The daemon's command line."""
    parser = argparse.ArgumentParser(prog="python -m plasmafs.mount", description=__doc__)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("--options", "-o", default="")
    parser.add_argument("--namenode")
    parser.add_argument("--token-file", type=Path)
    parser.add_argument("--ready-fd", type=int)
    parser.add_argument("--log-file", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run a mount in this process; the exit status."""
    args = parse_args(argv)
    logging.basicConfig(
        filename=args.log_file,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    ready = Ready(args.ready_fd)
    try:
        options = MountOptions.parse(args.options)
        mountpoint = check_mountpoint(args.mountpoint)
        fs = Client(
            config.namenode_address(args.namenode),
            token_file=args.token_file,
            lock_wait=LOCK_WAIT,
            connect_timeout=CONNECT_TIMEOUT,
            durable_commits=options.sync,
            failover_timeout=options.failover_timeout,
        )
        tune_for_daemon()
        reuse_freed_buffers()  # data moves in buffers of 1-2 MiB (writes, read-ahead)
        uvloop.run(_serve_and_close(mountpoint, options, fs, ready))
    except (PlasmaError, RuntimeError, OSError) as exc:
        # RuntimeError: libfuse could not mount (no /dev/fuse, no fusermount3, ...).
        log.error("mount failed: %s", exc)
        ready.say(str(exc))
        print(f"pfs: mount: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve_and_close(
    mountpoint: Path, options: MountOptions, fs: Client, ready: Ready
) -> None:
    try:
        await serve(mountpoint, options, fs, ready)
    finally:
        await fs.close()
