"""Who may read, list and change which extended attributes: Linux's rules (fs/xattr.c's
xattr_permission and commoncap's security checks), over plasmafs's callers.

- `user.`: on regular files and directories only (elsewhere reads find nothing and
  changes are refused); read with read permission, changed with write permission; in a
  sticky directory only its owner (or the superuser) changes them.
- `trusted.`: the superuser's alone; others neither see nor read them.
- `security.`: read by anyone who may reach the file, changed by the superuser.
"""

from __future__ import annotations

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.core.errors import NoDataError, OperationNotPermittedError
from plasmafs.core.xattrs import XattrSpace
from plasmafs.namenode.permissions import Caller, R, W, check_access

_STICKY = 0o1000


def check_read(who: Caller, a: Attr, space: XattrSpace, name: bytes, what: str) -> None:
    """Raise unless the caller may read attribute `name` (of namespace `space`) of `a`:
    ENODATA where Linux pretends there is none, EACCES without read permission."""
    if space is XattrSpace.TRUSTED:
        if not who.superuser:
            raise NoDataError(f"no attribute {name!r} on {what}")
        return
    if space is XattrSpace.USER:
        if a.kind not in (FileKind.FILE, FileKind.DIRECTORY):
            raise NoDataError(f"no attribute {name!r} on {what}")
        check_access(who, a.mode, a.uid, a.gid, R, what)


def check_change(who: Caller, a: Attr, space: XattrSpace, name: bytes, what: str) -> None:
    """Raise unless the caller may set or remove attribute `name` of `a`: EPERM where
    the namespace or the file does not allow it, EACCES without write permission."""
    if space is not XattrSpace.USER:
        if not who.superuser:
            raise OperationNotPermittedError(
                f"only the superuser changes {space.value.decode()} attributes ({what})"
            )
        return
    if a.kind not in (FileKind.FILE, FileKind.DIRECTORY):
        raise OperationNotPermittedError(f"user attributes are for files and directories: {what}")
    if a.kind is FileKind.DIRECTORY and a.mode & _STICKY and not _owner(who, a):
        raise OperationNotPermittedError(
            f"only the owner changes user attributes of sticky directory {what}"
        )
    check_access(who, a.mode, a.uid, a.gid, W, what)


def visible(who: Caller, a: Attr, name: bytes) -> bool:
    """Whether a listing of `a`'s attributes shows `name` to the caller."""
    if name.startswith(XattrSpace.TRUSTED.value):
        return who.superuser
    if name.startswith(XattrSpace.USER.value):
        return a.kind in (FileKind.FILE, FileKind.DIRECTORY)
    return True


def _owner(who: Caller, a: Attr) -> bool:
    return who.superuser or who.uid == a.uid
