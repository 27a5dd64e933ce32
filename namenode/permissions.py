"""Who may do what to an inode: the POSIX permission rules as pure functions.

Every function takes the caller (anything with uid, gid, groups and superuser: a
`principals.Principal`, `principals.SUPERUSER` for the namenode's own work) and the plain
numbers of the inodes concerned (`Attr.mode`, which holds the permission bits only,
`Attr.uid`, `Attr.gid`). Nothing here does I/O; the namespace calls these at the top of
each operation, before it changes anything.

The bits a caller gets are the owner's if it owns the inode, else the group's if it is
in the inode's group, else the others'. A refusal by the bits is PermissionError
(EACCES); a change only the owner or the superuser may make is
OperationNotPermittedError (EPERM).

The superuser passes every check. POSIX makes one exception, executing a file with no
x bit at all; plasmafs executes nothing, so X is only ever asked of directories (search),
where the superuser passes under POSIX as well.

Operations made of several checks:
- create, mkdir, symlink: `check_create` on the parent, then `new_owner`.
- unlink, rmdir: `check_remove`.
- rename: `check_remove` of the moved entry from its parent; at the target,
  `check_remove` of the replaced entry if there is one, else `check_create`; and a
  directory that changes parent needs W on itself (its ".." changes):
  `check_access(..., W, ...)`.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from typing import Protocol

from plasmafs.core.errors import OperationNotPermittedError, PermissionError

R, W, X = 4, 2, 1  # the bits of `want`, as in one rwx triple

_NEEDS = ((R, "read"), (W, "write"), (X, "search"))


class Caller(Protocol):
    """Whoever asks. `groups` holds the groups it is in; `gid`, its primary group,
    counts whether or not it is listed."""

    @property
    def uid(self) -> int: ...

    @property
    def gid(self) -> int: ...

    @property
    def groups(self) -> frozenset[int]: ...

    @property
    def superuser(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Identity:
    """A caller by its ids alone (tests)."""

    uid: int
    gid: int
    groups: frozenset[int]
    superuser: bool = False


def in_group(caller: Caller, gid: int) -> bool:
    """True if the caller is in group `gid`."""
    return gid == caller.gid or gid in caller.groups


def may(caller: Caller, mode: int, uid: int, gid: int, want: int) -> bool:
    """True if the caller gets every bit of `want` (R|W|X) on an inode with these
    permission bits, owner and group."""
    if caller.superuser:
        return True
    if caller.uid == uid:
        granted = mode >> 6
    elif in_group(caller, gid):
        granted = mode >> 3
    else:
        granted = mode
    return granted & want == want


def check_access(caller: Caller, mode: int, uid: int, gid: int, want: int, what: str) -> None:
    """PermissionError naming `what` (a path or an inode) unless `may(...)`."""
    if not may(caller, mode, uid, gid, want):
        needs = " and ".join(name for bit, name in _NEEDS if want & bit)
        raise PermissionError(f"{what}: permission denied (needs {needs})")


def check_search(caller: Caller, mode: int, uid: int, gid: int, path: str) -> None:
    """PermissionError unless the caller may look up names in directory `path`."""
    check_access(caller, mode, uid, gid, X, path)


def check_create(
    caller: Caller, parent_mode: int, parent_uid: int, parent_gid: int, what: str
) -> None:
    """PermissionError unless the caller may add the entry `what` to its parent
    directory (W and X on it)."""
    check_access(caller, parent_mode, parent_uid, parent_gid, W | X, what)


def check_remove(
    caller: Caller,
    parent_mode: int,
    parent_uid: int,
    parent_gid: int,
    entry_uid: int,
    what: str,
) -> None:
    """PermissionError unless the caller may remove the entry `what` from its parent
    directory (W and X on it); in a sticky directory, OperationNotPermittedError unless
    it also owns the entry or the directory."""
    check_access(caller, parent_mode, parent_uid, parent_gid, W | X, what)
    sticky = parent_mode & stat.S_ISVTX
    if sticky and not caller.superuser and caller.uid not in (entry_uid, parent_uid):
        raise OperationNotPermittedError(
            f"{what}: the directory is sticky: only the entry's owner or its own may remove it"
        )


def check_chmod(caller: Caller, uid: int, gid: int, new_mode: int, what: str) -> int:
    """The mode a chmod to `new_mode` sets, or OperationNotPermittedError unless the
    caller owns the inode. A caller not in the inode's group cannot set its S_ISGID:
    the bit is dropped, as Linux does."""
    if caller.superuser:
        return new_mode
    if caller.uid != uid:
        raise OperationNotPermittedError(f"{what}: only the owner may change the mode")
    if new_mode & stat.S_ISGID and not in_group(caller, gid):
        return new_mode & ~stat.S_ISGID
    return new_mode


def check_chown(
    caller: Caller,
    uid: int,
    gid: int,
    new_uid: int | None,
    new_gid: int | None,
    what: str,
) -> tuple[int, int]:
    """The owner and group a chown sets (None keeps one), or OperationNotPermittedError.
    Only the superuser gives an inode away; the owner may set the uid it already has and
    a group it is in (or the current one)."""
    to_uid = uid if new_uid is None else new_uid
    to_gid = gid if new_gid is None else new_gid
    if caller.superuser or (new_uid is None and new_gid is None):
        return to_uid, to_gid
    if to_uid != uid:
        raise OperationNotPermittedError(f"{what}: only the superuser may change the owner")
    if caller.uid != uid:
        raise OperationNotPermittedError(f"{what}: only the owner may change owner or group")
    if to_gid != gid and not in_group(caller, to_gid):
        raise OperationNotPermittedError(f"{what}: not a member of group {to_gid}")
    return to_uid, to_gid


def new_owner(
    caller: Caller, parent_mode: int, parent_gid: int, is_dir: bool, mode: int
) -> tuple[int, int, int]:
    """The uid, gid and mode of a new inode asked with `mode`. It belongs to the caller
    and the caller's group, or to the parent's group if the parent has S_ISGID. Under
    such a parent a new directory gets S_ISGID too, and a new file keeps S_ISGID only if
    its creator is in that group (the rule chmod applies)."""
    if not parent_mode & stat.S_ISGID:
        return caller.uid, caller.gid, mode
    if is_dir:
        return caller.uid, parent_gid, mode | stat.S_ISGID
    if mode & stat.S_ISGID and not caller.superuser and not in_group(caller, parent_gid):
        mode &= ~stat.S_ISGID
    return caller.uid, parent_gid, mode


def check_set_times(caller: Caller, mode: int, uid: int, gid: int, what: str, *, now: bool) -> None:
    """Refuse unless the caller may set the inode's mtime: to the current time (`now`)
    if it owns the inode or may write it (else PermissionError), to any other time only
    if it owns it (else OperationNotPermittedError).

    SetAttr says "now" with `mtime_now`, set by the namenode's clock."""
    if caller.superuser or caller.uid == uid:
        return
    if now:
        check_access(caller, mode, uid, gid, W, what)
        return
    raise OperationNotPermittedError(f"{what}: only the owner may set the times")
