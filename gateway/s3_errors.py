"""S3's errors: a code, an HTTP status and a message, rendered as S3's XML error body;
and the plasmafs errors of the library translated to them."""

from __future__ import annotations

from xml.sax.saxutils import escape

from plasmafs.core import errors as pfs


class S3Error(Exception):
    """An S3 error response."""

    def __init__(self, code: str, status: int, message: str, **fields: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message
        self.fields = fields  # extra elements of the error body (Key, BucketName, ...)

    def body(self, resource: str, request_id: str) -> bytes:
        """The XML body of the response."""
        extra = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in self.fields.items())
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{self.code}</Code><Message>{escape(self.message)}</Message>"
            f"{extra}<Resource>{escape(resource)}</Resource>"
            f"<RequestId>{request_id}</RequestId></Error>"
        ).encode()


def access_denied(message: str = "Access Denied") -> S3Error:
    """403 AccessDenied."""
    return S3Error("AccessDenied", 403, message)


def invalid_argument(message: str) -> S3Error:
    """400 InvalidArgument."""
    return S3Error("InvalidArgument", 400, message)


def invalid_request(message: str) -> S3Error:
    """400 InvalidRequest."""
    return S3Error("InvalidRequest", 400, message)


def not_implemented(what: str) -> S3Error:
    """501 NotImplemented: a feature this gateway does not have."""
    return S3Error("NotImplemented", 501, f"{what} is not implemented by the plasmafs gateway")


def no_such_key(key: str) -> S3Error:
    """404 NoSuchKey."""
    return S3Error("NoSuchKey", 404, "The specified key does not exist.", Key=key)


def no_such_bucket(bucket: str) -> S3Error:
    """404 NoSuchBucket."""
    return S3Error("NoSuchBucket", 404, "The specified bucket does not exist", BucketName=bucket)


def from_plasma(exc: pfs.PlasmaError, *, bucket: str = "", key: str = "") -> S3Error:
    """The S3 error a library error answers a request with."""
    if isinstance(exc, pfs.NotFoundError | pfs.NotDirectoryError | pfs.IsDirectoryError):
        return no_such_key(key) if key else no_such_bucket(bucket)
    if isinstance(exc, pfs.AuthenticationError):
        return access_denied(str(exc))
    if isinstance(exc, pfs.PermissionError | pfs.OperationNotPermittedError):
        return access_denied()
    if isinstance(exc, pfs.NameTooLongError):
        return S3Error("KeyTooLongError", 400, "Your key is too long")
    if isinstance(exc, pfs.InvalidArgumentError):
        return invalid_argument(str(exc))
    if isinstance(exc, pfs.QuotaExceededError):  # as Ceph's gateway answers
        return S3Error("QuotaExceeded", 403, str(exc))
    if isinstance(exc, pfs.NoSpaceError):
        return S3Error("ServiceUnavailable", 503, "the cluster is out of space")
    if isinstance(exc, pfs.ConflictError | pfs.BusyError):
        return S3Error("OperationAborted", 409, str(exc))
    if isinstance(exc, pfs.UnavailableError | pfs.ConnectionLostError | pfs.ShutdownError):
        return S3Error("ServiceUnavailable", 503, str(exc))
    return S3Error("InternalError", 500, str(exc) or exc.__class__.__name__)
