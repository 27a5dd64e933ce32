"""Errors keep their types across the wire; the shared core loads no transport."""

from __future__ import annotations

import subprocess
import sys

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


def _loaded_after(statement: str, modules: list[str]) -> list[str]:
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {modules!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_the_library_loads_no_grpc_until_a_client_is_made() -> None:
    assert _loaded_after("import plasmafs.client", ["grpc", "asyncio"]) == []
    assert _loaded_after("from plasmafs.client import NotFoundError, Attr", ["grpc"]) == []


def test_the_namespace_rules_load_no_client_machinery() -> None:
    client_parts = [
        "grpc",
        "plasmafs.client.connection",
        "plasmafs.client.files",
        "plasmafs.client.sync",
    ]
    assert _loaded_after("import plasmafs.namenode.namespace", client_parts) == []
