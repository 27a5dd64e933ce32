"""One S3 request: its verified signature, the user it acts as, and the gateway's
shared parts (the cluster client, the root, the region, the signing keys)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from aiohttp import web

from plasmafs.client import Client
from plasmafs.client.s3_keys import SigningKey
from plasmafs.core import errors as pfs
from plasmafs.gateway.object_keys import bucket_path
from plasmafs.gateway.payload_checks import PayloadChecks
from plasmafs.gateway.s3_errors import S3Error, no_such_bucket
from plasmafs.gateway.signing_keys import SigningKeys
from plasmafs.gateway.sigv4 import UNSIGNED, Signature

NAMES_KEPT_SECONDS = 60.0


@dataclass(slots=True)
class Gateway:
    """What every request shares."""

    fs: Client
    root: str
    region: str
    signing_keys: SigningKeys
    min_part_size: int = 5 * 1024 * 1024  # of a multipart upload's parts but the last
    _names: dict[int, str] = field(default_factory=dict)
    _names_at: float = -NAMES_KEPT_SECONDS

    async def owner_names(self) -> dict[int, str]:
        """The names of users by uid (asked of the namenode at most once a minute)."""
        if time.monotonic() - self._names_at >= NAMES_KEPT_SECONDS:
            try:
                listing = await (await self.fs.accounts()).principals()
                self._names = {u.uid: u.name for u in listing.users}
            except pfs.ConfigError:
                self._names = {}  # an insecure cluster keeps no names
            self._names_at = time.monotonic()
        return self._names


@dataclass(slots=True)
class S3Request:
    """A request whose signature was verified."""

    gateway: Gateway
    request: web.Request
    signature: Signature
    user: SigningKey

    @property
    def signing_key(self) -> bytes:
        """The key the request was signed with (aws-chunked bodies chain on it)."""
        return self.user.key

    async def bucket_exists(self, bucket: str) -> None:
        """NoSuchBucket unless `bucket` is a directory (AccessDenied if the user may not
        look)."""
        try:
            attr = await self.gateway.fs.stat(bucket_path(self.gateway.root, bucket))
        except (pfs.NotFoundError, pfs.NotDirectoryError):
            raise no_such_bucket(bucket) from None
        if not attr.is_dir:
            raise no_such_bucket(bucket)

    async def read_body(self, limit: int, *, checksum_headers: bool = True) -> bytes:
        """The whole (small) body; EntityTooLarge past `limit` bytes. `checksum_headers`
        False: x-amz-checksum-* describe something else than the body (the object a
        CompleteMultipartUpload makes), and only Content-MD5 and the signed SHA-256 are
        checked."""
        body = await self.request.content.read(limit + 1)
        if len(body) > limit:
            raise S3Error("EntityTooLarge", 400, f"this request's body is limited to {limit} bytes")
        payload_hash = self.signature.payload_hash
        if payload_hash.startswith("STREAMING-"):
            raise S3Error("InvalidRequest", 400, "this request's body is not sent aws-chunked")
        checks = PayloadChecks(
            self.request.headers,
            None if payload_hash == UNSIGNED else payload_hash,
            declared=checksum_headers,
        )
        checks.update(body)
        checks.finish()
        return body
