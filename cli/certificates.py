"""`pfs admin ca init DIR` and `pfs admin cert issue NAME ...`: the certificates of a
cluster of several hosts, without a cluster running (no namenode is asked). The CA's
key stays in DIR (mode 0600): keep it off the cluster's hosts once the certificates
are made. `pfs local up` makes its own CA and certificates for one host."""

from __future__ import annotations

import argparse
from pathlib import Path

from plasmafs.core.errors import ConfigError


def cmd_certificates(args: argparse.Namespace) -> int:
    """Run `pfs admin ca ...` or `pfs admin cert ...`; return the exit status."""
    try:
        from plasmafs.local import pki
    except ImportError as exc:
        raise ConfigError(
            f"pfs admin {args.admin_command} needs the cryptography package "
            f"({exc.name} missing): pip install 'plasmafs[local]'"
        ) from None
    if args.admin_command == "ca":
        ca = pki.create_authority(args.directory)
        print(f"CA certificate: {ca.files.cert} (every daemon and client trusts it)")
        print(f"CA key:         {ca.files.key} (mode 0600; keep it offline)")
        return 0
    if not args.hosts and not args.client_only:
        raise ConfigError(
            "a server certificate needs --host (each name or address clients use for it)"
        )
    ca = pki.load_authority(args.ca)
    files = pki.issue_certificate(
        ca,
        args.out,
        args.name,
        args.name,
        hosts=args.hosts,
        server=not args.client_only,
        client=args.client or args.client_only,
    )
    print(f"certificate: {files.cert}")
    print(f"key:         {files.key} (mode 0600)")
    return 0


def add_parsers(actions: argparse._SubParsersAction) -> None:
    """`ca init DIR` and `cert issue NAME` under `pfs admin`."""
    p = actions.add_parser("ca", help="make the cluster's certificate authority: ca init DIR")
    p.add_argument("ca_action", choices=["init"])
    p.add_argument("directory", type=Path, metavar="DIR")
    p = actions.add_parser(
        "cert",
        help="issue a daemon's certificate from the CA: cert issue NAME --ca DIR --host H",
    )
    p.add_argument("cert_action", choices=["issue"])
    p.add_argument("name", metavar="NAME", help="its common name (a datanode's principal)")
    p.add_argument("--ca", type=Path, required=True, metavar="DIR", help="where ca init made it")
    p.add_argument("--out", type=Path, default=Path(), metavar="DIR", help="default: here")
    p.add_argument(
        "--host",
        dest="hosts",
        action="append",
        default=[],
        metavar="H",
        help="a DNS name or IP address it is reached at (repeat for each)",
    )
    p.add_argument(
        "--client", action="store_true", help="usable as a client certificate too (datanodes)"
    )
    p.add_argument("--client-only", action="store_true", help="a client certificate only")
