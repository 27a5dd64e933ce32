"""`pfs mount` and `pfs umount`.

`pfs mount` starts the mount's process (`python -m plasmafs.mount`, which needs the
`plasmafs[mount]` extra and the system's FUSE 3) in the background, logging to a file,
and returns once the file system is mounted or with the one line that says why not;
`--foreground` runs it in this process until it is unmounted. `pfs umount` asks
fusermount3 to unmount, which also works after the mount's process was killed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

from plasmafs.client import config
from plasmafs.core.errors import ConfigError, UnavailableError
from plasmafs.mount.mountpoints import is_mounted

READY_TIMEOUT = 60.0  # seconds `pfs mount` waits for the file system to be mounted


def cmd_mount(args: argparse.Namespace) -> int:
    """Mount in the background (or in this process with --foreground)."""
    try:
        import plasmafs.mount.process  # noqa: F401  (fails here without the extra)
    except ImportError as exc:
        raise ConfigError(
            f"pfs mount needs pyfuse3 ({exc}): pip install 'plasmafs[mount]' after "
            "installing FUSE 3 (Debian: apt-get install fuse3 libfuse3-dev pkg-config)"
        ) from None
    argv = [str(args.mountpoint), "--options", args.mount_options]
    if args.namenode:
        argv += ["--namenode", args.namenode]
    if args.token_file:
        argv += ["--token-file", str(args.token_file)]
    if args.foreground:
        from plasmafs.mount.process import main

        if args.log_file:
            argv += ["--log-file", str(args.log_file)]
        return main(argv)
    log_file = args.log_file or _default_log(args.mountpoint)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    read_end, write_end = os.pipe()
    try:
        with open(log_file, "ab") as log, open(os.devnull, "rb") as nothing:
            child = subprocess.Popen(
                [
                    *(sys.executable, "-m", "plasmafs.mount", *argv),
                    *("--ready-fd", str(write_end), "--log-file", str(log_file)),
                ],
                stdin=nothing,
                stdout=log,
                stderr=log,
                pass_fds=(write_end,),
                start_new_session=True,  # outlives this shell's job control
            )
        os.close(write_end)
        write_end = -1
        line = _ready_line(read_end, READY_TIMEOUT)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if line == "ok" or line.startswith("ok: "):
        if line != "ok":  # mounted, with something the user should know
            print(f"pfs: mount: {line[4:]}", file=sys.stderr)
        where = args.mountpoint.expanduser().absolute()
        print(f"mounted at {where} (pid {child.pid}; log {log_file})")
        return 0
    if child.poll() is None:
        child.terminate()
    raise UnavailableError(line or f"the mount did not start; see {log_file}")


def _ready_line(fd: int, timeout: float) -> str:
    """The line the mount's process sends ("" if it exited or timed out first)."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return ""
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()


def _default_log(mountpoint: Path) -> Path:
    where = str(mountpoint.expanduser().absolute())
    name = Path(where).name or "root"
    digest = hashlib.sha256(where.encode()).hexdigest()[:8]
    return config.pfs_home() / "mounts" / f"{name}-{digest}.log"


def cmd_umount(args: argparse.Namespace) -> int:
    """Unmount with fusermount3 (or umount(8) when fusermount3 is missing and we are root)."""
    path = args.mountpoint.expanduser().absolute()
    if not is_mounted(path):
        raise ConfigError(f"{path} is not a mount point")
    tool = shutil.which("fusermount3")
    command = [tool, "-u", str(path)] if tool else ["umount", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise UnavailableError(message[-1] if message else f"cannot unmount {path}")
    return 0
