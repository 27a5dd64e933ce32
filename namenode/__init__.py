"""The plasmafs namenode: the namespace in PostgreSQL, served over one multiplexed gRPC stream
per client connection."""
