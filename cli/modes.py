"""Modes and owners as the command line gives them: octal and symbolic modes (applied as
chmod(1) applies them) and OWNER[:GROUP] with names (the cluster's) or ASCII decimal ids."""

from __future__ import annotations

import os
import re
import stat as statmod
from collections.abc import Mapping
from dataclasses import dataclass

from plasmafs.core.errors import InvalidArgumentError
from plasmafs.core.value_checks import ALL_MODE_BITS

ALL_BITS = ALL_MODE_BITS
_WHO_BITS = {
    "u": statmod.S_ISUID | statmod.S_IRWXU,
    "g": statmod.S_ISGID | statmod.S_IRWXG,
    "o": statmod.S_ISVTX | statmod.S_IRWXO,
    "a": ALL_BITS,
}
_PERM_BITS = {
    "r": 0o444,
    "w": 0o222,
    "x": 0o111,
    "s": statmod.S_ISUID | statmod.S_ISGID,
    "t": statmod.S_ISVTX,
}
_CLASS_BITS = {"u": statmod.S_IRWXU, "g": statmod.S_IRWXG, "o": statmod.S_IRWXO}
# ASCII only: [0-7] never matches other scripts' digits, and no sign, space or "_".
_OCTAL = re.compile(r"(?:0o)?([0-7]+)")  # 0o: Python's spelling, which pfs always took
# [ugo] first: findall must not take the empty perms before a copied class.
_CLAUSE = re.compile(r"([ugoa]*)((?:[-+=](?:[ugo]|[rwxXst]*))+)")
_ACTION = re.compile(r"([-+=])([ugo]|[rwxXst]*)")
_DECIMAL = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class ModeChange:
    """One operator of a symbolic mode (`u+x` has one, `u+x-w` two), as chmod(1) keeps it."""

    op: str  # + - =
    who: int  # the bits of the classes named; 0: all of them, less the umask
    value: int  # the bits to add, remove or set (before `who` limits them)
    copy: bool  # perms copied from a class (`g=u`): `value` masks the current mode
    if_any_x: bool  # X: execute only for directories or if some execute bit is set
    mentioned: int  # bits the change names; a directory keeps unnamed set-id bits


@dataclass(frozen=True)
class Mode:
    """A mode argument: absolute (octal digits) or symbolic changes to the current mode."""

    absolute: int | None
    changes: tuple[ModeChange, ...] = ()

    def apply(self, current: int, *, directory: bool, umask: int) -> int:
        """The mode that results from `current`, as chmod(1) computes it."""
        if self.absolute is not None:
            return self.absolute
        mode = current & ALL_BITS
        for change in self.changes:
            omit = (statmod.S_ISUID | statmod.S_ISGID) & ~change.mentioned if directory else 0
            value = change.value
            if change.copy:
                value &= mode
                # The copied class's bits go to every class; `who` picks the targets.
                value = sum(bits for bits in (0o444, 0o222, 0o111) if value & bits)
            elif change.if_any_x and (mode & 0o111 or directory):
                value |= 0o111
            value &= (change.who or ~umask) & ~omit
            if change.op == "=":
                preserved = (~change.who if change.who else 0) | omit
                mode = (mode & preserved) | value
            elif change.op == "+":
                mode |= value
            else:
                mode &= ~value
        return mode & ALL_BITS


def parse_mode(text: str) -> Mode:
    """An octal mode (`755`, `0o2750`) or a symbolic one as chmod(1) takes it (`u+x`,
    `go-w`, `a=r`, `u+rwx,g-w`, `+x`, `g=u`)."""
    octal = _OCTAL.fullmatch(text)
    if octal is not None:
        mode = int(octal.group(1), 8)
        if mode > ALL_BITS:
            raise InvalidArgumentError(f"invalid mode {text!r}: octal modes go up to 7777")
        return Mode(mode)
    changes: list[ModeChange] = []
    for clause in text.split(","):
        matched = _CLAUSE.fullmatch(clause)
        if matched is None:
            raise InvalidArgumentError(
                f"invalid mode {text!r}: give octal digits (e.g. 755) "
                "or [ugoa]*[-+=][rwxXst]* clauses separated by commas (e.g. u+x,go-w)"
            )
        who = 0
        for letter in matched.group(1):
            who |= _WHO_BITS[letter]
        for op, perms in _ACTION.findall(matched.group(2)):
            changes.append(_change(op, who, perms))
    return Mode(None, tuple(changes))


def _change(op: str, who: int, perms: str) -> ModeChange:
    if perms in _CLASS_BITS:
        value = _CLASS_BITS[perms]
        return ModeChange(op, who, value, True, False, who & value if who else value)
    value = 0
    for letter in perms.replace("X", ""):
        value |= _PERM_BITS[letter]
    return ModeChange(op, who, value, False, "X" in perms, who & value if who else value)


def process_umask() -> int:
    """This process's umask (chmod(1) leaves its bits alone when no class is named)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def parse_owner(
    text: str,
    users: Mapping[str, int] | None = None,
    groups: Mapping[str, int] | None = None,
) -> tuple[int | None, int | None]:
    """OWNER, OWNER:GROUP or :GROUP, each ASCII decimal digits or a name found in `users`
    or `groups` (uids and gids by name: the namenode's, asked for only when
    `names_owner` says the argument holds a name)."""
    owner, group = _split_owner(text)
    uid = _lookup_id(owner, users or {}, "user") if owner else None
    gid = _lookup_id(group, groups or {}, "group") if group else None
    return uid, gid


def names_owner(text: str) -> bool:
    """Whether OWNER[:GROUP] names a user or group rather than giving ids only."""
    return any(part and not _DECIMAL.fullmatch(part) for part in _split_owner(text))


def _split_owner(text: str) -> tuple[str, str]:
    owner, colon, group = text.partition(":")
    if not group and (colon or not owner):
        raise InvalidArgumentError(f"invalid owner {text!r}: give OWNER, OWNER:GROUP or :GROUP")
    return owner, group


def _lookup_id(text: str, by_name: Mapping[str, int], what: str) -> int:
    # Not str.isdigit()/int(): they take other scripts' digits ("٣" would be 3).
    if _DECIMAL.fullmatch(text):
        value = int(text)
        if value > 0xFFFFFFFF:
            raise InvalidArgumentError(f"{what} id {text} is out of range")
        return value
    found = by_name.get(text)
    if found is None:
        raise InvalidArgumentError(f"unknown {what} {text!r}")
    return found
