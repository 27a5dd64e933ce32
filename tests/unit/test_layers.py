"""The import rules between packages (README, "Where the code lives"), read from the
source, and what each layer loads at run time: the library no gRPC until a client is
made, the servers none of the library's connection, file and sync modules."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# package -> the plasmafs packages its modules may import (itself always)
MAY_IMPORT = {
    "core": set(),
    "client": {"core"},
    "fsspec": {"core", "client"},
    "namenode": {"core"},
    "datanode": {"core"},
    "mount": {"core", "client"},
    "local": {"core", "client"},
    "gateway": {"core", "client"},
    "sql": set(),
    "cli": {"core", "client", "fsspec", "gateway", "local", "mount", "namenode", "datanode", "sql"},
}

LIBRARY_PARTS = [
    "plasmafs.client.client",
    "plasmafs.client.connection",
    "plasmafs.client.datapath",
    "plasmafs.client.file_reader",
    "plasmafs.client.file_writer",
    "plasmafs.client.shm_read",
    "plasmafs.client.sync",
    "plasmafs.client.transaction",
]


def _package_folders() -> dict[str, Path]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {name.removeprefix("plasmafs."): ROOT / folder for name, folder in mapping.items()}


def _imported_packages(source: Path) -> set[str]:
    """The plasmafs packages a module imports anywhere in it (function bodies and
    TYPE_CHECKING blocks too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "plasmafs" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_every_package_has_a_rule() -> None:
    assert set(_package_folders()) == set(MAY_IMPORT)


def test_packages_import_only_what_their_layer_may() -> None:
    broken = []
    for package, folder in _package_folders().items():
        allowed = MAY_IMPORT[package] | {package}
        for source in sorted(folder.rglob("*.py")):
            for other in sorted(_imported_packages(source) - allowed):
                broken.append(f"{source.relative_to(ROOT)} imports plasmafs.{other}")
    assert broken == []


def test_the_rule_reader_sees_imports_in_functions_and_type_checking_blocks(
    tmp_path: Path,
) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import plasmafs.core.errors\n"
        "if TYPE_CHECKING:\n    from plasmafs.client import Client\n"
        "def f():\n    import plasmafs.cli.main\n    from plasmafs.mount import options\n"
    )
    assert _imported_packages(source) == {"core", "client", "cli", "mount"}


def _loaded_after(statement: str, modules: list[str]) -> list[str]:
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {modules!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_the_library_loads_no_grpc_until_a_client_is_made() -> None:
    assert _loaded_after("import plasmafs.client", ["grpc", "asyncio"]) == []
    assert _loaded_after("from plasmafs.client import NotFoundError, Attr", ["grpc"]) == []


def test_the_namespace_rules_load_no_client_machinery() -> None:
    client_parts = ["grpc", "plasmafs.client"]
    assert _loaded_after("import plasmafs.namenode.namespace", client_parts) == []


def test_the_permission_rules_load_no_transport_or_database() -> None:
    assert _loaded_after("import plasmafs.namenode.permissions", ["grpc", "asyncpg"]) == []


def test_the_daemons_load_no_client_library() -> None:
    for server in ("plasmafs.namenode.server", "plasmafs.datanode.server"):
        assert _loaded_after(f"import {server}", LIBRARY_PARTS) == [], server
