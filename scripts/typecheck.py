"""Type-check the project with mypy under its import names (plasmafs.client, ...).

The source folders map to `plasmafs.*` through setuptools' package-dir, which mypy
cannot follow; this lays out build/typecheck/plasmafs/ as symlinks to them and runs
mypy there. Usage: python scripts/typecheck.py
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_folders() -> dict[str, str]:
    """plasmafs.<name> -> source folder, as pyproject.toml's package-dir maps them."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {name.removeprefix("plasmafs."): folder for name, folder in mapping.items()}


def main() -> int:
    """Build the shadow tree and run mypy on it; return mypy's exit code."""
    shadow = ROOT / "build" / "typecheck" / "plasmafs"
    shadow.mkdir(parents=True, exist_ok=True)
    (shadow / "__init__.py").write_text('"""plasmafs (type-check shadow)."""\n')
    for name, folder in package_folders().items():
        link = shadow / name
        if link.is_symlink() and link.readlink() != ROOT / folder:
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(ROOT / folder, target_is_directory=True)
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        str(shadow),
        str(ROOT / "loadtests"),
        str(ROOT / "scripts"),
    ]
    return subprocess.call(cmd, cwd=ROOT / "build" / "typecheck")


if __name__ == "__main__":
    sys.exit(main())
