"""The key AWS Signature Version 4 signs a day's requests with, derived from a secret.

The namenode derives it for the S3 gateway, which never sees the secret itself: a
signing key is good for one date, region and service only.
"""

from __future__ import annotations

import hashlib
import hmac


def signing_key(secret: str, date: str, region: str, service: str = "s3") -> bytes:
    """kSigning of SigV4: HMAC-SHA256 chained over `date` (YYYYMMDD), `region`,
    `service` and "aws4_request", starting from "AWS4" + `secret`."""
    key = ("AWS4" + secret).encode("utf-8")
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    return key
