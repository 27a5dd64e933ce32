"""What S3 keeps with an object beyond its bytes: the ETag (MD5, or the multipart
form), the content type and other standard headers, user metadata (x-amz-meta-*) and
the checksum the client sent. One extended attribute, `user.s3`, holds them as JSON,
written in the same commit as the content.

The ETag is stamped with the file's size and modification time as committed: once
the content changes another way (the mount, the CLI), the object gets an ETag derived
from its inode, size and time instead (in the multipart form, "-1", so that no client
takes it for an MD5 of the content). Renames and chmod keep it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from plasmafs.client import Client
from plasmafs.core import errors as pfs
from plasmafs.core.attributes import Attr
from plasmafs.gateway.s3_errors import not_implemented

XATTR = b"user.s3"
# Headers kept and given back as they were sent.
STORED_HEADERS = (
    "Content-Type",
    "Content-Encoding",
    "Content-Disposition",
    "Content-Language",
    "Cache-Control",
    "Expires",
)
MAX_USER_METADATA = 2048  # bytes of names and values, as S3
# Part sizes kept: 2,000 runs of "[size,count]," fit the attribute (64 KiB) with the rest.
MAX_PART_RUNS = 2000
UNKNOWN_SIZE = -1
EMPTY_MD5 = hashlib.md5(b"", usedforsecurity=False).hexdigest()  # an empty object's ETag


@dataclass(slots=True)
class ObjectMeta:
    """The S3 attributes of one object."""

    etag: str = ""  # without quotes
    size: int = -1  # the content the ETag belongs to: its size and mtime
    mtime_ns: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    user: dict[str, str] = field(default_factory=dict)  # x-amz-meta-* names, lowercase
    checksum: tuple[str, str] | None = None  # (algorithm, base64 value)
    checksum_type: str = ""  # a multipart object's: COMPOSITE or FULL_OBJECT
    # A multipart object's part sizes, as runs of (size, count).
    parts: list[tuple[int, int]] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        """The xattr value."""
        blob: dict[str, object] = {"etag": self.etag, "size": self.size, "mtime": self.mtime_ns}
        if self.headers:
            blob["headers"] = self.headers
        if self.user:
            blob["user"] = self.user
        if self.checksum:
            blob["checksum"] = list(self.checksum)
        if self.checksum_type:
            blob["checksum_type"] = self.checksum_type
        if self.parts:
            blob["parts"] = [list(run) for run in self.parts]
        return json.dumps(blob, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> ObjectMeta:
        """The meta an xattr value holds (an unreadable one: none)."""
        try:
            blob = json.loads(raw)
            checksum = blob.get("checksum")
            return cls(
                str(blob.get("etag", "")),
                int(blob.get("size", -1)),
                int(blob.get("mtime", 0)),
                {str(k): str(v) for k, v in dict(blob.get("headers", {})).items()},
                {str(k): str(v) for k, v in dict(blob.get("user", {})).items()},
                (str(checksum[0]), str(checksum[1])) if checksum else None,
                str(blob.get("checksum_type", "")),
                [(int(size), int(count)) for size, count in blob.get("parts", [])],
            )
        except (ValueError, TypeError, AttributeError, IndexError):
            return cls()

    def etag_of(self, attr: Attr) -> str:
        """The object's ETag (quoted), if this meta still describes `attr`."""
        if self.etag and self.current(attr):
            return f'"{self.etag}"'
        return derived_etag(attr)

    def current(self, attr: Attr) -> bool:
        """Whether the meta was written with the file's present content."""
        return self.size == attr.size and self.mtime_ns == attr.mtime_ns

    @property
    def parts_count(self) -> int:
        """A multipart object's number of parts (0: not one)."""
        return sum(count for _, count in self.parts)

    def part_range(self, number: int) -> tuple[int, int] | None:
        """The (first, end) bytes of part `number` of a multipart object (None: no such
        part)."""
        first = 0
        if self.parts and self.parts[0][0] == UNKNOWN_SIZE:
            raise not_implemented("partNumber of an object of over 2,000 runs of part sizes")
        for size, count in self.parts:
            if number <= count:
                first += (number - 1) * size
                return first, first + size
            number -= count
            first += size * count
        return None


def part_runs(sizes: list[int]) -> list[tuple[int, int]]:
    """Part sizes as runs of (size, count): an upload's parts are mostly one size. Too
    many runs for the attribute: one run of unknown size (UNKNOWN_SIZE)."""
    runs: list[tuple[int, int]] = []
    for size in sizes:
        if runs and runs[-1][0] == size:
            runs[-1] = (size, runs[-1][1] + 1)
        else:
            runs.append((size, 1))
    if len(runs) > MAX_PART_RUNS:
        return [(UNKNOWN_SIZE, len(sizes))]
    return runs


async def read_meta(fs: Client, attr: Attr) -> ObjectMeta:
    """The S3 attributes of the file `attr` describes (none: an empty meta)."""
    try:
        return ObjectMeta.from_bytes(await fs.getxattr(attr.ino, XATTR))
    except (pfs.NoDataError, pfs.PermissionError, pfs.NotFoundError):
        return ObjectMeta()


def derived_etag(attr: Attr) -> str:
    """The ETag of a file the gateway did not write (or that changed since)."""
    stamp = f"{attr.ino}:{attr.size}:{attr.mtime_ns}"
    digest = hashlib.md5(stamp.encode(), usedforsecurity=False)
    return f'"{digest.hexdigest()}-1"'
