"""plasmafs errors on gRPC calls: the status code each error is reported with, ending a
server call with an error, and turning a failed call back into the error it reported.

The wire codes live on the error classes (`plasmafs.core.errors`); only this module
knows gRPC's status codes, so the errors themselves import no transport.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import grpc

from plasmafs.core import errors
from plasmafs.core.errors import (
    AuthenticationError,
    ConnectionLostError,
    PlasmaError,
    StorageError,
)

ERRNO_METADATA_KEY = "pfs-errno"
USER_METADATA_KEY = "pfs-user"  # a Session's initial metadata: whom the namenode authenticated
INLINE_LIMIT_METADATA_KEY = "pfs-inline-limit"  # and the largest content kept inline
TRASH_METADATA_KEY = "pfs-trash-interval"  # and the seconds removed entries stay in trash
T = TypeVar("T")

_STATUS: dict[type[PlasmaError], grpc.StatusCode] = {
    errors.NotFoundError: grpc.StatusCode.NOT_FOUND,
    errors.ExistsError: grpc.StatusCode.ALREADY_EXISTS,
    errors.NotDirectoryError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.IsDirectoryError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.NotEmptyError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NameTooLongError: grpc.StatusCode.INVALID_ARGUMENT,
    errors.ConflictError: grpc.StatusCode.ABORTED,
    errors.LoopError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.TooManyLinksError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.TransactionError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.BusyError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.StorageError: grpc.StatusCode.INTERNAL,
    errors.ShutdownError: grpc.StatusCode.UNAVAILABLE,
    errors.NoSpaceError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.QuotaExceededError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.PermissionError: grpc.StatusCode.PERMISSION_DENIED,
    errors.OperationNotPermittedError: grpc.StatusCode.PERMISSION_DENIED,
    errors.PermissionDeniedError: grpc.StatusCode.PERMISSION_DENIED,
    errors.AuthenticationError: grpc.StatusCode.UNAUTHENTICATED,
    errors.CorruptionError: grpc.StatusCode.DATA_LOSS,
    errors.UnavailableError: grpc.StatusCode.UNAVAILABLE,
    errors.ConfigError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ConnectionLostError: grpc.StatusCode.UNAVAILABLE,
}


def grpc_status_for(error: PlasmaError) -> grpc.StatusCode:
    """The gRPC status code a call reports for `error` (its nearest mapped class's)."""
    for cls in type(error).__mro__:
        status = _STATUS.get(cls)
        if status is not None:
            return status
    return grpc.StatusCode.INTERNAL


async def abort_with(context: grpc.aio.ServicerContext, error: PlasmaError) -> None:
    """End a server call with `error`'s status code, keeping its wire code in metadata."""
    context.set_trailing_metadata(((ERRNO_METADATA_KEY, str(int(error.code))),))
    await context.abort(grpc_status_for(error), str(error))


async def answered(context: grpc.aio.ServicerContext, work: Awaitable[T]) -> T:
    """The reply `work` makes, or the call ended with the status of the plasmafs error it
    raised (a unary handler's whole body)."""
    try:
        return await work
    except PlasmaError as exc:
        await abort_with(context, exc)
        raise AssertionError("unreachable") from None


def service_error(exc: grpc.RpcError, address: str, service: str) -> PlasmaError:
    """A failed call of a unary service (Admin, Accounts) as a plasmafs error; a namenode
    from before that service answers UNIMPLEMENTED and no errno, and is told apart."""
    if hasattr(exc, "code") and exc.code() == grpc.StatusCode.UNIMPLEMENTED:
        return StorageError(
            f"the namenode at {address} has no {service} service (an older version?)"
        )
    return error_from_rpc(exc)


def error_from_rpc(exc: grpc.RpcError) -> PlasmaError:
    """Turn a failed gRPC call into a plasmafs exception, keeping the server's code."""
    status = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    metadata = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in metadata or ():
        if key == ERRNO_METADATA_KEY:
            return errors.error_from_wire(int(value), details or "")
    if status == grpc.StatusCode.UNAUTHENTICATED:
        # The gate refuses before any plasmafs code runs, so no errno travels with it.
        return AuthenticationError(details or "")
    if status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        return ConnectionLostError(f"namenode unavailable: {details}")
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ConnectionLostError(f"namenode did not answer in time: {details}")
    return StorageError(f"{status}: {details}")
