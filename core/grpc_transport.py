"""The gRPC transport every plasmafs process uses, chosen before gRPC loads.

gRPC reads GRPC_EXPERIMENTS once, when its module is first imported. Its EventEngine
client and listener endpoints (on by default in the versions plasmafs requires) pass
each message from an I/O thread to the completion queue's thread and then to the
asyncio loop; with them switched off, the completion queue's thread reads and writes
the socket itself. Namenode requests are small messages, one round trip each: without
the extra hand-over a request costs both ends about a quarter less CPU and is answered
sooner (`loadtests/rpc_bench.py`, BENCHMARKS.md). A GRPC_EXPERIMENTS the user set is
left as it is (an empty value keeps gRPC's defaults).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

POLL_TRANSPORT = "-event_engine_client,-event_engine_listener"
# gRPC releases checked to have both switches (pyproject requires 1.85 or newer): an
# experiment gRPC does not know is logged as an error by every process, so a newer
# release gets them once checked.
KNOWN_RELEASES = range(85, 86)  # grpcio 1.85.x

chosen_here = False  # whether choose_transport set GRPC_EXPERIMENTS (not the user)


def choose_transport() -> None:
    """Set GRPC_EXPERIMENTS for the poll-based transport, unless it is set already or
    the installed gRPC is not known to have the switches. Without effect once gRPC was
    imported (then its choice stands)."""
    global chosen_here
    if "GRPC_EXPERIMENTS" in os.environ:
        return
    if release_checked():
        os.environ["GRPC_EXPERIMENTS"] = POLL_TRANSPORT
        chosen_here = True


def release_checked() -> bool:
    """True if the installed gRPC is a release known to have both switches."""
    release = _grpc_release()
    return release is not None and release[0] == 1 and release[1] in KNOWN_RELEASES


def _grpc_release() -> tuple[int, int] | None:
    """(major, minor) of the installed gRPC, read from its version file without
    importing it (nor importlib.metadata, which would cost every `pfs` command ~30 ms)."""
    spec = importlib.util.find_spec("grpc")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(spec.submodule_search_locations[0]) / "_grpcio_metadata.py").read_text()
    except OSError:
        return None
    found = re.search(r"(\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2])) if found else None
