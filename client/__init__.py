"""plasmafs client library: the asyncio API and its synchronous facade.

from plasmafs.client import connect

async with await connect("127.0.0.1:7530") as fs:
    async with fs.transaction() as t:
        await t.mkdir("/data")
        await t.create("/data/hello")
    print(await fs.stat("/data/hello"))

The errors, attributes and `At` come from plasmafs.core with the package; the client,
files, transactions and admin values are loaded on first use, so that importing the
package (for its errors, say) loads no gRPC until a client is made. `PermissionError`
(EACCES) is importable by name but left out of `__all__`, so `import *` does not shadow
the builtin; `AccessDeniedError` is the same class.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from plasmafs.core.attributes import (
    Attr,
    BlockList,
    DirEntry,
    Extent,
    FileKind,
    FsStat,
    Replica,
    ReplicaState,
)
from plasmafs.core.errors import (
    AccessDeniedError,
    AuthenticationError,
    BusyError,
    ConfigError,
    ConflictError,
    ConnectionLostError,
    CorruptionError,
    DeadlockError,
    ExistsError,
    InterruptedCallError,
    InvalidArgumentError,
    IsDirectoryError,
    LockedError,
    LockLostError,
    LoopError,
    NameTooLongError,
    NoDataError,
    NoSpaceError,
    NotDirectoryError,
    NotEmptyError,
    NotFoundError,
    NotSupportedError,
    OperationNotPermittedError,
    PermissionDeniedError,
    PermissionError,
    PlasmaError,
    QuotaExceededError,
    ReadOnlyError,
    ShutdownError,
    StaleFileError,
    StorageError,
    TransactionError,
    UnavailableError,
)
from plasmafs.core.paths import At

if TYPE_CHECKING:  # what _LAZY loads, for type checkers
    from plasmafs.client.admin import (
        BalanceStatus,
        DatanodeState,
        DatanodeStatus,
        FsckBlock,
        FsckFile,
        FsckReplica,
        FsckSummary,
    )
    from plasmafs.client.callers import LocalCaller, acting_for
    from plasmafs.client.client import Client, connect
    from plasmafs.client.file_locks import FileLock, LockConflict
    from plasmafs.client.file_reader import FileReader
    from plasmafs.client.file_writer import FileWriter
    from plasmafs.client.snapshots import Snapshot, SnapshotChange
    from plasmafs.client.sync import SyncClient, connect_sync
    from plasmafs.client.transaction import Transaction

# Loaded on first use: these modules load gRPC.
_LAZY = {
    "Client": "plasmafs.client.client",
    "connect": "plasmafs.client.client",
    "SyncClient": "plasmafs.client.sync",
    "connect_sync": "plasmafs.client.sync",
    "Transaction": "plasmafs.client.transaction",
    "LocalCaller": "plasmafs.client.callers",
    "acting_for": "plasmafs.client.callers",
    "FileReader": "plasmafs.client.file_reader",
    "FileWriter": "plasmafs.client.file_writer",
    "FileLock": "plasmafs.client.file_locks",
    "LockConflict": "plasmafs.client.file_locks",
    "BalanceStatus": "plasmafs.client.admin",
    "DatanodeState": "plasmafs.client.admin",
    "DatanodeStatus": "plasmafs.client.admin",
    "FsckBlock": "plasmafs.client.admin",
    "FsckFile": "plasmafs.client.admin",
    "FsckReplica": "plasmafs.client.admin",
    "FsckSummary": "plasmafs.client.admin",
    "Snapshot": "plasmafs.client.snapshots",
    "SnapshotChange": "plasmafs.client.snapshots",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'plasmafs.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


# Every class imported from plasmafs.core above, and the lazy names.
__all__ = sorted(
    [
        name
        for name, value in list(globals().items())
        if isinstance(value, type)
        and value.__module__.startswith("plasmafs.core.")
        and name != "PermissionError"
    ]
    + list(_LAZY)
)
