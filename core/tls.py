"""TLS for gRPC channels and servers: the PEM files a process is given, read once, and
the channels and ports made with them (plaintext when no TLS is configured).

A client verifies the server against the cluster CA; a process that has a certificate
of its own (a datanode) also offers it, for servers that require client certificates
(the namenode's registry port, where datanodes are known by their certificate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc

from plasmafs.core.errors import ConfigError


def _read(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc.strerror}") from exc
    if b"-----BEGIN" not in data:
        raise ConfigError(f"the {what} {path} is not a PEM file")
    return data


@dataclass(frozen=True, slots=True)
class ChannelTLS:
    """What a caller needs to speak TLS: the CA to verify servers with, and optionally
    its own certificate and key."""

    ca: bytes
    cert: bytes | None = None
    key: bytes | None = None

    @classmethod
    def from_files(cls, ca: Path, cert: Path | None = None, key: Path | None = None) -> ChannelTLS:
        """Read the PEM files (ConfigError when one cannot be read)."""
        if (cert is None) != (key is None):
            raise ConfigError("a certificate needs its key, and a key its certificate")
        return cls(
            _read(ca, "CA certificate"),
            _read(cert, "certificate") if cert else None,
            _read(key, "private key") if key else None,
        )

    def credentials(self) -> grpc.ChannelCredentials:
        """gRPC channel credentials."""
        return grpc.ssl_channel_credentials(self.ca, self.key, self.cert)


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """A server's certificate and key, and the CA its clients' certificates are checked
    against when it requires them."""

    cert: bytes
    key: bytes
    ca: bytes | None = None
    require_client_certificates: bool = False

    @classmethod
    def from_files(cls, cert: Path, key: Path, ca: Path | None = None) -> ServerTLS:
        """Read the PEM files (ConfigError when one cannot be read)."""
        return cls(
            _read(cert, "certificate"),
            _read(key, "private key"),
            _read(ca, "CA certificate") if ca else None,
        )

    def requiring_client_certificates(self) -> ServerTLS:
        """The same certificate on a port that admits only callers presenting a
        certificate signed by `ca` (ConfigError without a CA)."""
        if self.ca is None:
            raise ConfigError("a port that checks its callers' certificates needs tls_ca")
        return replace(self, require_client_certificates=True)

    def credentials(self) -> grpc.ServerCredentials:
        """gRPC server credentials. gRPC Python either requires client certificates or
        never asks for them, so a port that must know its callers by certificate is a
        port of its own."""
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)],
            root_certificates=self.ca,
            require_client_auth=self.require_client_certificates,
        )


def open_channel(
    address: str, options: list[tuple[str, Any]], tls: ChannelTLS | None
) -> grpc.aio.Channel:
    """An asyncio channel to `address`: TLS when `tls` is given, else plaintext."""
    if tls is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, tls.credentials(), options=options)


def add_port(server: grpc.aio.Server, listen: str, tls: ServerTLS | None) -> int:
    """Listen on `listen` (TLS when `tls` is given); the bound port, 0 on failure."""
    if tls is None:
        return server.add_insecure_port(listen)
    return server.add_secure_port(listen, tls.credentials())
