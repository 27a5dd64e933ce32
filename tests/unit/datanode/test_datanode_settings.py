"""The datanode's replication, scrub and metrics settings: defaults, sizes, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from plasmafs.datanode.settings import DatanodeSettings


def settings(**values: object) -> DatanodeSettings:
    return DatanodeSettings(volume=Path("/nonexistent"), **values)  # type: ignore[arg-type]


def test_defaults() -> None:
    s = settings()
    assert s.replication_streams == 2
    assert s.replication_bandwidth == 0  # unlimited
    assert s.scrub_bandwidth == 16 * 1024**2
    assert s.scrub_pause == 3600.0
    assert s.metrics_listen == ""


def test_direct_io_is_the_default_and_required_only_when_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert (settings().sync, settings().direct_required) == ("direct", False)
    assert settings(sync="direct").direct_required
    monkeypatch.setenv("PFS_DATANODE_SYNC", "fdatasync")
    assert (settings().sync, settings().direct_required) == ("fdatasync", True)


def test_bandwidths_take_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PFS_DATANODE_REPLICATION_BANDWIDTH", "100M")
    monkeypatch.setenv("PFS_DATANODE_SCRUB_BANDWIDTH", "0")
    monkeypatch.setenv("PFS_DATANODE_SCRUB_PAUSE", "0.5")
    monkeypatch.setenv("PFS_DATANODE_METRICS_LISTEN", "127.0.0.1:0")
    s = settings()
    assert s.replication_bandwidth == 100 * 1024**2
    assert s.scrub_bandwidth == 0  # no scrub
    assert s.scrub_pause == 0.5
    assert s.metrics_listen == "127.0.0.1:0"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("replication_streams", 0, "greater than or equal to 1"),
        ("replication_streams", 65, "less than or equal to 64"),
        ("replication_bandwidth", "fast", "not a size"),
        ("scrub_bandwidth", "-1M", "not a size"),
        ("scrub_pause", -1, "greater than or equal to 0"),
        ("metrics_listen", "9100", "metrics_listen must be host:port"),
        ("metrics_listen", "localhost:http", "metrics_listen must be host:port"),
    ],
)
def test_bad_values_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        settings(**{field: value})
