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


@dataclass(slots=True)
class ObjectMeta:
    """The S3 attributes of one object."""

    etag: str = ""  # without quotes
    size: int = -1  # the content the ETag belongs to: its size and mtime
    mtime_ns: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    user: dict[str, str] = field(default_factory=dict)  # x-amz-meta-* names, lowercase
    checksum: tuple[str, str] | None = None  # (algorithm, base64 value)

    def to_bytes(self) -> bytes:
        """The xattr value."""
        blob: dict[str, object] = {"etag": self.etag, "size": self.size, "mtime": self.mtime_ns}
        if self.headers:
            blob["headers"] = self.headers
        if self.user:
            blob["user"] = self.user
        if self.checksum:
            blob["checksum"] = list(self.checksum)
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
