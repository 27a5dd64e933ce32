"""`pfs admin dump FILE|-` and `pfs admin load FILE|-`: the namespace and accounts as
one consistent copy, written to a file (or standard output) as the namenode sends it,
and loaded from one into a cluster whose namespace is empty."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from plasmafs.client import Client

PIECE = 1 << 20  # bytes read from the dump file and sent at a time


async def cmd_dump(fs: Client, args: argparse.Namespace) -> None:
    """Write the dump to args.file ("-": standard output); a file appears whole or not
    at all. The totals go to standard error."""
    started = time.monotonic()
    written = 0
    if args.file == "-":
        out = sys.stdout.buffer
        async for piece in fs.dump():
            out.write(piece)
            written += len(piece)
        out.flush()
    else:
        target = Path(args.file)
        partial = target.with_name(target.name + ".partial")
        out = await asyncio.to_thread(partial.open, "wb")
        try:
            async for piece in fs.dump():
                await asyncio.to_thread(out.write, piece)
                written += len(piece)
            await asyncio.to_thread(_sync_and_close, out)
            partial.replace(target)
        finally:
            out.close()
            partial.unlink(missing_ok=True)
    seconds = time.monotonic() - started
    print(f"dumped {written} bytes in {seconds:.1f} s", file=sys.stderr)


async def cmd_load(fs: Client, args: argparse.Namespace) -> None:
    """Load the dump in args.file ("-": standard input) and print what was loaded."""
    # Opened first: a missing file is one error line, not a load cut short.
    if args.file == "-":
        source = sys.stdin.buffer
    else:
        source = await asyncio.to_thread(Path(args.file).open, "rb")
    try:
        summary = await fs.load(_pieces(source))
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    rows = ", ".join(f"{table} {count}" for table, count in summary.rows.items())
    print(f"loaded in {summary.seconds:.1f} s: {rows}")
    if summary.datanodes_added:
        print(f"{summary.datanodes_added} datanode(s) of the dump are not registered yet")
    if summary.credentials_skipped:
        print(
            f"{summary.credentials_skipped} credential(s) of the dump were not loaded: their "
            "ids are this cluster's own (issue their users new tokens)"
        )


def _sync_and_close(f: BinaryIO) -> None:
    f.flush()
    os.fsync(f.fileno())
    f.close()


async def _pieces(source: BinaryIO) -> AsyncIterator[bytes]:
    while piece := await asyncio.to_thread(source.read, PIECE):
        yield piece
