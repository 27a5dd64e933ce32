"""plasmafs chooses gRPC's poll-based transport before gRPC loads, unless the user
chose: a process that imports the library or starts a daemon gets it."""

from __future__ import annotations

import os
import subprocess
import sys

import grpc
import pytest

from plasmafs.core import grpc_transport

SHOW = "import os, {module}; print(repr(os.environ.get('GRPC_EXPERIMENTS')))"


def _experiments_after_import(module: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    done = subprocess.run(
        [sys.executable, "-c", SHOW.format(module=module)],
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.parametrize(
    "module", ["plasmafs.client", "plasmafs.namenode.__main__", "plasmafs.mount.operations"]
)
def test_importing_plasmafs_chooses_the_poll_transport(module: str) -> None:
    assert grpc_transport._grpc_release() is not None
    # A gRPC release not checked yet keeps its default (see KNOWN_RELEASES).
    expected = grpc_transport.POLL_TRANSPORT if grpc_transport.release_checked() else None
    assert _experiments_after_import(module) == repr(expected)


def test_a_choice_the_user_made_stands() -> None:
    assert _experiments_after_import("plasmafs.client", GRPC_EXPERIMENTS="") == "''"
    chosen = _experiments_after_import("plasmafs.client", GRPC_EXPERIMENTS="-event_engine_dns")
    assert chosen == repr("-event_engine_dns")


def test_the_installed_grpc_release_is_read_from_its_version_file() -> None:
    major, minor = (int(part) for part in grpc.__version__.split(".")[:2])
    assert grpc_transport._grpc_release() == (major, minor)
