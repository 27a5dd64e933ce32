"""The permission rules, case by case: owner, group and other bits, the superuser,
sticky directories, setgid inheritance, chmod, chown and chgrp, setting times."""

from __future__ import annotations

import builtins

import pytest

from plasmafs.core.errors import OperationNotPermittedError, PermissionError
from plasmafs.namenode import permissions as p
from plasmafs.namenode.permissions import Identity, R, W, X
from plasmafs.namenode.principals import SUPERUSER, Principal

STAFF = 100
OTHER_GROUP = 200
ALICE = Identity(1001, 1001, frozenset({1001, STAFF}))
BOB = Identity(1002, 1002, frozenset({1002, STAFF}))
CAROL = Identity(1003, 1003, frozenset({1003}))
DAVE = Identity(1004, OTHER_GROUP, frozenset())  # a primary group it does not list
ROOT = SUPERUSER
A, B, C = ALICE.uid, BOB.uid, CAROL.uid

EACCES, EPERM = PermissionError, OperationNotPermittedError


_NAMES: dict[object, str] = {
    ALICE: "alice",
    BOB: "bob",
    CAROL: "carol",
    DAVE: "dave",
    ROOT: "root",
    A: "alice",
    B: "bob",
    C: "carol",
    STAFF: "staff",
    OTHER_GROUP: "other",
}


def _name(value: object) -> str:
    """Test ids that read like the table: callers and ids by name, modes in octal."""
    if isinstance(value, tuple):
        return ",".join(_name(v) for v in value)
    if type(value) is int and value not in _NAMES:
        return oct(value) if value > 7 else str(value)
    return _NAMES.get(value) or str(getattr(value, "__name__", value))


@pytest.mark.parametrize(
    ("caller", "mode", "uid", "gid", "want", "granted"),
    [
        (ALICE, 0o600, A, A, R, True),  # the owner's bits
        (ALICE, 0o600, A, A, W, True),
        (ALICE, 0o600, A, A, X, False),
        (ALICE, 0o600, A, A, R | W, True),
        (ALICE, 0o400, A, A, R | W, False),  # every wanted bit, not any
        (ALICE, 0o077, A, STAFF, R, False),  # the owner gets the owner's bits only
        (BOB, 0o640, A, STAFF, R, True),  # a member gets the group's bits
        (BOB, 0o640, A, STAFF, W, False),
        (BOB, 0o604, A, STAFF, R, False),  # ... only, even if others get more
        (BOB, 0o070, A, STAFF, R | W | X, True),  # a supplementary group counts
        (DAVE, 0o070, A, OTHER_GROUP, R, True),  # so does an unlisted primary group
        (CAROL, 0o604, A, STAFF, R, True),  # everyone else gets the others' bits
        (CAROL, 0o640, A, STAFF, R, False),
        (CAROL, 0o755, A, STAFF, X, True),
        (CAROL, 0o750, A, STAFF, X, False),
        (CAROL, 0o7000, A, STAFF, R, False),  # setuid, setgid and sticky grant nothing
        (CAROL, 0o000, A, STAFF, 0, True),  # nothing wanted
        (ROOT, 0o000, A, STAFF, R | W, True),  # the superuser passes
        (ROOT, 0o000, A, STAFF, X, True),  # search of a 0o000 directory too
        (ROOT, 0o644, A, STAFF, X, True),  # and X on a file (plasmafs executes nothing)
    ],
    ids=_name,
)
def test_may(caller: p.Caller, mode: int, uid: int, gid: int, want: int, granted: bool) -> None:
    assert p.may(caller, mode, uid, gid, want) is granted


def test_a_refusal_names_the_path_and_what_was_needed() -> None:
    p.check_search(ALICE, 0o700, A, A, "/alice")
    with pytest.raises(PermissionError, match=r"^/alice: permission denied \(needs search\)$"):
        p.check_search(CAROL, 0o700, A, A, "/alice")
    with pytest.raises(builtins.PermissionError, match="needs read and write"):
        p.check_access(CAROL, 0o644, A, A, R | W, "/alice/f")


