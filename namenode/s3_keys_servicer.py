"""The gRPC face of S3 access keys (the S3Keys service).

A superuser creates, lists and revokes keys; the secret of a new key is in the
creating reply only, and is kept sealed (namenode/s3_key_sealing.py). The S3 gateway
asks for the signing key of a day, region and service (SigV4 derives one from the
secret), so the secret never leaves the namenode and a signing key, should it leak,
is good for one day. Only a caller that may act for the key's user gets it (a
superuser, or a user granted that uid with --act-for-callers): the gateway then makes
each request as that user.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

import grpc

from plasmafs.core.errors import ConfigError, InvalidArgumentError, NotFoundError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import answered
from plasmafs.core.s3_signing import signing_key
from plasmafs.namenode.account_store import check_name
from plasmafs.namenode.accounts_servicer import NO_ACCOUNTS
from plasmafs.namenode.caller_identity import Gate
from plasmafs.namenode.local_callers import CallerRights
from plasmafs.namenode.principals import Principals
from plasmafs.namenode.s3_key_sealing import Sealer, new_access_key_id, new_secret
from plasmafs.namenode.s3_key_store import S3KeyRow, S3KeyStore

log = logging.getLogger(__name__)

_ACCESS_KEY_ID = re.compile(r"PFS[A-Z2-7]{17}")
_DATE = re.compile(r"[0-9]{8}")
_REGION = re.compile(r"[a-z0-9-]{1,64}")
NO_SEALING_KEY = (
    "S3 keys need the namenode's s3_secret_file (PFS_NAMENODE_S3_SECRET_FILE): 32 random "
    "bytes, mode 0600, the same on every namenode"
)


class S3KeysServicer(pb_grpc.S3KeysServicer):
    """S3 access keys of a namenode (refused, saying why, when it keeps no accounts or
    has no sealing key)."""

    def __init__(
        self,
        store: S3KeyStore,
        sealer: Sealer | None,
        principals: Principals | None,
        gate: Gate,
    ) -> None:
        self.store = store
        self.sealer = sealer
        self.principals = principals
        self.gate = gate
        self.rights = CallerRights(principals)

    def _ready(self) -> tuple[Sealer, Principals]:
        if self.principals is None:
            raise ConfigError(NO_ACCOUNTS)
        if self.sealer is None:
            raise ConfigError(NO_SEALING_KEY)
        return self.sealer, self.principals

    async def CreateS3Key(
        self, request: pb.CreateS3KeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateS3KeyReply:
        """A new key pair of a user; the secret is in this reply only."""
        return await answered(context, self._create(request, context))

    async def _create(
        self, request: pb.CreateS3KeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateS3KeyReply:
        sealer, principals = self._ready()
        caller = self.gate.superuser(context, "create S3 key")
        uid = principals.uid_of(check_name(request.user, "user"))
        access_key_id, secret = new_access_key_id(), new_secret()
        row = await self.store.add(access_key_id, uid, sealer.seal(secret, access_key_id, uid))
        log.info("%s created S3 key %s of %s", caller.name, access_key_id, request.user)
        return pb.CreateS3KeyReply(key=self._info(row), secret_access_key=secret)

    async def ListS3Keys(
        self, request: pb.ListS3KeysRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListS3KeysReply:
        """The keys of a user, or of everyone (never their secrets)."""
        return await answered(context, self._list(request, context))

    async def _list(
        self, request: pb.ListS3KeysRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListS3KeysReply:
        _, principals = self._ready()
        self.gate.superuser(context, "list S3 keys")
        uid = principals.uid_of(check_name(request.user, "user")) if request.user else None
        names = principals.names().users
        rows = await self.store.of_user(uid)
        return pb.ListS3KeysReply(keys=[self._info(r, names) for r in rows])

    async def RevokeS3Key(
        self, request: pb.RevokeS3KeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.S3KeyInfo:
        """Revoke a key: gateways refuse it once their cached signing key expires."""
        return await answered(context, self._revoke(request, context))

    async def _revoke(
        self, request: pb.RevokeS3KeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.S3KeyInfo:
        self._ready()
        caller = self.gate.superuser(context, "revoke S3 key")
        row = await self.store.revoke(_access_key_id(request.access_key_id))
        log.info("%s revoked S3 key %s", caller.name, row.access_key_id)
        return self._info(row)

    async def S3SigningKey(
        self, request: pb.S3SigningKeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.S3SigningKeyReply:
        """The signing key of a live key for one day, region and service, and the ids
        of its user, for a caller that may act for that user."""
        return await answered(context, self._signing_key(request, context))

    async def _signing_key(
        self, request: pb.S3SigningKeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.S3SigningKeyReply:
        sealer, principals = self._ready()
        caller = self.gate.user(context)
        if not _DATE.fullmatch(request.date) or not _REGION.fullmatch(request.region):
            raise InvalidArgumentError("S3 signing key: date is YYYYMMDD, region [a-z0-9-]")
        if request.service != "s3":
            raise InvalidArgumentError("S3 signing key: the service is s3")
        access_key_id = _access_key_id(request.access_key_id)
        row = await self.store.get(access_key_id)
        if row is None or row.revoked is not None:
            state = "no such S3 key" if row is None else "S3 key revoked"
            raise NotFoundError(f"{state}: {access_key_id}")
        self.rights.check(caller, row.uid)
        user = principals.user(row.uid)
        secret = sealer.open(row.sealed, row.access_key_id, row.uid)
        return pb.S3SigningKeyReply(
            signing_key=signing_key(secret, request.date, request.region, request.service),
            user=user.name,
            uid=user.uid,
            gid=user.gid,
            groups=sorted(principals.groups_of(user.uid)),
        )

    def _info(self, row: S3KeyRow, names: Mapping[int, str] | None = None) -> pb.S3KeyInfo:
        """A key on the wire (`names`: of users by uid, asked once for a listing)."""
        if names is None:
            names = self.principals.names().users if self.principals is not None else {}
        return pb.S3KeyInfo(
            access_key_id=row.access_key_id,
            user=names.get(row.uid, str(row.uid)),
            uid=row.uid,
            created_unix_ms=round(row.created * 1000),
            revoked_unix_ms=0 if row.revoked is None else round(row.revoked * 1000),
        )


def _access_key_id(text: str) -> str:
    if not _ACCESS_KEY_ID.fullmatch(text):
        raise NotFoundError(f"no such S3 key: {text[:40]!r}")
    return text
