"""S3 access keys through the namenode's S3Keys service: what `pfs admin user s3-key`
does, and the signing keys the S3 gateway verifies requests with.

Plain gRPC calls on a connection's channel with its credential, as the Accounts
service's. A key's secret is returned once, when it is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from plasmafs.client.unary_service import UnaryService
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from plasmafs.client.connection import Connection


@dataclass(frozen=True, slots=True)
class S3KeyInfo:
    """An access key of a user (never its secret); times are time.time() values."""

    access_key_id: str
    user: str
    uid: int
    created: float
    revoked: float | None

    @classmethod
    def from_wire(cls, k: pb.S3KeyInfo) -> S3KeyInfo:
        """Build from the wire message."""
        revoked = k.revoked_unix_ms / 1000 if k.revoked_unix_ms else None
        return cls(k.access_key_id, k.user, k.uid, k.created_unix_ms / 1000, revoked)


@dataclass(frozen=True, slots=True)
class SigningKey:
    """SigV4's key of one day, region and service, and the user its requests act as."""

    key: bytes
    user: str
    uid: int
    gid: int
    groups: tuple[int, ...]


class S3Keys(UnaryService):
    """The S3Keys service of the namenode behind one connection."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn, pb_grpc.S3KeysStub, "S3Keys")

    async def create(self, user: str) -> tuple[S3KeyInfo, str]:
        """A new key pair of `user`: the key and its secret (a superuser's call)."""
        reply = await self._call(self._stub.CreateS3Key, pb.CreateS3KeyRequest(user=user))
        return S3KeyInfo.from_wire(reply.key), reply.secret_access_key

    async def list(self, user: str = "") -> list[S3KeyInfo]:
        """The keys of `user` (empty: of everyone), oldest first."""
        reply = await self._call(self._stub.ListS3Keys, pb.ListS3KeysRequest(user=user))
        return [S3KeyInfo.from_wire(k) for k in reply.keys]

    async def revoke(self, access_key_id: str) -> S3KeyInfo:
        """Revoke a key."""
        request = pb.RevokeS3KeyRequest(access_key_id=access_key_id)
        return S3KeyInfo.from_wire(await self._call(self._stub.RevokeS3Key, request))

    async def signing_key(self, access_key_id: str, date: str, region: str) -> SigningKey:
        """The signing key of `access_key_id` for `date` (YYYYMMDD) and `region`, for a
        caller that may act for its user (NotFoundError: no such live key)."""
        request = pb.S3SigningKeyRequest(
            access_key_id=access_key_id, date=date, region=region, service="s3"
        )
        r = await self._call(self._stub.S3SigningKey, request)
        return SigningKey(r.signing_key, r.user, r.uid, r.gid, tuple(r.groups))