@pytest.mark.parametrize(
    ("caller", "parent_mode", "allowed"),
    [
        (BOB, 0o770, True),
        (BOB, 0o730, True),  # W and X suffice, R is not needed
        (BOB, 0o750, False),  # no W
        (BOB, 0o760, False),  # no X
        (CAROL, 0o770, False),
        (ROOT, 0o500, True),
    ],
    ids=_name,
)
def test_check_create(caller: p.Caller, parent_mode: int, allowed: bool) -> None:
    if allowed:
        p.check_create(caller, parent_mode, A, STAFF, "/d/new")
    else:
        with pytest.raises(EACCES, match="/d/new"):
            p.check_create(caller, parent_mode, A, STAFF, "/d/new")


@pytest.mark.parametrize(
    ("caller", "parent_mode", "parent_uid", "entry_uid", "refusal"),
    [
        (BOB, 0o775, A, A, None),  # W and X on the parent: any entry goes
        (CAROL, 0o775, A, A, EACCES),
        (CAROL, 0o777, A, A, None),
        (ALICE, 0o500, A, A, EACCES),  # owning the directory is not enough without W
        (CAROL, 0o1777, A, A, EPERM),  # sticky: someone else's entry
        (CAROL, 0o1777, A, C, None),  # sticky: one's own entry
        (CAROL, 0o1777, C, A, None),  # sticky: one's own directory
        (BOB, 0o1775, A, B, None),
        (BOB, 0o1775, A, A, EPERM),
        (CAROL, 0o1775, A, C, EACCES),  # the bits are checked first
        (ROOT, 0o1000, A, B, None),
    ],
    ids=_name,
)
def test_check_remove(
    caller: p.Caller,
    parent_mode: int,
    parent_uid: int,
    entry_uid: int,
    refusal: type[Exception] | None,
) -> None:
    if refusal is None:
        p.check_remove(caller, parent_mode, parent_uid, STAFF, entry_uid, "/tmp/x")
    else:
        with pytest.raises(refusal, match="/tmp/x") as refused:
            p.check_remove(caller, parent_mode, parent_uid, STAFF, entry_uid, "/tmp/x")
        assert type(refused.value) is refusal


@pytest.mark.parametrize(
    ("caller", "uid", "gid", "new_mode", "result"),
    [
        (ALICE, A, A, 0o644, 0o644),
        (ALICE, A, A, 0o1777, 0o1777),
        (ALICE, A, STAFF, 0o2755, 0o2755),  # setgid of a group she is in
        (ALICE, A, OTHER_GROUP, 0o2755, 0o755),  # of a group she is not in: dropped
        (ALICE, A, OTHER_GROUP, 0o4755, 0o4755),  # setuid is hers to set
        (DAVE, C, OTHER_GROUP, 0o644, EPERM),
        (BOB, A, STAFF, 0o666, EPERM),  # a member of the group is not the owner
        (CAROL, A, A, 0o777, EPERM),
        (ROOT, A, A, 0o4755, 0o4755),
        (ROOT, A, OTHER_GROUP, 0o2755, 0o2755),
    ],
    ids=_name,
)
def test_check_chmod(
    caller: p.Caller, uid: int, gid: int, new_mode: int, result: int | type[Exception]
) -> None:
    if isinstance(result, int):
        assert p.check_chmod(caller, uid, gid, new_mode, "/f") == result
    else:
        with pytest.raises(result, match=r"^/f: only the owner"):
            p.check_chmod(caller, uid, gid, new_mode, "/f")


