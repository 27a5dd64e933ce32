"""The plasmafs namenode: the namespace in PostgreSQL, served over one multiplexed gRPC stream
per client connection."""

import plasmafs.core  # noqa: F401  (chooses gRPC's transport before anything loads gRPC)
