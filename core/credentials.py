"""Bearer credentials: the token format the client and the namenode share, token files,
and which token a client process uses.

A token is `pfs1.<credential_id>.<secret>`: the id selects the namenode's record and the
secret is 32 random bytes in unpadded base64url. The namenode keeps only the secret's
SHA-256. A process finds its token file through --token-file, then PFS_TOKEN_FILE, then
the `token_file` the local cluster recorded in client.json. Loads no gRPC.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from plasmafs.core.errors import ConfigError
from plasmafs.core.secret_files import read_private, write_private

TOKEN_VERSION = "pfs1"
SECRET_BYTES = 32
TOKEN_FILE_ENV = "PFS_TOKEN_FILE"
MAX_CREDENTIAL_ID = 2**63 - 1  # a PostgreSQL bigint

# Decimal without leading zeros, and exactly the 43 characters 32 bytes encode to, so
# each credential has one spelling.
_TOKEN = re.compile(r"pfs1\.([1-9][0-9]{0,18})\.([A-Za-z0-9_-]{43})")


@dataclass(frozen=True, slots=True)
class Token:
    """A parsed token; the secret stays out of repr() and so out of logs."""

    credential_id: int
    secret: bytes = field(repr=False)


def new_secret() -> bytes:
    """A fresh random secret for a credential."""
    return secrets.token_bytes(SECRET_BYTES)


def secret_digest(secret: bytes) -> bytes:
    """What the namenode stores and compares for a secret: its SHA-256."""
    return hashlib.sha256(secret).digest()


def format_token(credential_id: int, secret: bytes) -> str:
    """The token of credential `credential_id` with `secret`."""
    if not 1 <= credential_id <= MAX_CREDENTIAL_ID or len(secret) != SECRET_BYTES:
        raise ValueError("a token needs a positive bigint id and a 32-byte secret")
    encoded = base64.urlsafe_b64encode(secret).rstrip(b"=").decode("ascii")
    return f"{TOKEN_VERSION}.{credential_id}.{encoded}"


def parse_token(text: str) -> Token | None:
    """The credential id and secret of a well-formed token, else None. Strict: no
    surrounding blanks, no padding, and only the canonical spelling is accepted."""
    match = _TOKEN.fullmatch(text)
    if match is None:
        return None
    credential_id = int(match[1])
    secret = base64.urlsafe_b64decode(match[2] + "=")
    if credential_id > MAX_CREDENTIAL_ID or format_token(credential_id, secret) != text:
        return None  # out of range, or unused low bits set in the last character
    return Token(credential_id, secret)


def read_token_file(path: Path) -> str:
    """The token stored in `path` (one line). ConfigError if group or others have any
    access to the file, or if it does not hold exactly one well-formed token."""
    data = read_private(path, "token file")
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        text = ""
    if parse_token(text) is None:
        # Never quote the contents: they may be a secret saved in the wrong place.
        raise ConfigError(f"token file {path} does not hold a plasmafs token")
    return text


def write_token_file(path: Path, token: str, *, replace: bool = True) -> None:
    """Store `token` in `path`, readable by its owner only (with `replace` False, an
    existing file is kept: FileExistsError)."""
    if parse_token(token) is None:
        raise ValueError("not a plasmafs token")
    write_private(path, token.encode("ascii") + b"\n", replace=replace)


def find_token(explicit: Path | None = None, recorded: Path | None = None) -> str | None:
    """The token this process uses: from `explicit` (--token-file), else from the file
    PFS_TOKEN_FILE names, else from `recorded` (client.json's `token_file`, which the
    the client reads from its configuration); None when none is given."""
    from_env = os.environ.get(TOKEN_FILE_ENV)
    for path in (explicit, Path(from_env).expanduser() if from_env else None, recorded):
        if path is not None:
            return read_token_file(path)
    return None