@pytest.mark.parametrize(
    ("caller", "uid", "gid", "new_uid", "new_gid", "result"),
    [
        (ROOT, A, A, B, None, (B, A)),  # only the superuser gives a file away
        (ROOT, A, A, None, OTHER_GROUP, (A, OTHER_GROUP)),
        (ALICE, A, A, B, None, EPERM),
        (ALICE, A, A, A, None, (A, A)),  # her own uid again: nothing changes
        (ALICE, A, A, None, STAFF, (A, STAFF)),  # chgrp to a group she is in
        (ALICE, A, A, A, STAFF, (A, STAFF)),
        (ALICE, A, A, None, OTHER_GROUP, EPERM),  # to a group she is not in
        (ALICE, A, OTHER_GROUP, None, OTHER_GROUP, (A, OTHER_GROUP)),  # the same group
        (ALICE, A, A, None, None, (A, A)),
        (BOB, A, A, None, STAFF, EPERM),  # bob is in staff, but the file is alice's
        (BOB, A, A, A, None, EPERM),
    ],
    ids=_name,
)
def test_check_chown(
    caller: p.Caller,
    uid: int,
    gid: int,
    new_uid: int | None,
    new_gid: int | None,
    result: tuple[int, int] | type[Exception],
) -> None:
    if isinstance(result, tuple):
        assert p.check_chown(caller, uid, gid, new_uid, new_gid, "/f") == result
    else:
        with pytest.raises(result, match=r"^/f: "):
            p.check_chown(caller, uid, gid, new_uid, new_gid, "/f")


@pytest.mark.parametrize(
    ("caller", "parent_mode", "is_dir", "mode", "owner"),
    [
        (ALICE, 0o755, False, 0o644, (A, A, 0o644)),  # the creator's uid and gid
        (BOB, 0o775, True, 0o755, (B, B, 0o755)),  # the parent's group only if setgid
        (ALICE, 0o755, True, 0o2755, (A, A, 0o2755)),  # setgid of her own group, kept
        (ALICE, 0o2775, False, 0o644, (A, STAFF, 0o644)),  # a setgid parent's group
        (ALICE, 0o2775, True, 0o755, (A, STAFF, 0o2755)),  # a directory inherits setgid
        (ALICE, 0o2775, False, 0o2755, (A, STAFF, 0o2755)),  # her group: setgid kept
        (CAROL, 0o2777, False, 0o2755, (C, STAFF, 0o755)),  # not her group: dropped
        (CAROL, 0o2777, True, 0o700, (C, STAFF, 0o2700)),
        (ROOT, 0o2775, False, 0o2755, (0, STAFF, 0o2755)),
    ],
    ids=_name,
)
def test_new_owner(
    caller: p.Caller, parent_mode: int, is_dir: bool, mode: int, owner: tuple[int, int, int]
) -> None:
    assert p.new_owner(caller, parent_mode, STAFF, is_dir, mode) == owner


@pytest.mark.parametrize(
    ("caller", "mode", "now", "refusal"),
    [
        (ALICE, 0o444, False, None),  # the owner sets any time
        (BOB, 0o664, True, None),  # "now" needs W only
        (BOB, 0o664, False, EPERM),  # another time needs ownership
        (CAROL, 0o664, True, EACCES),
        (CAROL, 0o666, True, None),
        (ROOT, 0o000, False, None),
    ],
    ids=_name,
)
def test_check_set_times(
    caller: p.Caller, mode: int, now: bool, refusal: type[Exception] | None
) -> None:
    if refusal is None:
        p.check_set_times(caller, mode, A, STAFF, "/f", now=now)
    else:
        with pytest.raises(refusal, match="/f") as refused:
            p.check_set_times(caller, mode, A, STAFF, "/f", now=now)
        assert type(refused.value) is refusal


def test_a_principal_is_a_caller() -> None:
    alice = Principal("alice", A, A, frozenset({A, STAFF}), False, 7, None)
    assert p.may(alice, 0o040, B, STAFF, R)
    assert not p.may(alice, 0o604, B, STAFF, R)
    assert SUPERUSER.superuser and SUPERUSER.uid == 0
