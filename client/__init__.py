"""plasmafs client library: the asyncio API, its synchronous facade, and the pfs CLI.

from plasmafs.client import connect

async with await connect("127.0.0.1:7530") as fs:
    async with fs.transaction() as t:
        await t.mkdir("/data")
        await t.create("/data/hello")
    print(await fs.stat("/data/hello"))
"""

from plasmafs.client.attributes import Attr, BlockList, DirEntry, Extent, FileKind, FsStat, Replica
from plasmafs.client.client import Client, connect
from plasmafs.client.errors import (
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
    PermissionDeniedError,
    PlasmaError,
    ShutdownError,
    StaleFileError,
    StorageError,
    TransactionError,
    UnavailableError,
)
from plasmafs.client.files import FileReader, FileWriter
from plasmafs.client.sync import SyncClient, connect_sync
from plasmafs.client.transaction import Transaction

__all__ = [
    "Attr",
    "BlockList",
    "BusyError",
    "Client",
    "ConfigError",
    "ConflictError",
    "ConnectionLostError",
    "CorruptionError",
    "DirEntry",
    "ExistsError",
    "Extent",
    "FileKind",
    "FileReader",
    "FileWriter",
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
    "Replica",
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
