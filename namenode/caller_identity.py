"""Who is calling: the identity a servicer checks before it serves a call.

Users present a bearer token (`authorization: Bearer pfs1....` in the call's metadata)
on every call; a Session stream is checked once, when it opens. Datanodes are known by
the certificate they present on the registry port (its common name is their
principal); that port requires one signed by the cluster CA, so the check here only
reads what the TLS handshake proved. An insecure namenode (no TLS, switched off on
purpose) authenticates nobody: every caller acts as the superuser.
"""

from __future__ import annotations

import grpc

from plasmafs.core.errors import AuthenticationError, OperationNotPermittedError
from plasmafs.namenode.principals import SUPERUSER, Principal, Principals

COMMON_NAME = "x509_common_name"
AUTHORIZATION = "authorization"
BEARER = "Bearer "


def bearer_token(context: grpc.aio.ServicerContext) -> str | None:
    """The token the call carries, or None."""
    for key, value in context.invocation_metadata() or ():
        if key == AUTHORIZATION and isinstance(value, str) and value.startswith(BEARER):
            return value[len(BEARER) :]
    return None


class Gate:
    """Checks callers: users by token against `principals` (None: insecure, nobody is
    checked), datanodes by certificate when the cluster runs TLS."""

    def __init__(self, principals: Principals | None) -> None:
        self.principals = principals

    @property
    def secure(self) -> bool:
        """Callers are authenticated."""
        return self.principals is not None

    def user(self, context: grpc.aio.ServicerContext) -> Principal:
        """The authenticated user of the call; AuthenticationError without a valid
        token."""
        if self.principals is None:
            return SUPERUSER
        token = bearer_token(context)
        if token is None:
            raise AuthenticationError(
                "not authenticated: no credential (give a token file: --token-file or "
                "PFS_TOKEN_FILE)"
            )
        try:
            return self.principals.verify(token)
        except AuthenticationError as exc:
            raise AuthenticationError(f"not authenticated: {exc}") from None

    def superuser(self, context: grpc.aio.ServicerContext, what: str) -> Principal:
        """The caller, who must be a superuser to do `what`."""
        caller = self.user(context)
        if not caller.superuser:
            raise OperationNotPermittedError(f"{what}: only a superuser may do this")
        return caller

    def datanode(self, context: grpc.aio.ServicerContext) -> str | None:
        """The common name of the caller's verified certificate (None when insecure);
        AuthenticationError when the call came without one (on the client port, which
        asks for none)."""
        if self.principals is None:
            return None
        names = context.auth_context().get(COMMON_NAME)
        if not names:
            raise AuthenticationError(
                "datanodes register on the namenode's registry port (registry_listen) with "
                "a certificate of the cluster CA"
            )
        return names[0].decode("utf-8", "replace")
