"""What the plasmafs daemons share: settings from the environment plus a TOML file,
configuration errors in one line, and the run loop with its exit codes.

Needs the `server` extra (pydantic-settings); applications never need it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import uvloop
from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, TomlConfigSettingsSource

from plasmafs.core.errors import PlasmaError
from plasmafs.core.runtime.gc_tuning import tune_for_daemon
from plasmafs.core.tls import ChannelTLS, ServerTLS

S = TypeVar("S", bound=BaseSettings)
EXIT_FAILED = 1
EXIT_CONFIG = 2


class DaemonSettings(BaseSettings):
    """Settings read from explicit values, then the environment, then the TOML file the
    variable `config_variable` names (PFS_<ROLE>_CONFIG), and the TLS files every
    daemon may be given."""

    config_variable: ClassVar[str] = ""

    tls_cert: Path | None = Field(
        default=None, description="PEM certificate of this daemon (with tls_key: serve TLS)"
    )
    tls_key: Path | None = Field(default=None, description="PEM private key of tls_cert")
    tls_ca: Path | None = Field(
        default=None, description="PEM CA certificate the daemons it calls are verified with"
    )
    insecure: bool = Field(
        default=False,
        description="run without TLS and without authentication, every caller acting as "
        "the superuser: only for a trusted single host (benchmarks, experiments)",
    )

    @model_validator(mode="after")
    def _certificate_with_key(self) -> DaemonSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        if self.insecure and (self.tls_cert or self.tls_ca):
            raise ValueError("insecure is for running without TLS; remove it or the tls_* files")
        return self

    def check_security(self) -> None:
        """ValueError unless this daemon is secure (certificate, key and CA) or was told
        explicitly to run insecure: security is on unless switched off."""
        if self.insecure:
            return
        missing = [n for n in ("tls_cert", "tls_key", "tls_ca") if getattr(self, n) is None]
        if missing:
            raise ValueError(
                f"no {', '.join(missing)}: a daemon serves TLS with a certificate of the "
                "cluster CA (`pfs local up` makes them; deploy/SECURITY.md tells how), or "
                "runs with insecure = true on a trusted host"
            )

    def server_tls(self) -> ServerTLS | None:
        """This daemon's server credentials, or None to serve plaintext."""
        if self.tls_cert is None or self.tls_key is None:
            return None
        return ServerTLS.from_files(self.tls_cert, self.tls_key, self.tls_ca)

    def channel_tls(self) -> ChannelTLS | None:
        """How this daemon calls others: TLS verified with tls_ca (presenting its own
        certificate), or None for plaintext."""
        if self.tls_ca is None:
            return None
        return ChannelTLS.from_files(self.tls_ca, self.tls_cert, self.tls_key)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config = os.environ.get(cls.config_variable) if cls.config_variable else None
        if config:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config)))
        return tuple(sources)


def describe(exc: Exception) -> str:
    """A configuration error as one line: `field: problem; field: problem`."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__


def run_daemon(
    prog: str,
    make_settings: Callable[[], S],
    serve: Callable[[S], Coroutine[Any, Any, None]],
) -> int:
    """Load settings, set up logging, serve until stopped; return the exit status."""
    try:
        settings = make_settings()
        if isinstance(settings, DaemonSettings):
            settings.check_security()
    except (ValidationError, ValueError, FileNotFoundError) as exc:
        print(f"{prog}: bad configuration: {describe(exc)}", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(
        level=str(getattr(settings, "log_level", "INFO")).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    tune_for_daemon()
    try:
        uvloop.run(serve(settings))
    except PlasmaError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    return 0
