"""One page of a directory as a transaction sees it: committed entries read from
PostgreSQL a page at a time (keyset paging on the name, so listing is stable under
concurrent changes and never holds the directory in memory), merged with the
transaction's own added, removed and replaced entries."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from plasmafs.namenode.changeset import ChangeSet
from plasmafs.namenode.inode_records import Inode
from plasmafs.namenode.store import ListedEntry, Store


async def list_page(
    store: Store,
    view_inode: Callable[[int], Awaitable[Inode | None]],
    directory: int,
    cs: ChangeSet | None,
    cursor: str,
    limit: int,
) -> tuple[list[tuple[str, Inode]], bool]:
    """Up to `limit` entries sorting after `cursor`, and whether more may follow."""
    changed = cs.children.get(directory, set()) if cs is not None else set()
    page: list[tuple[str, Inode]] = []
    while len(page) < limit:
        want = limit - len(page)
        committed = await store.list_entries(directory, cursor, want, True)
        exhausted = len(committed) < want
        upper = None if exhausted else committed[-1].name
        merged: dict[str, ListedEntry | int] = {
            e.name: e for e in committed if e.name not in changed
        }
        for name in changed:
            if name > cursor and (upper is None or name <= upper):
                assert cs is not None
                target = cs.entries[(directory, name)]
                if target is not None:
                    merged[name] = target
        names = sorted(merged)
        for name in names[:want]:
            item = merged[name]
            if isinstance(item, ListedEntry) and (cs is None or not _pending(cs, item.ino)):
                assert item.inode is not None
                inode: Inode | None = item.inode
            else:
                inode = await view_inode(item.ino if isinstance(item, ListedEntry) else item)
            if inode is not None:
                page.append((name, inode))
        if names:
            cursor = names[min(want, len(names)) - 1]
        elif upper is not None:
            cursor = upper
        if exhausted and len(names) <= want:
            return page, False
    return page, True


def _pending(cs: ChangeSet, ino: int) -> bool:
    return ino in cs.inodes or ino in cs.touches
