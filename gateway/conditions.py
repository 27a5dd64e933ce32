"""Conditional requests (If-Match, If-None-Match, If-Modified-Since,
If-Unmodified-Since) and Range headers, as S3 answers them."""

from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping

from plasmafs.gateway.s3_errors import S3Error

_RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)")


class NotModified(Exception):
    """304: the reply is headers only; `condition` names the header that said so."""

    def __init__(self, condition: str) -> None:
        super().__init__(condition)
        self.condition = condition


def _http_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None  # an unreadable date is ignored, as HTTP says


def _matches(header: str, etag: str) -> bool:
    tags = [t.strip() for t in header.split(",")]
    bare = etag.strip('"')
    return "*" in tags or any(t.strip('"') == bare for t in tags)


def check_conditions(headers: Mapping[str, str], etag: str, mtime_ns: int, *, read: bool) -> None:
    """Raise PreconditionFailed (412) or NotModified (304, for a read) as the request's
    conditions on `etag` and the modification time decide."""
    modified = mtime_ns // 1_000_000_000
    if_match = headers.get("If-Match")
    if if_match is not None:
        if not _matches(if_match, etag):
            raise precondition_failed("If-Match")
    else:
        since = _http_seconds(headers.get("If-Unmodified-Since"))
        if since is not None and modified > since:
            raise precondition_failed("If-Unmodified-Since")
    if_none_match = headers.get("If-None-Match")
    if if_none_match is not None:
        if _matches(if_none_match, etag):
            if read:
                raise NotModified("If-None-Match")
            raise precondition_failed("If-None-Match")
    elif read:
        since = _http_seconds(headers.get("If-Modified-Since"))
        if since is not None and modified <= since:
            raise NotModified("If-Modified-Since")


def precondition_failed(condition: str) -> S3Error:
    """412: the condition named did not hold."""
    return S3Error(
        "PreconditionFailed",
        412,
        "At least one of the pre-conditions you specified did not hold",
        Condition=condition,
    )


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The (first, end) of the bytes a Range header asks for, None for the whole
    object (no header, one S3 ignores, or several ranges); InvalidRange when it cannot
    be satisfied."""
    if header is None:
        return None
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        return None
    first_text, last_text = match.groups()
    if not first_text:
        if not last_text:
            return None
        length = int(last_text)
        if length == 0:
            raise _unsatisfiable(size)
        return max(0, size - length), size
    first = int(first_text)
    end = size if not last_text else min(size, int(last_text) + 1)
    if last_text and int(last_text) < first:
        return None
    if first >= size:
        raise _unsatisfiable(size)
    return first, end


def _unsatisfiable(size: int) -> S3Error:
    return S3Error(
        "InvalidRange", 416, "The requested range is not satisfiable", ActualObjectSize=str(size)
    )
