"""plasmafs client library: the asyncio API, its synchronous facade, and the pfs CLI.

from plasmafs.client import connect

async with await connect("127.0.0.1:7530") as fs:
    async with fs.transaction() as t:
        await t.mkdir("/data")
        await t.create("/data/hello")
    print(await fs.stat("/data/hello"))

Names are loaded on first use: importing the package (for its errors, say) loads no
gRPC until a client is made. `PermissionError` (EACCES) is importable by name but left
out of `__all__`, so `import *` does not shadow the builtin; `AccessDeniedError` is the
same class.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plasmafs.client.admin import (
        DatanodeState,
        DatanodeStatus,
        FsckBlock,
        FsckFile,
        FsckReplica,
        FsckSummary,
    )
    from plasmafs.client.client import Client, connect
    from plasmafs.client.files import FileReader, FileWriter
    from plasmafs.client.sync import SyncClient, connect_sync
    from plasmafs.client.transaction import Transaction
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
        ExistsError,
        InvalidArgumentError,
        IsDirectoryError,
        LoopError,
        NameTooLongError,
        NoSpaceError,
        NotDirectoryError,
        NotEmptyError,
        NotFoundError,
        OperationNotPermittedError,
        PermissionDeniedError,
        PlasmaError,
        ShutdownError,
        StaleFileError,
        StorageError,
        TransactionError,
        UnavailableError,
    )
    from plasmafs.core.errors import PermissionError as PermissionError
    from plasmafs.core.paths import At

_WHERE = {
    "AccessDeniedError": "plasmafs.core.errors",
    "At": "plasmafs.core.paths",
    "Attr": "plasmafs.core.attributes",
    "AuthenticationError": "plasmafs.core.errors",
    "BlockList": "plasmafs.core.attributes",
    "BusyError": "plasmafs.core.errors",
    "Client": "plasmafs.client.client",
    "ConfigError": "plasmafs.core.errors",
    "ConflictError": "plasmafs.core.errors",
    "ConnectionLostError": "plasmafs.core.errors",
    "CorruptionError": "plasmafs.core.errors",
    "DatanodeState": "plasmafs.client.admin",
    "DatanodeStatus": "plasmafs.client.admin",
    "DirEntry": "plasmafs.core.attributes",
    "ExistsError": "plasmafs.core.errors",
    "Extent": "plasmafs.core.attributes",
    "FileKind": "plasmafs.core.attributes",
    "FileReader": "plasmafs.client.files",
    "FileWriter": "plasmafs.client.files",
    "FsckBlock": "plasmafs.client.admin",
    "FsckFile": "plasmafs.client.admin",
    "FsckReplica": "plasmafs.client.admin",
    "FsckSummary": "plasmafs.client.admin",
    "FsStat": "plasmafs.core.attributes",
    "InvalidArgumentError": "plasmafs.core.errors",
    "IsDirectoryError": "plasmafs.core.errors",
    "LoopError": "plasmafs.core.errors",
    "NameTooLongError": "plasmafs.core.errors",
    "NoSpaceError": "plasmafs.core.errors",
    "NotDirectoryError": "plasmafs.core.errors",
    "NotEmptyError": "plasmafs.core.errors",
    "NotFoundError": "plasmafs.core.errors",
    "OperationNotPermittedError": "plasmafs.core.errors",
    "PermissionDeniedError": "plasmafs.core.errors",
    "PermissionError": "plasmafs.core.errors",
    "PlasmaError": "plasmafs.core.errors",
    "Replica": "plasmafs.core.attributes",
    "ReplicaState": "plasmafs.core.attributes",
    "ShutdownError": "plasmafs.core.errors",
    "StaleFileError": "plasmafs.core.errors",
    "StorageError": "plasmafs.core.errors",
    "SyncClient": "plasmafs.client.sync",
    "Transaction": "plasmafs.client.transaction",
    "TransactionError": "plasmafs.core.errors",
    "UnavailableError": "plasmafs.core.errors",
    "connect": "plasmafs.client.client",
    "connect_sync": "plasmafs.client.sync",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'plasmafs.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AccessDeniedError",
    "At",
    "Attr",
    "AuthenticationError",
    "BlockList",
    "BusyError",
    "Client",
    "ConfigError",
    "ConflictError",
    "ConnectionLostError",
    "CorruptionError",
    "DatanodeState",
    "DatanodeStatus",
    "DirEntry",
    "ExistsError",
    "Extent",
    "FileKind",
    "FileReader",
    "FileWriter",
    "FsStat",
    "FsckBlock",
    "FsckFile",
    "FsckReplica",
    "FsckSummary",
    "InvalidArgumentError",
    "IsDirectoryError",
    "LoopError",
    "NameTooLongError",
    "NoSpaceError",
    "NotDirectoryError",
    "NotEmptyError",
    "NotFoundError",
    "OperationNotPermittedError",
    "PermissionDeniedError",
    "PlasmaError",
    "Replica",
    "ReplicaState",
    "ShutdownError",
    "StaleFileError",
    "StorageError",
    "SyncClient",
    "Transaction",
    "TransactionError",
    "UnavailableError",
    "connect",
    "connect_sync",
]
