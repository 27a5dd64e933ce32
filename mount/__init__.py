"""`pfs mount`: plasmafs as a FUSE 3 file system, through pyfuse3 on the asyncio client.

The kernel names inodes; the namenode's inode numbers are used as they are (the root
is 1 on both sides), so the mount keeps no table of its own and asks the namenode by
directory inode and name (`plasmafs.client.At`). Every request runs as the user of the
mount's credential, and the namenode enforces the permissions.
"""

import plasmafs.core  # noqa: F401  (chooses gRPC's transport before anything loads gRPC)
