"""The XML bodies of S3's replies."""

from __future__ import annotations

import time
from collections.abc import Iterable
from urllib.parse import quote
from xml.sax.saxutils import escape

from plasmafs.core.attributes import Attr

NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
HEADER = '<?xml version="1.0" encoding="UTF-8"?>\n'


def iso_time(ns: int) -> str:
    """An S3 timestamp (ISO 8601 with milliseconds, UTC)."""
    seconds, rest = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 1_000_000:03d}Z"


def http_time(ns: int) -> str:
    """An HTTP date (Last-Modified)."""
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(ns // 1_000_000_000))


def element(name: str, value: str | int | bool) -> str:
    """<name>value</name>, escaped."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    return f"<{name}>{escape(str(value))}</{name}>"


def owner(name: str, tag: str = "Owner") -> str:
    """An Owner element (or another `tag` of that shape, Initiator) of the user `name`."""
    return f"<{tag}>{element('ID', name)}{element('DisplayName', name)}</{tag}>"


def list_buckets(
    buckets: Iterable[tuple[str, Attr]], user: str, token: str | None, prefix: str
) -> bytes:
    """ListAllMyBucketsResult (`token`: where the next page starts, if there is one)."""
    items = "".join(
        f"<Bucket>{element('Name', name)}{element('CreationDate', iso_time(a.mtime_ns))}</Bucket>"
        for name, a in buckets
    )
    more = element("ContinuationToken", token) if token is not None else ""
    asked = element("Prefix", prefix) if prefix else ""
    return (
        f'{HEADER}<ListAllMyBucketsResult xmlns="{NAMESPACE}">{owner(user)}'
        f"<Buckets>{items}</Buckets>{more}{asked}</ListAllMyBucketsResult>"
    ).encode()


def encoded(value: str, url: bool) -> str:
    """A key as the listing's encoding-type asks (url: percent-encoded)."""
    return quote(value, safe="/") if url else value


def location(region: str) -> bytes:
    """LocationConstraint (empty for us-east-1, as S3)."""
    inner = "" if region == "us-east-1" else escape(region)
    return f'{HEADER}<LocationConstraint xmlns="{NAMESPACE}">{inner}</LocationConstraint>'.encode()


def result(root: str, inner: str) -> bytes:
    """A reply of one root element holding `inner`."""
    return f'{HEADER}<{root} xmlns="{NAMESPACE}">{inner}</{root}>'.encode()
