"""ListObjects (V1 and V2) from one key-order walk of the namenode.

The walk starts at the deepest directory the prefix names, just before the first key
the prefix or the marker allows, and goes in the order S3 lists keys (each entry's
path with "/" after a directory's name), one level deep when the delimiter is "/".
Files are objects, an empty directory is the object "dir/", and symbolic links and
special files are not listed. A delimiter rolls the keys that contain it after the
prefix into common prefixes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from plasmafs.client import Client
from plasmafs.core import paths
from plasmafs.core.attributes import Attr, FileKind, TreeEntry
from plasmafs.core.errors import NotDirectoryError, NotFoundError
from plasmafs.gateway.object_keys import key_parts
from plasmafs.gateway.s3_errors import S3Error

MAX_KEYS = 1000
LAST_CHARACTER = "\U0010ffff"


@dataclass(slots=True)
class Listing:
    """One page of a listing."""

    objects: list[tuple[str, Attr]] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    truncated: bool = False
    last: str = ""  # the last key or common prefix returned


async def list_objects(
    fs: Client,
    bucket_dir: str,
    prefix: str,
    delimiter: str,
    after: str,
    max_keys: int,
) -> Listing:
    """Up to `max_keys` objects and common prefixes of the bucket at `bucket_dir` whose
    keys start with `prefix` and sort after `after` (empty: from the first)."""
    listing = Listing()
    if max_keys <= 0:
        return listing
    slash = prefix.rfind("/")
    base, name_part = prefix[: slash + 1], prefix[slash + 1 :]
    try:
        below = key_parts(base) if base else []
    except S3Error:
        return listing  # no key can start with a prefix that is no path
    # After a common prefix (a V1 NextMarker): the walk skips the keys it holds.
    skipping = bool(delimiter) and after.endswith(delimiter) and after.startswith(prefix)
    lower = base + _just_before(name_part) if name_part else ""
    cursor = max(after + LAST_CHARACTER if skipping else after, lower)
    if cursor and not cursor.startswith(base):
        if cursor > base:
            return listing  # every key below base sorts before the cursor
        cursor = ""
    relative = _walk_cursor(cursor[len(base) :]) if cursor else ""
    depth = 1 if delimiter == "/" else 0
    walk = fs.walk(
        "/".join([bucket_dir, *below]),
        key_order=True,
        depth=depth,
        after=relative,
        page=min(max_keys + 2, MAX_KEYS + 2),
    )
    last_prefix = ""
    try:
        async for key, attr in _objects(walk, base, entered_all=depth == 0):
            if key <= after:
                continue
            if not key.startswith(prefix):
                if key > prefix:
                    break
                continue
            common = common_prefix(key, prefix, delimiter)
            if common and (common == last_prefix or common <= after):
                continue  # returned already, or before the marker
            if len(listing.objects) + len(listing.prefixes) >= max_keys:
                listing.truncated = True
                break
            if common:
                listing.prefixes.append(common)
                last_prefix = listing.last = common
            else:
                listing.objects.append((key, attr))
                listing.last = key
    except (NotFoundError, NotDirectoryError):
        pass  # no directory where the prefix points: no keys
    return listing


def common_prefix(key: str, prefix: str, delimiter: str) -> str:
    """The common prefix a delimiter rolls `key` (which starts with `prefix`) up into:
    up to the first delimiter after the prefix, that included ("": none)."""
    if not delimiter:
        return ""
    at = key.find(delimiter, len(prefix))
    return key[: at + len(delimiter)] if at >= 0 else ""


async def _objects(
    walk: AsyncIterator[TreeEntry], base: str, *, entered_all: bool
) -> AsyncIterator[tuple[str, Attr]]:
    """The keys of a walk's files and directories, in key order: a directory the walk
    enters is only an object if it is empty, which the entry after it tells."""
    pending: tuple[str, Attr] | None = None
    async for entry in walk:
        path, attr = entry.path, entry.attr
        if not path and attr.kind is not FileKind.DIRECTORY:
            return  # the prefix names a file, not a directory
        key = base + path + ("/" if path and attr.is_dir else "")
        if pending is not None:
            if not key.startswith(pending[0]):
                yield pending
            pending = None
        if attr.is_dir:
            if entry.unreadable or not key:
                continue
            if entered_all or not path:
                pending = (key, attr)
            else:
                yield key, attr  # not entered: a delimiter rolls it up
        elif attr.kind is FileKind.FILE:
            yield key, attr
    if pending is not None:
        yield pending


def _just_before(name: str) -> str:
    """A name-cursor sorting before every name that starts with `name` (and close to
    them: the last character one lower, then the highest)."""
    last = ord(name[-1])
    if last > 1 and not 0xD800 <= last - 1 <= 0xDFFF:
        return name[:-1] + chr(last - 1) + LAST_CHARACTER
    return name[:-1]


def _walk_cursor(relative: str) -> str:
    """The longest key-order cursor the namenode takes that sorts at or before
    `relative` (its names valid; an invalid one cut off with what follows)."""
    directory = relative.endswith("/")
    names = (relative[:-1] if directory else relative).split("/")
    kept: list[str] = []
    for name in names:
        if not name or "\0" in name or len(name.encode()) > paths.MAX_NAME_BYTES:
            return "/".join(kept) + "/" if kept else ""
        kept.append(name)
    return relative
