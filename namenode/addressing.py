"""Where a namespace request points: a path from the root, or one name in a directory
given by its inode number.

Paths are how the library and the CLI name things. A mount knows the inode of the
directory the kernel asks about and nothing of its path, which a concurrent rename may
change anyway; so a request may name a directory inode (`dir`) and one name in it, and
the namespace starts its walk there instead of at the root. Both forms reach the same
rules: the walk from a directory inode checks search permission on every directory
above it, as a path would have.
"""

from __future__ import annotations

from dataclasses import dataclass

from plasmafs.core import paths
from plasmafs.core.errors import InvalidArgumentError
from plasmafs.namenode.inode_records import ROOT_INO


@dataclass(frozen=True, slots=True)
class Place:
    """`parts` walked from directory `start` (the root for a path; `anchored` when a
    directory inode was named); `shown` names the place in messages."""

    start: int
    parts: list[str]
    shown: str
    anchored: bool = False

    @classmethod
    def of(cls, raw: bytes, dir: int = 0) -> Place:
        """A canonical path (dir 0), or the name `raw` in directory inode `dir`."""
        if dir == 0:
            parts = paths.split_canonical(raw)
            return cls(ROOT_INO, parts, "/" + "/".join(parts))
        try:
            name = paths.check_name(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"name is not valid UTF-8: {raw[:60]!r}") from exc
        return cls(dir, [name], f"{name} (in directory inode {dir})", anchored=True)

    @classmethod
    def directory(cls, raw: bytes, dir: int = 0) -> Place:
        """A directory by its canonical path (dir 0) or by its inode number (no path)."""
        if dir == 0:
            return cls.of(raw)
        if raw:
            raise InvalidArgumentError("name a directory by its path or its inode, not both")
        return cls(dir, [], f"directory inode {dir}", anchored=True)

    def parent(self) -> Place:
        """The place of the directory holding the last component."""
        if self.anchored:
            return Place(self.start, [], f"directory inode {self.start}", anchored=True)
        return Place(ROOT_INO, self.parts[:-1], self.parent_shown)

    @property
    def parent_shown(self) -> str:
        """The directory holding the last component, for messages."""
        if self.anchored:
            return f"directory inode {self.start}"
        return "/" + "/".join(self.parts[:-1])
