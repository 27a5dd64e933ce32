"""The mount's memory of inodes it answered as having no extended attributes
(mount/xattr_free.py): for the attributes' lifetime only, forgotten on a change or
when the inode is answered with some, bounded in size."""

from __future__ import annotations

import time

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.mount.xattr_free import WithoutXattrs


def _attr(ino: int, has_xattrs: bool = False) -> Attr:
    return Attr(ino, FileKind.FILE, 0o644, 0, 0, 0, 0, 0, 1, 1, 65536, 1, 0, has_xattrs)


def test_known_for_the_lifetime_of_what_was_answered() -> None:
    table = WithoutXattrs(lifetime=0.2)
    table.saw(_attr(1))
    assert table.known(1) and not table.known(2)
    time.sleep(0.25)
    assert not table.known(1)
    table.saw(_attr(1))  # answered again: fresh again
    assert table.known(1)


def test_an_answer_with_attributes_or_a_change_forgets_it() -> None:
    table = WithoutXattrs(lifetime=60)
    table.saw(_attr(1))
    table.saw(_attr(1, has_xattrs=True))
    assert not table.known(1)
    table.saw(_attr(2))
    table.forget(2)
    assert not table.known(2)


def test_a_lifetime_of_zero_keeps_nothing() -> None:
    table = WithoutXattrs(lifetime=0)
    table.saw(_attr(1))
    assert not table.known(1)


def test_the_oldest_go_first_beyond_capacity() -> None:
    table = WithoutXattrs(lifetime=60, capacity=100)
    for ino in range(1, 201):
        table.saw(_attr(ino))
    table.saw(_attr(150))  # answered again: now the newest
    kept = [ino for ino in range(1, 201) if table.known(ino)]
    assert 80 <= len(kept) <= 100
    assert 200 in kept and 150 in kept and 1 not in kept
