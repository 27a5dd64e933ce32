"""Errors keep their types across the wire."""

from __future__ import annotations

import pytest

from plasmafs.client import errors
from plasmafs.client.proto import namenode_pb2 as pb


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
