"""How the CLI shows attributes (`ls -l` lines, `stat` blocks, `fsstat` reports) and
reads them from its arguments (modes as chmod(1) takes them, owners, groups)."""

from __future__ import annotations

import grp
import pwd
import stat as statmod
import time
from functools import lru_cache

from plasmafs.client.attributes import Attr, FileKind, FsStat


@lru_cache(maxsize=1024)
def user_name(uid: int) -> str:
    """The local name of `uid`, or the number."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@lru_cache(maxsize=1024)
def group_name(gid: int) -> str:
    """The local name of `gid`, or the number."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def mode_string(attr: Attr) -> str:
    """`drwxr-xr-x` style."""
    return statmod.filemode(attr.st_mode)


def time_string(ns: int) -> str:
    """Local time to the minute, as ls prints it."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ns / 1e9))


def long_line(name: str, attr: Attr, *, inode: bool, target: str | None = None) -> str:
    """One `ls -l` line: mode, links, replication, owner, group, size, mtime, name."""
    replication = str(attr.replication) if attr.kind is FileKind.FILE else "-"
    line = (
        f"{mode_string(attr)} {attr.nlink:>3} {replication:>2} {user_name(attr.uid):<8} "
        f"{group_name(attr.gid):<8} {attr.size:>12} {time_string(attr.mtime_ns)} {name}"
    )
    if target is not None:
        line += f" -> {target}"
    return f"{attr.ino:>10} {line}" if inode else line


def stat_block(path: str, attr: Attr) -> str:
    """The `pfs stat` report of one path."""
    kind = {
        FileKind.FILE: "regular file",
        FileKind.DIRECTORY: "directory",
        FileKind.SYMLINK: "symbolic link",
    }[attr.kind]
    return "\n".join(
        [
            f"  File: {path}",
            f"  Size: {attr.size:<12} Blocksize: {attr.blocksize:<10} {kind}",
            f" Inode: {attr.ino:<12} Links: {attr.nlink:<6} Replication: {attr.replication}",
            f"Access: ({attr.mode:04o}/{mode_string(attr)})"
            f"  Uid: ({attr.uid}/{user_name(attr.uid)})  Gid: ({attr.gid}/{group_name(attr.gid)})",
            f"Modify: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(attr.mtime_ns / 1e9))}"
            f".{attr.mtime_ns % 1_000_000_000:09d}",
            f"Change: {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(attr.ctime_ns / 1e9))}"
            f".{attr.ctime_ns % 1_000_000_000:09d}",
            f"Version: {attr.version}",
        ]
    )


def human_bytes(n: int) -> str:
    """1.5 GiB style."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"


def fsstat_report(st: FsStat) -> str:
    """The `pfs fsstat` report."""
    return aligned(
        [
            ("files", str(st.files)),
            ("directories", str(st.directories)),
            ("symlinks", str(st.symlinks)),
            ("capacity", human_bytes(st.capacity_bytes)),
            ("used", human_bytes(st.used_bytes)),
            ("held back", human_bytes(st.held_bytes)),
            ("live datanodes", str(st.live_datanodes)),
            ("blocksize", human_bytes(st.blocksize)),
            ("under-replicated blocks", str(st.under_replicated_blocks)),
            ("missing blocks", str(st.missing_blocks)),
            ("corrupt blocks", str(st.corrupt_blocks)),
        ]
    )


def aligned(rows: list[tuple[str, str]], indent: str = "") -> str:
    """`label: value` lines with the values in one column."""
    width = max(len(label) for label, _ in rows) + 2
    return "\n".join(f"{indent}{label + ':':<{width}}{value}" for label, value in rows)
