"""The plasmafs datanode: block ranges of one preallocated volume served over gRPC
(arrives with the datanode issue)."""
