"""Server-side copies of a file's blocks: each replica of the new file is filled by its
own datanode from a replica of the source — the same datanode when it holds one, then
one on its host, then any other, live ones first — so the data never passes through the
client that asks for the copy. A source replica that cannot be read (its datanode gone,
a corrupt block) gives way to the next one."""

from __future__ import annotations

import asyncio

from plasmafs.client.datapath import DataChannels, copy_range
from plasmafs.core.attributes import Extent, Replica, ReplicaState
from plasmafs.core.errors import CorruptionError, PlasmaError, UnavailableError


def source_order(sources: tuple[Replica, ...], target: Replica) -> list[Replica]:
    """The source replicas in the order a copy into `target` tries them."""

    def rank(replica: Replica) -> tuple[int, int, int]:
        return (
            replica.state is not ReplicaState.LIVE,
            replica.datanode_id != target.datanode_id,
            not (replica.host and replica.host == target.host),
        )

    return sorted(sources, key=rank)


async def fill_extent(
    channels: DataChannels,
    target: Extent,
    source: Extent,
    source_index: int,
    content_bytes: int = 0,
) -> None:
    """Fill every replica of `target` with the source's blocks from file block
    `source_index` on (inside the source extent), all replicas at once, zeros past
    `content_bytes` (0: none); the first failure cancels the others."""
    offset = source_index - source.file_index
    if offset < 0 or offset + target.block_count > source.block_count:
        raise ValueError("the blocks to copy lie outside the source extent")
    copies = [
        asyncio.ensure_future(
            _fill_replica(channels, r, target.block_count, source, offset, content_bytes)
        )
        for r in target.replicas
    ]
    try:
        await asyncio.gather(*copies)
    except BaseException:  # the first failure as it is (no exception group)
        for copy in copies:
            copy.cancel()
        await asyncio.gather(*copies, return_exceptions=True)
        raise


async def _fill_replica(
    channels: DataChannels,
    target: Replica,
    count: int,
    source: Extent,
    offset: int,
    content_bytes: int,
) -> None:
    errors: list[PlasmaError] = []
    for replica in source_order(source.replicas, target):
        try:
            await copy_range(channels, target, 0, count, replica, offset, content_bytes)
            return
        except (UnavailableError, CorruptionError) as exc:
            errors.append(exc)  # this source could not be read: the next one
    raise UnavailableError("no source replica could be copied: " + "; ".join(map(str, errors)))
