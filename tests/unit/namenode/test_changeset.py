"""A transaction's change set in process: touches fold, created inodes vanish."""

from __future__ import annotations

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.inode_records import Inode


def _dir(ino: int, mtime: int = 0, nlink: int = 2) -> Inode:
    return Inode(Attr(ino, FileKind.DIRECTORY, 0o755, 0, 0, 0, mtime, mtime, nlink, 1, 65536, 1))


def test_touches_of_a_committed_directory_merge_commutatively() -> None:
    cs = ChangeSet()
    cs.touch(1, 50, +1)
    cs.touch(1, 30, +1)
    seen = cs.overlay(_dir(1, mtime=40))
    assert (seen.attr.mtime_ns, seen.attr.nlink) == (50, 4)
    assert not cs.is_empty()


def test_a_touch_folds_into_a_replaced_row() -> None:
    cs = ChangeSet()
    cs.touch(1, 10)
    cs.put_inode(_dir(1, mtime=5))
    cs.touch(1, 20, -1)
    row = cs.inodes[1]
    assert row is not None
    assert (row.attr.mtime_ns, row.attr.nlink) == (20, 1)
    assert 1 not in cs.touches


def test_an_inode_created_and_deleted_in_one_transaction_leaves_nothing() -> None:
    cs = ChangeSet()
    cs.put_inode(_dir(9), created=True)
    cs.delete_inode(9, FileKind.DIRECTORY)
    assert 9 not in cs.inodes and 9 not in cs.created and not cs.deleted_kinds
    cs.delete_inode(4, FileKind.FILE)
    assert cs.inodes[4] is None and cs.deleted_kinds == {4: FileKind.FILE}


def test_an_overlay_is_made_again_only_when_the_touch_or_the_committed_row_changes() -> None:
    cs = ChangeSet()
    cs.touch(1, 50, +1)
    committed = _dir(1, mtime=40)
    first = cs.overlay(committed)
    assert cs.overlay(committed) is first
    cs.touch(1, 60, +1)
    assert (cs.overlay(committed).attr.mtime_ns, cs.overlay(committed).attr.nlink) == (60, 4)
    newer = _dir(1, mtime=70, nlink=5)  # another transaction's commit changed the row
    assert (cs.overlay(newer).attr.mtime_ns, cs.overlay(newer).attr.nlink) == (70, 7)
