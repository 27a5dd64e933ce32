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
    from plasmafs.client.attributes import (
        Attr,
        BlockList,
        DirEntry,
        Extent,
        FileKind,
        FsStat,
        Replica,
        ReplicaState,
    )
    from plasmafs.client.client import Client, connect
    from plasmafs.client.errors import (
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
    from plasmafs.client.errors import PermissionError as PermissionError
    from plasmafs.client.files import FileReader, FileWriter
    from plasmafs.client.paths import At
    from plasmafs.client.sync import SyncClient, connect_sync
    from plasmafs.client.transaction import Transaction

_WHERE = {
    "AccessDeniedError": "plasmafs.client.errors",
    "At": "plasmafs.client.paths",
    "Attr": "plasmafs.client.attributes",
    "AuthenticationError": "plasmafs.client.errors",
    "BlockList": "plasmafs.client.attributes",
    "BusyError": "plasmafs.client.errors",
    "Client": "plasmafs.client.client",
    "ConfigError": "plasmafs.client.errors",
    "ConflictError": "plasmafs.client.errors",
    "ConnectionLostError": "plasmafs.client.errors",
    "CorruptionError": "plasmafs.client.errors",
    "DatanodeState": "plasmafs.client.admin",
    "DatanodeStatus": "plasmafs.client.admin",
    "DirEntry": "plasmafs.client.attributes",
    "ExistsError": "plasmafs.client.errors",
    "Extent": "plasmafs.client.attributes",
    "FileKind": "plasmafs.client.attributes",
    "FileReader": "plasmafs.client.files",
    "FileWriter": "plasmafs.client.files",
    "FsckBlock": "plasmafs.client.admin",
    "FsckFile": "plasmafs.client.admin",
    "FsckReplica": "plasmafs.client.admin",
    "FsckSummary": "plasmafs.client.admin",
    "FsStat": "plasmafs.client.attributes",
    "InvalidArgumentError": "plasmafs.client.errors",
    "IsDirectoryError": "plasmafs.client.errors",
    "LoopError": "plasmafs.client.errors",
    "NameTooLongError": "plasmafs.client.errors",
    "NoSpaceError": "plasmafs.client.errors",
    "NotDirectoryError": "plasmafs.client.errors",
    "NotEmptyError": "plasmafs.client.errors",
    "NotFoundError": "plasmafs.client.errors",
    "OperationNotPermittedError": "plasmafs.client.errors",
    "PermissionDeniedError": "plasmafs.client.errors",
    "PermissionError": "plasmafs.client.errors",
    "PlasmaError": "plasmafs.client.errors",
    "Replica": "plasmafs.client.attributes",
    "ReplicaState": "plasmafs.client.attributes",
    "ShutdownError": "plasmafs.client.errors",
    "StaleFileError": "plasmafs.client.errors",
    "StorageError": "plasmafs.client.errors",
    "SyncClient": "plasmafs.client.sync",
    "Transaction": "plasmafs.client.transaction",
    "TransactionError": "plasmafs.client.errors",
    "UnavailableError": "plasmafs.client.errors",
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
