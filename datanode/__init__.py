"""The plasmafs datanode: block ranges of one preallocated volume served over gRPC and
shared memory, copies for re-replication pulled from other datanodes, a background
scrub, and heartbeats to the namenode."""

import plasmafs.core  # noqa: F401  (chooses gRPC's transport before anything loads gRPC)
