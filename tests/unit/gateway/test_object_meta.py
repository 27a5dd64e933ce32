"""A multipart object's part sizes as the attribute keeps them: runs, each part's bytes
found from them, and a limit past which part numbers are refused rather than wrong."""

from __future__ import annotations

import pytest

from plasmafs.gateway.object_meta import MAX_PART_RUNS, ObjectMeta, part_runs
from plasmafs.gateway.s3_errors import S3Error


def test_parts_are_found_from_runs_of_sizes() -> None:
    sizes = [5, 5, 5, 8, 8, 3]
    meta = ObjectMeta(parts=part_runs(sizes))
    assert meta.parts == [(5, 3), (8, 2), (3, 1)] and meta.parts_count == 6
    first = 0
    for number, size in enumerate(sizes, start=1):
        assert meta.part_range(number) == (first, first + size)
        first += size
    assert meta.part_range(7) is None
    again = ObjectMeta.from_bytes(meta.to_bytes())
    assert again.parts == meta.parts


def test_too_many_runs_refuse_part_numbers() -> None:
    meta = ObjectMeta(parts=part_runs(list(range(1, MAX_PART_RUNS + 2))))
    assert meta.parts_count == MAX_PART_RUNS + 1
    with pytest.raises(S3Error) as refused:
        meta.part_range(1)
    assert refused.value.code == "NotImplemented"
    assert len(meta.to_bytes()) < 1000
