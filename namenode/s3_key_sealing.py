"""New S3 key pairs, and their secrets sealed for the database.

A secret is sealed with AES-256-GCM under the key in the namenode's `s3_secret_file`
(32 random bytes, the same on every namenode of a cluster), with the access key id and
the uid as associated data, so a sealed secret moved to another key or user does not
open.
"""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from plasmafs.core.errors import ConfigError
from plasmafs.core.secret_files import read_private

KEY_BYTES = 32
NONCE_BYTES = 12
ACCESS_KEY_PREFIX = "PFS"


def new_access_key_id() -> str:
    """20 characters as AWS's: "PFS" and 17 of base32 (85 random bits)."""
    return ACCESS_KEY_PREFIX + base64.b32encode(secrets.token_bytes(11)).decode()[:17]


def new_secret() -> str:
    """40 characters of URL-safe base64 (240 random bits), as long as AWS's."""
    return secrets.token_urlsafe(30)


class Sealer:
    """Seals and opens secrets with one key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ConfigError(f"the S3 sealing key must be {KEY_BYTES} bytes, not {len(key)}")
        self._aead = AESGCM(key)

    @classmethod
    def from_file(cls, path: Path) -> Sealer:
        """The sealer of the key in `path` (ConfigError if it is missing, readable by
        others, or not 32 bytes)."""
        return cls(read_private(path, "S3 sealing key (s3_secret_file)"))

    def seal(self, secret: str, access_key_id: str, uid: int) -> bytes:
        """The nonce and the ciphertext of `secret`."""
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, secret.encode(), _bound(access_key_id, uid))

    def open(self, sealed: bytes, access_key_id: str, uid: int) -> str:
        """The secret sealed in `sealed`; ConfigError if this key did not seal it."""
        try:
            plain = self._aead.decrypt(
                sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _bound(access_key_id, uid)
            )
        except InvalidTag:
            raise ConfigError(
                f"S3 key {access_key_id} was sealed with another s3_secret_file"
            ) from None
        return plain.decode()


def _bound(access_key_id: str, uid: int) -> bytes:
    return f"{access_key_id}:{uid}".encode()
