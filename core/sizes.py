"""Sizes as people write them: 123, 64K, 1M, 20G (powers of 1024)."""

from __future__ import annotations

_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str | int) -> int:
    """Bytes from 123, '64K', '1M', '1MiB', '20G'; ValueError for anything else."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"negative size {text}")
        return text
    value = text.strip().upper()
    for suffix in ("IB", "B"):
        if value.endswith(suffix) and len(value) > len(suffix):
            value = value[: -len(suffix)]
            break
    factor = _UNITS.get(value[-1:], 1)
    digits = value[:-1] if value[-1:] in _UNITS else value
    if not digits.isdigit():
        raise ValueError(f"not a size: {text!r} (e.g. 1048576, 64K, 1M, 20G)")
    return int(digits) * factor
