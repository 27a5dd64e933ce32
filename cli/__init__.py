"""plasmafs.cli: the `pfs` command. `main` parses the command line; each family of
commands lives in a module of its own (data transfer, trees, accounts, mounts, ...)."""

import os

# gRPC's C core logs at INFO to stderr unless told otherwise (a "Got goaway" line when a
# standby namenode takes over mid-call): a command prints its own errors, one line each.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from plasmafs.cli.main import main  # (after the setting: it loads gRPC)

__all__ = ["main"]
