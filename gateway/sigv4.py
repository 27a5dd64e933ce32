"""AWS Signature Version 4, verified: the Authorization header and presigned URLs.

Parsing and the canonical request follow AWS's definition for S3 (the path decoded
once and encoded again, not normalized; query parameters sorted; signed headers in
lowercase with their values trimmed). The signing key comes from the namenode
(`SigningKeys`), which keeps the secret; this module only compares signatures, in
constant time.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

from plasmafs.gateway.s3_errors import S3Error, access_denied

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED = "UNSIGNED-PAYLOAD"
MAX_SKEW = 15 * 60  # seconds a signed request's time may be off, as S3
MAX_PRESIGNED_EXPIRY = 7 * 24 * 3600
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_CREDENTIAL = re.compile(
    r"([^/]{1,128})/([0-9]{8})/([a-z0-9-]{1,64})/([a-z0-9]{1,16})/aws4_request"
)
_AMZ_DATE = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Signature:
    """What a request's signature claims."""

    access_key_id: str
    date: str  # YYYYMMDD of the scope
    region: str
    service: str
    amz_date: str  # YYYYMMDDTHHMMSSZ
    signed_headers: tuple[str, ...]
    signature: str
    presigned: bool
    payload_hash: str  # x-amz-content-sha256, or UNSIGNED-PAYLOAD when presigned

    @property
    def scope(self) -> str:
        """The credential scope."""
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


def query_pairs(raw_query: str) -> list[tuple[str, str]]:
    """The query's (name, value) pairs, percent-decoded ("+" stays "+", as S3)."""
    pairs = []
    for item in raw_query.split("&"):
        if not item:
            continue
        name, _, value = item.partition("=")
        pairs.append((unquote(name), unquote(value)))
    return pairs


def parse(
    headers: Mapping[str, str], query: Sequence[tuple[str, str]], now: float | None = None
) -> Signature | None:
    """The signature a request carries (None: none, an anonymous request); S3Error
    when it is malformed, expired or too far from now."""
    now = time.time() if now is None else now
    params = dict(query)
    authorization = headers.get("Authorization")
    if "X-Amz-Signature" in params or params.get("X-Amz-Algorithm"):
        if authorization:
            raise S3Error("InvalidArgument", 400, "only one auth mechanism allowed")
        return _presigned(params, now)
    if authorization is None:
        if "Signature" in params or "AWSAccessKeyId" in params:
            raise S3Error("InvalidRequest", 400, "Signature Version 2 is not supported: use V4")
        return None
    return _header(authorization, headers, now)


def _header(authorization: str, headers: Mapping[str, str], now: float) -> Signature:
    if not authorization.startswith(ALGORITHM + " "):
        if authorization.startswith("AWS "):
            raise S3Error("InvalidRequest", 400, "Signature Version 2 is not supported: use V4")
        raise S3Error("InvalidArgument", 400, "unsupported authorization type")
    fields: dict[str, str] = {}
    for part in authorization[len(ALGORITHM) + 1 :].split(","):
        name, sep, value = part.strip().partition("=")
        if sep:
            fields[name] = value
    if not {"Credential", "SignedHeaders", "Signature"} <= fields.keys():
        raise S3Error("AuthorizationHeaderMalformed", 400, "the authorization header is malformed")
    amz_date = headers.get("x-amz-date") or _from_http_date(headers.get("Date", ""))
    payload_hash = headers.get("x-amz-content-sha256")
    if payload_hash is None:
        raise S3Error(
            "InvalidRequest", 400, "Missing required header for this request: x-amz-content-sha256"
        )
    signature = _signature(
        fields["Credential"], amz_date, fields["SignedHeaders"], fields["Signature"], False,
        payload_hash,
    )  # fmt: skip
    if abs(now - _epoch(amz_date)) > MAX_SKEW:
        raise S3Error(
            "RequestTimeTooSkewed",
            403,
            "The difference between the request time and the current time is too large.",
        )
    return signature


def _presigned(params: Mapping[str, str], now: float) -> Signature:
    if params.get("X-Amz-Algorithm") != ALGORITHM:
        raise S3Error(
            "AuthorizationQueryParametersError", 400, f"X-Amz-Algorithm must be {ALGORITHM}"
        )
    missing = [
        n
        for n in ("X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders",
                  "X-Amz-Signature")
        if n not in params
    ]  # fmt: skip
    if missing:
        raise S3Error("AuthorizationQueryParametersError", 400, f"missing {', '.join(missing)}")
    try:
        expires = int(params["X-Amz-Expires"])
    except ValueError:
        expires = -1
    if not 0 < expires <= MAX_PRESIGNED_EXPIRY:
        raise access_denied(f"X-Amz-Expires must be 1 to {MAX_PRESIGNED_EXPIRY} seconds")
    signature = _signature(
        params["X-Amz-Credential"], params["X-Amz-Date"], params["X-Amz-SignedHeaders"],
        params["X-Amz-Signature"], True, params.get("X-Amz-Content-Sha256", UNSIGNED),
    )  # fmt: skip
    signed_at = _epoch(signature.amz_date)
    if now > signed_at + expires:
        raise access_denied("Request has expired")
    if signed_at > now + MAX_SKEW:
        raise access_denied("Request is not valid yet")
    return signature


