"""plasmafs client library: the asyncio API, its synchronous facade, and the pfs CLI.

from plasmafs.client import connect

async with await connect("127.0.0.1:7530") as fs:
    async with fs.transaction() as t:
        await t.mkdir("/data")
        await t.create("/data/hello")
    print(await fs.stat("/data/hello"))
"""

from plasmafs.client.attributes import Attr, DirEntry, FileKind, FsStat
from plasmafs.client.client import Client, connect
from plasmafs.client.errors import (
    BusyError,
    ConfigError,
    ConflictError,
    ConnectionLostError,
    ExistsError,
    InvalidArgumentError,
    IsDirectoryError,
    LoopError,
    NameTooLongError,
    NoSpaceError,
    NotDirectoryError,
    NotEmptyError,
    NotFoundError,
    PermissionDeniedError,
    PlasmaError,
    ShutdownError,
    StorageError,
    TransactionError,
)
from plasmafs.client.sync import SyncClient, connect_sync
from plasmafs.client.transaction import Transaction

__all__ = [
    "Attr",
    "BusyError",
    "Client",
    "ConfigError",
    "ConflictError",
    "ConnectionLostError",
    "DirEntry",
    "ExistsError",
    "FileKind",
    "FsStat",
    "InvalidArgumentError",
    "IsDirectoryError",
    "LoopError",
    "NameTooLongError",
    "NoSpaceError",
    "NotDirectoryError",
    "NotEmptyError",
    "NotFoundError",
    "PermissionDeniedError",
    "PlasmaError",
    "ShutdownError",
    "StorageError",
    "SyncClient",
    "Transaction",
    "TransactionError",
    "connect",
    "connect_sync",
]
