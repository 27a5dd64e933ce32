"""plasmafs.core: the contract every plasmafs process shares.

The wire protocol (generated protobuf and gRPC modules), errors and their wire codes and
gRPC statuses, attributes, paths, value checks and sizes, credentials, tickets, secret
files, TLS and channel options, the framing of data messages and of the shared-memory
socket, the gRPC transport (chosen here, before anything loads gRPC); and, in
`plasmafs.core.runtime`, what long-running processes share. It imports
no other plasmafs package: the library, the daemons, the mount and the CLI all build on it.
"""

from plasmafs.core.grpc_transport import choose_transport

choose_transport()
