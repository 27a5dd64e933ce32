"""The errors every layer shares: one exception class per wire `ErrorCode`.

Each class carries its wire code (`code`) and the errno it stands for (`posix_errno`);
the table from wire codes back to classes is derived from the classes themselves. The
namenode and datanodes raise these exceptions, their servicers turn them into wire
errors, and the client turns wire errors back into the same exceptions. The gRPC
status codes live with the transport (`plasmafs.core.rpc_status`), so importing
the errors loads no gRPC.

The refusals by permission (PermissionError, OperationNotPermittedError and the
ticket refusal PermissionDeniedError) are also builtins.PermissionError, with its
errno set.
"""

from __future__ import annotations

import builtins
import errno as _errno

from plasmafs.core.proto import namenode_pb2 as pb


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


class QuotaExceededError(PlasmaError):
    """A directory's quota on entries or on space would be exceeded (EDQUOT)."""

    code = pb.EDQUOT
    posix_errno = _errno.EDQUOT


class _Refusal(PlasmaError, builtins.PermissionError):
    """A refusal by permission, also a builtins.PermissionError with its errno set."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        # Code written for local files reads the errno of a builtins.PermissionError.
        self.errno, self.strerror = self.posix_errno, str(self)


class PermissionError(_Refusal):
    """Permission denied."""

    # The mode bits refused the caller (EACCES). Also a builtins.PermissionError, so
    # code written for local files catches it; the alias AccessDeniedError spares
    # callers from shadowing the builtin's name.
    code = pb.EACCES
    posix_errno = _errno.EACCES


AccessDeniedError = PermissionError


class OperationNotPermittedError(_Refusal):
    """Operation not permitted."""

    # Only the owner or the superuser may do this (EPERM): chmod, chown, a sticky
    # directory's entries.
    code = pb.EPERM
    posix_errno = _errno.EPERM


class PermissionDeniedError(OperationNotPermittedError):
    """Ticket refused."""

    # A datanode refused a ticket (missing, forged, expired or for another range). Its
    # own wire code keeps it apart from EPERM: readers renew their tickets on exactly
    # this error, never on a refusal by the namespace.
    code = pb.ETICKET


class AuthenticationError(PlasmaError):
    """Not authenticated."""

    # The namenode refused the credential (missing, unknown, expired or revoked).
    # POSIX has no errno for this; EACCES is the nearest, as NFS clients report a
    # refused credential. It is no builtins.PermissionError: code that skips files it
    # may not read must not skip every file once the token is revoked.
    code = pb.EAUTH
    posix_errno = _errno.EACCES


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

    code = pb.ECONNLOST
    posix_errno = _errno.ECONNRESET


# The errors of a namenode going away or standing by: worth trying another namenode,
# or the same one again later (client/failover.py).
FAILOVER_ERRORS = (ConnectionLostError, ShutdownError)


class TooManyLinksError(PlasmaError):
    """Too many links."""

    code = pb.EMLINK
    posix_errno = _errno.EMLINK


class StaleFileError(PlasmaError):
    """The file changed after it was opened and the version being read is gone: open it
    again (raised by the client only, so it has no wire code of its own)."""

    posix_errno = _errno.ESTALE


class NoDataError(PlasmaError):
    """The file has no extended attribute of that name (ENODATA, as getxattr(2))."""

    code = pb.ENODATA
    posix_errno = _errno.ENODATA


class NotSupportedError(PlasmaError):
    """The operation or attribute namespace is not supported (EOPNOTSUPP)."""

    code = pb.EOPNOTSUPP
    posix_errno = _errno.EOPNOTSUPP


class LockedError(PlasmaError):
    """A file lock is held by someone else and the request would not wait (EAGAIN,
    as fcntl(F_SETLK) and flock(LOCK_NB) answer)."""

    code = pb.ELOCKED
    posix_errno = _errno.EAGAIN


class InterruptedCallError(PlasmaError):
    """A wait for a lock was given up before it was granted (EINTR)."""

    code = pb.EINTR
    posix_errno = _errno.EINTR


class DeadlockError(PlasmaError):
    """Waiting for the lock would wait for itself through other waiters (EDEADLK)."""

    code = pb.EDEADLK
    posix_errno = _errno.EDEADLK


class ReadOnlyError(PlasmaError):
    """A snapshot is read-only (EROFS)."""

    code = pb.EROFS
    posix_errno = _errno.EROFS


class LockLostError(PlasmaError):
    """A lock held through a connection that has ended is gone: others may have taken
    it since (raised by the client only, so it has no wire code of its own)."""

    posix_errno = _errno.EIO


class ConfigError(PlasmaError):
    """Bad configuration."""

    code = pb.ECONFIG
    posix_errno = _errno.EINVAL


def _classes_by_code() -> dict[int, type[PlasmaError]]:
    """Each wire code's class: the one that declares the code (subclasses that only
    inherit it, such as NotActiveError, travel as their parent)."""
    found: dict[int, type[PlasmaError]] = {}
    pending = list(PlasmaError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "code" in cls.__dict__:
            if cls.code in found and found[cls.code] is not cls:
                raise AssertionError(f"wire code {cls.code} of {cls} is also {found[cls.code]}")
            found[cls.code] = cls
    return found


_BY_CODE = _classes_by_code()


def error_from_wire(code: int, message: str) -> PlasmaError:
    """The exception for a wire error code (unknown codes become StorageError)."""
    return _BY_CODE.get(code, StorageError)(message)
