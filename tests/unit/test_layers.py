"""What each layer loads: the library without gRPC until a client is made, the servers
without the library's connection, file and sync modules."""

from __future__ import annotations

import subprocess
import sys

LIBRARY_PARTS = [
    "plasmafs.client.client",
    "plasmafs.client.connection",
    "plasmafs.client.datapath",
    "plasmafs.client.files",
    "plasmafs.client.localread",
    "plasmafs.client.sync",
    "plasmafs.client.transaction",
]


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


def test_the_permission_rules_load_no_transport_or_database() -> None:
    assert _loaded_after("import plasmafs.namenode.permissions", ["grpc", "asyncpg"]) == []


def test_the_daemons_load_no_client_library() -> None:
    for server in ("plasmafs.namenode.server", "plasmafs.datanode.server"):
        assert _loaded_after(f"import {server}", LIBRARY_PARTS) == [], server
