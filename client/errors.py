"""The error codes every layer shares, their exceptions, and their gRPC status codes.

One table (`_TABLE`) maps each wire `ErrorCode` to an exception class and a gRPC
status code; the namenode raises these exceptions, the servicer turns them into
wire errors, and the client turns wire errors back into the same exceptions.
"""

from __future__ import annotations

import errno as _errno

import grpc

from plasmafs.client.proto import namenode_pb2 as pb


class PlasmaError(Exception):
    """Base of every plasmafs error; `code` is the wire ErrorCode."""

    code: int = pb.EIO
    posix_errno: int = _errno.EIO

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__doc__ or self.__class__.__name__)
        self.message = message

    def __str__(self) -> str:
        return self.message or (self.__class__.__doc__ or "").strip()


class NotFoundError(PlasmaError):
    """No such file or directory."""

    code = pb.ENOENT
    posix_errno = _errno.ENOENT


class ExistsError(PlasmaError):
    """File exists."""

    code = pb.EEXIST
    posix_errno = _errno.EEXIST


class NotDirectoryError(PlasmaError):
    """Not a directory."""

    code = pb.ENOTDIR
    posix_errno = _errno.ENOTDIR


class IsDirectoryError(PlasmaError):
    """Is a directory."""

    code = pb.EISDIR
    posix_errno = _errno.EISDIR


class NotEmptyError(PlasmaError):
    """Directory not empty."""

    code = pb.ENOTEMPTY
    posix_errno = _errno.ENOTEMPTY


class InvalidArgumentError(PlasmaError):
    """Invalid argument."""

    code = pb.EINVAL
    posix_errno = _errno.EINVAL


class NameTooLongError(PlasmaError):
    """File name too long."""

    code = pb.ENAMETOOLONG
    posix_errno = _errno.ENAMETOOLONG


class ConflictError(PlasmaError):
    """Conflict with another transaction; the transaction was aborted, retry it."""

    code = pb.ECONFLICT
    posix_errno = _errno.EAGAIN


class LoopError(PlasmaError):
    """Too many levels of symbolic links."""

    code = pb.ELOOP
    posix_errno = _errno.ELOOP


class TransactionError(PlasmaError):
    """Unknown, finished or aborted transaction."""

    code = pb.EBADTXN
    posix_errno = _errno.EBADF


class BusyError(PlasmaError):
    """Resource busy."""

    code = pb.EBUSY
    posix_errno = _errno.EBUSY


class StorageError(PlasmaError):
    """I/O error in the namenode's storage."""

    code = pb.EIO
    posix_errno = _errno.EIO


class ShutdownError(PlasmaError):
    """The namenode is shutting down."""

    code = pb.ESHUTDOWN
    posix_errno = _errno.ESHUTDOWN


class NotActiveError(ShutdownError):
    """This namenode is not the active one (its lock or term ended); nothing was written."""


class NoSpaceError(PlasmaError):
    """No space left on the cluster."""

    code = pb.ENOSPC
    posix_errno = _errno.ENOSPC


class PermissionDeniedError(PlasmaError):
    """Operation not permitted."""

    code = pb.EPERM
    posix_errno = _errno.EPERM


class CorruptionError(PlasmaError):
    """Stored data failed its checksum; it was not returned."""

    code = pb.ECORRUPT
    posix_errno = _errno.EIO


class UnavailableError(PlasmaError):
    """No replica of the data could be reached."""

    code = pb.EUNAVAIL
    posix_errno = _errno.EIO


class ConnectionLostError(PlasmaError):
    """The connection to the namenode was lost; open transactions were aborted."""

    code = pb.EIO
    posix_errno = _errno.ECONNRESET


class StaleFileError(PlasmaError):
    """The file changed after it was opened and the version being read is gone: open it
    again (raised by the client only)."""

    posix_errno = _errno.ESTALE


class ConfigError(PlasmaError):
    """Bad configuration."""

    code = pb.EINVAL
    posix_errno = _errno.EINVAL


_TABLE: dict[int, tuple[type[PlasmaError], grpc.StatusCode]] = {
    pb.ENOENT: (NotFoundError, grpc.StatusCode.NOT_FOUND),
    pb.EEXIST: (ExistsError, grpc.StatusCode.ALREADY_EXISTS),
    pb.ENOTDIR: (NotDirectoryError, grpc.StatusCode.FAILED_PRECONDITION),
    pb.EISDIR: (IsDirectoryError, grpc.StatusCode.FAILED_PRECONDITION),
    pb.ENOTEMPTY: (NotEmptyError, grpc.StatusCode.FAILED_PRECONDITION),
    pb.EINVAL: (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    pb.ENAMETOOLONG: (NameTooLongError, grpc.StatusCode.INVALID_ARGUMENT),
    pb.ECONFLICT: (ConflictError, grpc.StatusCode.ABORTED),
    pb.ELOOP: (LoopError, grpc.StatusCode.FAILED_PRECONDITION),
    pb.EBADTXN: (TransactionError, grpc.StatusCode.FAILED_PRECONDITION),
    pb.EBUSY: (BusyError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    pb.EIO: (StorageError, grpc.StatusCode.INTERNAL),
    pb.ESHUTDOWN: (ShutdownError, grpc.StatusCode.UNAVAILABLE),
    pb.ENOSPC: (NoSpaceError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    pb.EPERM: (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    pb.ECORRUPT: (CorruptionError, grpc.StatusCode.DATA_LOSS),
    pb.EUNAVAIL: (UnavailableError, grpc.StatusCode.UNAVAILABLE),
}

ERRNO_METADATA_KEY = "pfs-errno"


def error_from_wire(code: int, message: str) -> PlasmaError:
    """The exception for a wire error code (unknown codes become StorageError)."""
    cls = _TABLE.get(code, (StorageError, grpc.StatusCode.INTERNAL))[0]
    return cls(message)


def grpc_status_for(error: PlasmaError) -> grpc.StatusCode:
    """The gRPC status code a unary call reports for `error`."""
    return _TABLE.get(error.code, (StorageError, grpc.StatusCode.INTERNAL))[1]


async def abort_with(context: grpc.aio.ServicerContext, error: PlasmaError) -> None:
    """End a server call with `error`'s status code, keeping its wire code in metadata."""
    context.set_trailing_metadata(((ERRNO_METADATA_KEY, str(int(error.code))),))
    await context.abort(grpc_status_for(error), str(error))


def error_from_rpc(exc: grpc.RpcError) -> PlasmaError:
    """Turn a failed gRPC call into a plasmafs exception, keeping the namenode's code."""
    status = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    metadata = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in metadata or ():
        if key == ERRNO_METADATA_KEY:
            return error_from_wire(int(value), details or "")
    if status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        return ConnectionLostError(f"namenode unavailable: {details}")
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ConnectionLostError(f"namenode did not answer in time: {details}")
    return StorageError(f"{status}: {details}")
