"""The options of a mount (`pfs mount -o ...`), parsed and checked."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from plasmafs.core.errors import ConfigError, InvalidArgumentError
from plasmafs.core.value_checks import check_replication

MAX_TIMEOUT = 86400.0


@dataclass(frozen=True, slots=True)
class MountOptions:
    """replication: of new files (0: the cluster default); attr_timeout, entry_timeout,
    negative_timeout: seconds the kernel may keep attributes, names and absent names;
    ro: refuse every change; allow_other: other local users may use the mount (as the
    mount's plasmafs user); sync: every change is durable when its call returns
    (otherwise at fsync, or within about a second); no_write_behind: directories the
    mount makes are not leased, so every change goes to the namenode at once (see
    mount/writebehind.py; sync and ro imply it); writeback_cache: the kernel gathers
    writes in its page cache and sends them in large requests (see
    mount/kernelview.py; off with sync and ro); failover_timeout: seconds a request
    waits for a namenode to be active again (a standby taking over, or the one
    namenode restarting) before it fails with EIO, as an NFS hard mount waits, but
    bounded; callers: act for the host's users (mount/callers.py): every request as
    the uid, gid and groups of the process that made it, with the kernel checking
    permissions too (default_permissions) and every local user let in (allow_other);
    it needs the mount's plasmafs user to have the right (a superuser, or `pfs admin
    user set NAME --act-for-callers`), else the mount is its user's alone."""

    replication: int = 0
    attr_timeout: float = 1.0
    entry_timeout: float = 1.0
    negative_timeout: float = 0.0
    ro: bool = False
    allow_other: bool = False
    sync: bool = False
    no_write_behind: bool = False
    writeback_cache: bool = False
    failover_timeout: float = 60.0
    callers: bool = False

    @property
    def write_behind(self) -> bool:
        """True if directories the mount makes are leased and changes queued in them."""
        return not (self.no_write_behind or self.sync or self.ro)

    @property
    def writeback(self) -> bool:
        """True if the kernel caches writes (asked for, and neither sync nor ro)."""
        return self.writeback_cache and not (self.sync or self.ro)

    @classmethod
    def parse(cls, text: str) -> MountOptions:
        """Options from `-o` text: comma-separated `name=value` and flags."""
        values: dict[str, object] = {}
        known = {f.name for f in fields(cls)}
        defaults = cls()
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, has_value, value = item.partition("=")
            name = name.replace("-", "_")
            if name == "rw" and not has_value:
                values["ro"] = False
                continue
            if name not in known:
                raise ConfigError(
                    f"unknown mount option {name!r} (known: {', '.join(sorted(known))})"
                )
            default = getattr(defaults, name)
            if isinstance(default, bool):
                if has_value:
                    raise ConfigError(f"mount option {name} takes no value")
                values[name] = True
            elif isinstance(default, int):
                values[name] = _replication(value)
            else:
                values[name] = _seconds(name, value)
        options = replace(defaults, **values)  # type: ignore[arg-type]
        return options


def _replication(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"replication must be a whole number, not {value!r}") from None
    if number == 0:
        return 0
    try:
        return check_replication(number)
    except InvalidArgumentError as exc:
        raise ConfigError(str(exc)) from None


def _seconds(name: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, not {value!r}") from None
    if not 0 <= seconds <= MAX_TIMEOUT:
        raise ConfigError(f"{name} must be between 0 and {MAX_TIMEOUT:g} seconds")
    return seconds
