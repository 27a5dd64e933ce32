"""How the CLI shows attributes (`ls -l` lines, `stat` blocks, `fsstat` reports, tables)
and the names of owners and groups in them."""

from __future__ import annotations

import stat as statmod
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from plasmafs.core.attributes import Attr, FileKind, FsStat


@dataclass(frozen=True)
class OwnerNames:
    """The names of uids and gids the namenode knows (not this host's: they may differ
    from the cluster's); an unknown id shows as its number."""

    users: Mapping[int, str] = field(default_factory=dict)
    groups: Mapping[int, str] = field(default_factory=dict)

    def user(self, uid: int) -> str:
        """The name of `uid`, or the number."""
        return self.users.get(uid, str(uid))

    def group(self, gid: int) -> str:
        """The name of `gid`, or the number."""
        return self.groups.get(gid, str(gid))

    def uids(self) -> dict[str, int]:
        """Users' uids by name."""
        return {name: uid for uid, name in self.users.items()}

    def gids(self) -> dict[str, int]:
        """Groups' gids by name."""
        return {name: gid for gid, name in self.groups.items()}


NUMBERS = OwnerNames()  # no names known: ids show as numbers


def mode_string(attr: Attr) -> str:
    """`drwxr-xr-x` style."""
    return statmod.filemode(attr.st_mode)


def time_string(ns: int) -> str:
    """Local time to the minute, as ls prints it."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ns / 1e9))


def long_line(
    name: str,
    attr: Attr,
    *,
    inode: bool,
    target: str | None = None,
    names: OwnerNames = NUMBERS,
) -> str:
    """One `ls -l` line: mode, links, replication, owner, group, size, mtime, name."""
    replication = str(attr.replication) if attr.kind is FileKind.FILE else "-"
    line = (
        f"{mode_string(attr)} {attr.nlink:>3} {replication:>2} {names.user(attr.uid):<8} "
        f"{names.group(attr.gid):<8} {attr.size:>12} {time_string(attr.mtime_ns)} {name}"
    )
    if target is not None:
        line += f" -> {target}"
    return f"{attr.ino:>10} {line}" if inode else line


def stat_block(path: str, attr: Attr, names: OwnerNames = NUMBERS) -> str:
    """The `pfs stat` report of one path."""
    kind = {
        FileKind.FILE: "regular file",
        FileKind.DIRECTORY: "directory",
        FileKind.SYMLINK: "symbolic link",
        FileKind.FIFO: "fifo",
        FileKind.CHAR_DEVICE: "character special file",
        FileKind.BLOCK_DEVICE: "block special file",
        FileKind.SOCKET: "socket",
    }[attr.kind]
    return "\n".join(
        [
            f"  File: {path}",
            f"  Size: {attr.size:<12} Blocksize: {attr.blocksize:<10} {kind}",
            f" Inode: {attr.ino:<12} Links: {attr.nlink:<6} Replication: {attr.replication}",
            f"Access: ({attr.mode:04o}/{mode_string(attr)})"
            f"  Uid: ({attr.uid}/{names.user(attr.uid)})"
            f"  Gid: ({attr.gid}/{names.group(attr.gid)})",
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


def fsstat_report(st: FsStat, in_trash: int | None = None) -> str:
    """The `pfs fsstat` report; `in_trash`: the space the caller's trash holds (None:
    the cluster keeps no trash)."""
    trash = [] if in_trash is None else [("in your trash", human_bytes(in_trash))]
    return aligned(
        [
            ("files", str(st.files)),
            ("directories", str(st.directories)),
            ("symlinks", str(st.symlinks)),
            ("capacity", human_bytes(st.capacity_bytes)),
            ("used", human_bytes(st.used_bytes)),
            ("held back", human_bytes(st.held_bytes)),
            *trash,
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


def table(rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> str:
    """Rows (the first is the header) in columns two spaces apart; the columns in `right`
    (numbers) right-aligned, the others left-aligned."""
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.rjust(widths[k]) if k in right else cell.ljust(widths[k])
            for k, cell in enumerate(row)
        ).rstrip()
        for row in rows
    )
