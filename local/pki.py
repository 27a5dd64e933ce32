"""A cluster certificate authority and the certificates it issues, made with the
`cryptography` package: what `pfs local up` needs so that a local cluster speaks TLS
with no step by hand. Production clusters may use their own CA instead; the daemons
only read PEM files.

Keys are ECDSA P-256 (small and fast to handshake) and are written with mode 0600;
the CA certificate, which clients need to verify servers, is world-readable.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from plasmafs.core.errors import ConfigError
from plasmafs.core.secret_files import write_private

CA_YEARS = 10
CERT_DAYS = 825  # the longest lifetime common TLS clients accept for leaf certificates
_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class Authority:
    """A CA: its certificate and key in memory, and where they are stored."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    files: CertificateFiles


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "plasmafs"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_public(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o644)
    os.replace(tmp, path)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def create_authority(directory: Path, name: str = "plasmafs cluster CA") -> Authority:
    """A new CA in `directory` (ca.pem, ca.key); refuses to replace an existing one."""
    files = CertificateFiles(directory / "ca.pem", directory / "ca.key")
    if files.cert.exists() or files.key.exists():
        raise ConfigError(f"a CA exists in {directory} already")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = _name(name)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365 * CA_YEARS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_KEY_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    write_private(files.key, _pem_key(key))
    _write_public(files.cert, certificate.public_bytes(serialization.Encoding.PEM))
    return Authority(certificate, key, files)


def load_authority(directory: Path) -> Authority:
    """The CA stored in `directory` by create_authority."""
    files = CertificateFiles(directory / "ca.pem", directory / "ca.key")
    try:
        certificate = x509.load_pem_x509_certificate(files.cert.read_bytes())
        key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the CA in {directory}: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"the CA key in {directory} is not an EC key")
    return Authority(certificate, key, files)


def issue_certificate(
    ca: Authority,
    directory: Path,
    stem: str,
    common_name: str,
    *,
    hosts: list[str] | None = None,
    server: bool = True,
    client: bool = False,
) -> CertificateFiles:
    """A certificate signed by `ca` for `common_name`, valid for the DNS names and IP
    addresses in `hosts` (a server's) and usable as a TLS server and/or client
    certificate; written as STEM.pem and STEM.key in `directory`."""
    if not (server or client):
        raise ConfigError("a certificate must be usable as a server or a client one")
    names: list[x509.GeneralName] = []
    for host in hosts or []:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    if server and not names:
        raise ConfigError("a server certificate needs at least one host name or address")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(
            min(now + datetime.timedelta(days=CERT_DAYS), ca.certificate.not_valid_after_utc)
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    certificate = builder.sign(ca.key, hashes.SHA256())
    files = CertificateFiles(directory / f"{stem}.pem", directory / f"{stem}.key")
    write_private(files.key, _pem_key(key))
    _write_public(files.cert, certificate.public_bytes(serialization.Encoding.PEM))
    return files
