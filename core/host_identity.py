"""Which host a process runs on, as clients and datanodes compare it to decide that a
datanode is local (its blocks readable through shared memory).

The host name alone is not enough: processes in separate network namespaces share a
kernel and often a host name and file system, yet are separate hosts to the cluster
(containers, the multi-host test harness), and a socket path that happens to exist
must not make them "local". So the identity is the host name with this process's
network namespace; PFS_HOST_IDENTITY (or a datanode's host_identity setting)
overrides it.
"""

from __future__ import annotations

import os
import socket


def host_identity() -> str:
    """This process's host: PFS_HOST_IDENTITY, else host name and network namespace."""
    explicit = os.environ.get("PFS_HOST_IDENTITY")
    if explicit:
        return explicit
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:  # no /proc (not Linux): the host name alone
        return socket.gethostname()
    return f"{socket.gethostname()}/netns:{netns}"
