"""What the plasmafs daemons share: settings from the environment plus a TOML file,
configuration errors in one line, and the run loop with its exit codes.

It lives here because the daemons may import from plasmafs.client and not from each
other; applications never need it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import uvloop
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, TomlConfigSettingsSource

from plasmafs.client.errors import PlasmaError

S = TypeVar("S", bound=BaseSettings)
EXIT_FAILED = 1
EXIT_CONFIG = 2


class DaemonSettings(BaseSettings):
    """Settings read from explicit values, then the environment, then the TOML file the
    variable `config_variable` names (PFS_<ROLE>_CONFIG)."""

    config_variable: ClassVar[str] = ""

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
    except (ValidationError, ValueError, FileNotFoundError) as exc:
        print(f"{prog}: bad configuration: {describe(exc)}", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(
        level=str(getattr(settings, "log_level", "INFO")).upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        uvloop.run(serve(settings))
    except PlasmaError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    return 0
