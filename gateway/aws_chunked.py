"""Bodies in aws-chunked encoding (Content-Encoding: aws-chunked), as the SDKs stream
uploads: chunks of `hex-size[;chunk-signature=SIG]\\r\\n DATA \\r\\n`, a last chunk of
size 0, then optional trailers (`name:value\\r\\n`, a checksum, signed by
x-amz-trailer-signature when the payload is signed) and an empty line.

Signed chunks chain: each chunk's signature covers the previous one's, starting with
the request's own; a wrong one ends the upload (SignatureDoesNotMatch) before anything
is committed.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

from aiohttp import StreamReader

from plasmafs.gateway.s3_errors import S3Error
from plasmafs.gateway.sigv4 import EMPTY_SHA256, Signature, verify

SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
STREAMING = (SIGNED, SIGNED_TRAILER, UNSIGNED_TRAILER)
MAX_CHUNK = 64 * 1024 * 1024
MAX_LINE = 4096


def _incomplete() -> S3Error:
    return S3Error("IncompleteBody", 400, "You did not provide the number of bytes specified")


class ChunkedBody:
    """The decoded data of an aws-chunked body, and its trailers once read."""

    def __init__(self, stream: StreamReader, signature: Signature, key: bytes | None) -> None:
        self._stream = stream
        self._signature = signature
        self._key = key if signature.payload_hash in (SIGNED, SIGNED_TRAILER) else None
        self._previous = signature.signature
        self.trailers: dict[str, str] = {}

    async def _line(self) -> bytes:
        try:
            line = await self._stream.readuntil(b"\n")
        except ValueError:
            raise S3Error("InvalidChunkSizeError", 400, "a chunk header is too long") from None
        except Exception:
            raise _incomplete() from None
        if not line.endswith(b"\n") or len(line) > MAX_LINE:
            raise _incomplete()
        return line.rstrip(b"\r\n")

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.chunks()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The data, chunk by chunk (a chunk is read whole: at most 64 MiB)."""
        while True:
            header = (await self._line()).decode("ascii", "replace")
            size_text, _, extension = header.partition(";")
            try:
                size = int(size_text, 16)
            except ValueError:
                raise S3Error("InvalidChunkSizeError", 400, "a chunk size is not hex") from None
            if not 0 <= size <= MAX_CHUNK:
                raise S3Error("InvalidChunkSizeError", 400, "a chunk is too large")
            data = await self._read(size)
            self._check_chunk(extension, data)
            if size == 0:
                await self._read_trailers()
                return
            if await self._line() != b"":
                raise S3Error("IncompleteBody", 400, "a chunk does not end with CRLF")
            yield data

    async def _read(self, size: int) -> bytes:
        try:
            return await self._stream.readexactly(size)
        except Exception:
            raise _incomplete() from None

    def _check_chunk(self, extension: str, data: bytes) -> None:
        if self._key is None:
            return
        name, _, claimed = extension.partition("=")
        if name.strip() != "chunk-signature":
            raise S3Error("SignatureDoesNotMatch", 403, "a chunk carries no signature")
        s = self._signature
        text = "\n".join(
            ["AWS4-HMAC-SHA256-PAYLOAD", s.amz_date, s.scope, self._previous, EMPTY_SHA256,
             hashlib.sha256(data).hexdigest()]
        )  # fmt: skip
        verify(self._key, text, claimed.strip())
        self._previous = claimed.strip()

    async def _read_trailers(self) -> None:
        canonical = []
        trailer_signature = None
        while True:
            line = (await self._line()).decode("utf-8", "replace")
            if not line:
                break
            name, sep, value = line.partition(":")
            if not sep:
                raise S3Error("MalformedTrailerError", 400, "a trailer line has no ':'")
            name, value = name.strip().lower(), value.strip()
            if name == "x-amz-trailer-signature":
                trailer_signature = value
            else:
                self.trailers[name] = value
                canonical.append(f"{name}:{value}\n")
        if self._key is not None and self._signature.payload_hash == SIGNED_TRAILER:
            if trailer_signature is None:
                raise S3Error("SignatureDoesNotMatch", 403, "the trailer carries no signature")
            s = self._signature
            digest = hashlib.sha256("".join(canonical).encode()).hexdigest()
            text = "\n".join(
                ["AWS4-HMAC-SHA256-TRAILER", s.amz_date, s.scope, self._previous, digest]
            )
            verify(self._key, text, trailer_signature)