def _signature(
    credential: str,
    amz_date: str,
    signed_headers: str,
    signature: str,
    presigned: bool,
    payload_hash: str,
) -> Signature:
    match = _CREDENTIAL.fullmatch(credential)
    if match is None:
        raise S3Error(
            "AuthorizationHeaderMalformed", 400, f"malformed credential {credential[:160]!r}"
        )
    if not _AMZ_DATE.fullmatch(amz_date):
        raise access_denied("AWS authentication requires a valid Date or x-amz-date header")
    if amz_date[:8] != match[2]:
        raise S3Error(
            "AuthorizationHeaderMalformed", 400, "the credential's date is not the request's"
        )
    if match[4] != "s3":
        raise S3Error("AuthorizationHeaderMalformed", 400, "the credential's service is not s3")
    names = tuple(signed_headers.split(";"))
    if "host" not in names or list(names) != sorted(names):
        raise S3Error(
            "AuthorizationHeaderMalformed", 400, "SignedHeaders must be sorted and include host"
        )
    if not re.fullmatch(r"[0-9a-f]{64}", signature):
        raise S3Error("AuthorizationHeaderMalformed", 400, "the signature is not 64 hex digits")
    return Signature(
        match[1], match[2], match[3], match[4], amz_date, names, signature, presigned,
        payload_hash,
    )  # fmt: skip


def _epoch(amz_date: str) -> float:
    return float(calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")))


def _from_http_date(value: str) -> str:
    try:
        parsed = time.strptime(value, "%a, %d %b %Y %H:%M:%S GMT")
    except ValueError:
        return ""
    return time.strftime("%Y%m%dT%H%M%SZ", parsed)


def canonical_request(
    method: str,
    raw_path: str,
    query: Sequence[tuple[str, str]],
    headers: Mapping[str, str],
    signature: Signature,
    *,
    as_sent: bool = False,
) -> str:
    """SigV4's canonical request of an S3 request (`as_sent`: with the path as the
    request has it, rather than encoded again)."""
    path = raw_path if as_sent else quote(unquote(raw_path), safe="/~")
    pairs = sorted(
        (quote(k, safe="~"), quote(v, safe="~"))
        for k, v in query
        if not (signature.presigned and k == "X-Amz-Signature")
    )
    canonical_query = "&".join(f"{k}={v}" for k, v in pairs)
    lines = []
    for name in signature.signed_headers:
        values = headers.getall(name) if hasattr(headers, "getall") else [headers.get(name)]
        if values == [None] or not values:
            raise S3Error(
                "AccessDenied", 403, f"There were headers present in the request which were "
                f"not signed, or a signed header is missing: {name}"
            )  # fmt: skip
        joined = ",".join(_SPACES.sub(" ", str(v).strip()) for v in values)
        lines.append(f"{name}:{joined}\n")
    return "\n".join(
        [method, path, canonical_query, "".join(lines), ";".join(signature.signed_headers),
         signature.payload_hash]
    )  # fmt: skip


def check_amz_headers_signed(headers: Mapping[str, str], signature: Signature) -> None:
    """AccessDenied if a request signed in its header carries an x-amz-* header its
    signature does not cover (so that nobody can add metadata or change a checksum
    of a signed request on its way)."""
    if signature.presigned:
        return
    signed = set(signature.signed_headers)
    unsigned = sorted({n.lower() for n in headers if n.lower().startswith("x-amz-")} - signed)
    if unsigned:
        raise access_denied(
            "There were headers present in the request which were not signed: "
            + ", ".join(unsigned)
        )


def string_to_sign(signature: Signature, canonical: str) -> str:
    """What the signature is the HMAC of."""
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest()
    return f"{ALGORITHM}\n{signature.amz_date}\n{signature.scope}\n{digest}"


def sign(key: bytes, text: str) -> str:
    """HMAC-SHA256 of `text` with `key`, in hex."""
    return hmac.new(key, text.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def verify(key: bytes, text: str, claimed: str) -> None:
    """SignatureDoesNotMatch unless `claimed` is the signature of `text`."""
    if not hmac.compare_digest(sign(key, text), claimed):
        raise S3Error(
            "SignatureDoesNotMatch",
            403,
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.",
        )
