"""plasmafs.cli: the `pfs` command. `main` parses the command line; each family of
commands lives in a module of its own (data transfer, trees, accounts, mounts, ...)."""

from plasmafs.cli.main import main

__all__ = ["main"]
