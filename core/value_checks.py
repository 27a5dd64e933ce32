"""Checks of the values every process shares, written once: blocksizes, permission
modes, replication factors, host:port addresses and datanodes' location labels. Each
raises InvalidArgumentError (ConfigError for addresses and locations, which come from
configuration)."""

from __future__ import annotations

from plasmafs.core.errors import ConfigError, InvalidArgumentError

MIN_BLOCKSIZE = 64 * 1024
MAX_BLOCKSIZE = 64 * 1024 * 1024
MAX_REPLICATION = 32
ALL_MODE_BITS = 0o7777
DEFAULT_LOCATION = "/default-rack"  # a datanode's location unless told (HDFS's name)
MAX_LOCATION = 255


def check_blocksize(blocksize: int) -> int:
    """A power of two from 64 KiB to 64 MiB."""
    if not (MIN_BLOCKSIZE <= blocksize <= MAX_BLOCKSIZE and blocksize & (blocksize - 1) == 0):
        raise InvalidArgumentError(
            f"blocksize {blocksize} is not a power of two from 64 KiB to 64 MiB"
        )
    return blocksize


def check_mode(mode: int) -> int:
    """Permission bits only."""
    if not 0 <= mode <= ALL_MODE_BITS:
        raise InvalidArgumentError(f"mode {mode:#o} has bits outside 0o7777")
    return mode


def check_replication(replication: int) -> int:
    """1..32 replicas."""
    if not 1 <= replication <= MAX_REPLICATION:
        raise InvalidArgumentError(f"replication {replication} is not in 1..{MAX_REPLICATION}")
    return replication


def check_address(address: str, what: str = "address", *, any_port: bool = False) -> str:
    """host:port with a port in 1..65535 (0 too with `any_port`: a listener picks one)."""
    host, sep, port = address.rpartition(":")
    lowest = 0 if any_port else 1
    if (
        not sep
        or not host
        or not (port.isascii() and port.isdigit())
        or not lowest <= int(port) <= 65535
    ):
        raise ConfigError(f"{what} must be host:port, got {address!r}")
    return address


def check_location(location: str) -> str:
    """A datanode's rack or zone label ("" means the default): printable, no spaces, at
    most MAX_LOCATION characters. ConfigError otherwise."""
    if not location:
        return DEFAULT_LOCATION
    if (
        len(location) > MAX_LOCATION
        or not location.isprintable()
        or any(c.isspace() for c in location)
    ):
        raise ConfigError(
            f"not a location label: {location!r} (a rack or zone name such as /dc1/rack7, "
            f"printable, no spaces, at most {MAX_LOCATION} characters)"
        )
    return location
