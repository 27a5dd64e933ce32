"""DirectoryParents: where each directory the kernel knows is, through renames."""

from __future__ import annotations

from plasmafs.core.attributes import Attr, FileKind
from plasmafs.mount.parents import DirectoryParents


def attr(ino: int, kind: FileKind = FileKind.DIRECTORY) -> Attr:
    return Attr(ino, kind, 0o755, 0, 0, 0, 0, 0, 2, 0, 0, 1)


def test_parents_follow_lookups_renames_and_removals() -> None:
    parents = DirectoryParents()
    assert parents.of(1) == 1  # the root: its own
    parents.saw(1, "a", attr(10))
    parents.saw(1, "c", attr(12))
    parents.saw(10, "b", attr(11))
    parents.saw(10, "f", attr(13, FileKind.FILE))  # files have no ".." to answer
    assert (parents.of(10), parents.of(11), parents.of(13)) == (1, 10, 13)
    parents.renamed((10, "b"), (12, "b"), exchange=False)
    assert parents.of(11) == 12
    parents.renamed((1, "a"), (1, "c"), exchange=True)  # a and c trade places
    parents.renamed((1, "c"), (12, "x"), exchange=False)  # a (now c) moves under old c
    assert (parents.of(10), parents.of(12)) == (12, 1)
    parents.saw(1, "x", attr(14))
    parents.renamed((1, "x"), (1, "a"), exchange=False)  # over the entry at (1, "a")
    assert parents.of(14) == 1
    parents.removed(1, "a")
    parents.forget([11])
    assert (parents.of(14), parents.of(11)) == (14, 11)  # unknown now: their own
