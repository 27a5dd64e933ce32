"""Errors keep their types across the wire, as wire codes and as gRPC statuses; the
refusals by permission are also builtins.PermissionError."""

from __future__ import annotations

import builtins
import errno as _errno

import grpc
import pytest

from plasmafs.core import errors, rpc_status
from plasmafs.core.proto import namenode_pb2 as pb


def _declared() -> list[type[errors.PlasmaError]]:
    found: list[type[errors.PlasmaError]] = []
    pending = list(errors.PlasmaError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "code" in cls.__dict__ and cls.__module__ == errors.__name__:
            found.append(cls)
    return found


@pytest.mark.parametrize("cls", _declared(), ids=lambda c: c.__name__)
def test_every_error_with_a_wire_code_comes_back_as_itself(cls: type) -> None:
    back = errors.error_from_wire(cls.code, "message")
    assert type(back) is cls and str(back) == "message"


def test_every_wire_code_has_exactly_one_class() -> None:
    codes = [cls.code for cls in _declared()]
    assert len(codes) == len(set(codes))
    assert set(codes) == set(pb.ErrorCode.values()) - {pb.OK}


def test_config_and_connection_errors_keep_their_types() -> None:
    config = errors.error_from_wire(errors.ConfigError.code, "bad volume")
    lost = errors.error_from_wire(errors.ConnectionLostError.code, "gone")
    assert isinstance(config, errors.ConfigError)
    assert isinstance(lost, errors.ConnectionLostError)
    assert type(errors.error_from_wire(9999, "?")) is errors.StorageError


class _Failed(grpc.RpcError):
    """A failed call as grpc reports it to a client."""

    def __init__(self, status: grpc.StatusCode, details: str, metadata: tuple = ()) -> None:
        self._status, self._details, self._metadata = status, details, metadata

    def code(self) -> grpc.StatusCode:
        return self._status

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return self._metadata


class _Context:
    """What abort_with uses of a server call's context: the call fails as a client sees it."""

    metadata: tuple = ()

    def set_trailing_metadata(self, metadata: tuple) -> None:
        self.metadata = metadata

    async def abort(self, status: grpc.StatusCode, details: str) -> None:
        raise _Failed(status, details, self.metadata)


async def _over_rpc(error: errors.PlasmaError) -> tuple[grpc.StatusCode, errors.PlasmaError]:
    """The status a server call that ends with `error` reports, and the error a client
    makes of it."""
    with pytest.raises(_Failed) as failed:
        await rpc_status.abort_with(_Context(), error)  # type: ignore[arg-type]
    return failed.value.code(), rpc_status.error_from_rpc(failed.value)


@pytest.mark.parametrize("cls", _declared(), ids=lambda c: c.__name__)
async def test_every_error_with_a_wire_code_comes_back_as_itself_over_grpc(cls: type) -> None:
    _, back = await _over_rpc(cls("message"))
    assert type(back) is cls and str(back) == "message"


@pytest.mark.parametrize(
    ("cls", "code", "status"),
    [
        (errors.PermissionError, pb.EACCES, grpc.StatusCode.PERMISSION_DENIED),
        (errors.OperationNotPermittedError, pb.EPERM, grpc.StatusCode.PERMISSION_DENIED),
        (errors.PermissionDeniedError, pb.ETICKET, grpc.StatusCode.PERMISSION_DENIED),
        (errors.AuthenticationError, pb.EAUTH, grpc.StatusCode.UNAUTHENTICATED),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
async def test_refusals_have_their_own_codes_and_statuses(
    cls: type[errors.PlasmaError], code: int, status: grpc.StatusCode
) -> None:
    reported, back = await _over_rpc(cls("no"))
    assert cls.code == code and reported == status and type(back) is cls


@pytest.mark.parametrize(
    ("cls", "errno"),
    [
        (errors.PermissionError, _errno.EACCES),
        (errors.OperationNotPermittedError, _errno.EPERM),
        (errors.PermissionDeniedError, _errno.EPERM),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_refusals_by_permission_are_builtin_permission_errors(
    cls: type[errors.PlasmaError], errno: int
) -> None:
    with pytest.raises(builtins.PermissionError) as caught:
        raise cls("/a/b")
    assert caught.value.errno == errno and cls.posix_errno == errno
    assert str(caught.value) == "/a/b"
    assert isinstance(caught.value, errors.PlasmaError)


def test_a_ticket_refusal_is_not_a_refusal_by_mode_bits() -> None:
    assert issubclass(errors.PermissionDeniedError, errors.OperationNotPermittedError)
    assert not issubclass(errors.OperationNotPermittedError, errors.PermissionDeniedError)
    assert type(errors.error_from_wire(pb.EPERM, "chmod")) is errors.OperationNotPermittedError
    assert errors.AccessDeniedError is errors.PermissionError


def test_an_authentication_error_is_no_permission_error() -> None:
    assert not issubclass(errors.AuthenticationError, builtins.PermissionError)
    assert errors.AuthenticationError.posix_errno == _errno.EACCES


def test_unauthenticated_without_an_errno_is_an_authentication_error() -> None:
    back = rpc_status.error_from_rpc(_Failed(grpc.StatusCode.UNAUTHENTICATED, "bad token"))
    assert type(back) is errors.AuthenticationError and str(back) == "bad token"
