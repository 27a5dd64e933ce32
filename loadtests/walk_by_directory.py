"""Gather a subtree's entries and bytes directory by directory (one readdir with
attributes per directory), as a process of its own: the baseline the `pfs` subtree
commands are measured against in `loadtests/tree_bench.py`, start-up included.

    python -m loadtests.walk_by_directory PATH
"""

from __future__ import annotations

import asyncio
import sys

from plasmafs.client import Client
from plasmafs.client.config import namenode_address
from plasmafs.core.attributes import FileKind


async def by_directory(fs: Client, root: str) -> tuple[int, int]:
    """Entries and bytes under `root`, one readdir with attributes per directory: what
    du, find or ls -lR cost without the namenode's summaries and walks."""
    entries = size = 0
    pending = [root]
    while pending:
        directory = pending.pop()
        async for e in fs.scandir(directory, plus=True):
            entries += 1
            assert e.attr is not None
            size += e.attr.size if e.kind is FileKind.FILE else 0
            if e.kind is FileKind.DIRECTORY:
                pending.append(f"{directory}/{e.name}")
    return entries, size


async def _main(root: str) -> None:
    async with Client(namenode_address()) as fs:
        entries, size = await by_directory(fs, root)
    print(f"{entries} entries, {size} bytes")


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1]))
