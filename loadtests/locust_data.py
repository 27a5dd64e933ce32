"""Locust: put and get of small (4 KiB) and 1 MiB files through the datanodes.

Each user writes into its own directory, reusing `SLOTS` names per size so the run's
footprint stays bounded (a replaced file's blocks return to free space after the ticket
lifetime), and reads back files it wrote. Replication: `--pfs-replication` (default 1).
Rows: `put 4KiB`, `get 4KiB`, `put 1MiB`, `get 1MiB`; a get also checks the bytes.
"""

from __future__ import annotations

import os
import random

from locust import task

from loadtests.locust_users import PlasmaUser

SIZES = {"4KiB": 4 * 1024, "1MiB": 1024 * 1024}
SLOTS = 4


class DataMismatchError(Exception):
    """A get returned other bytes than the put stored."""


class DataUser(PlasmaUser):
    """put/get of small and 1 MiB files; reads are twice as frequent as writes."""

    def on_start(self) -> None:
        """Make the user's directory and one file of each size."""
        super().on_start()
        self.replication = self.environment.parsed_options.pfs_replication
        self.payload = {label: os.urandom(size) for label, size in SIZES.items()}
        self.written: dict[str, list[str]] = {label: [] for label in SIZES}
        self.serial = 0
        for label in SIZES:
            self._put(label)

    def _put(self, label: str) -> None:
        self.serial += 1
        path = f"{self.home}/{label}-{self.serial % SLOTS}"
        self.call(
            f"put {label}",
            self.fs.write_file,
            path,
            self.payload[label],
            replication=self.replication,
        )
        if path not in self.written[label]:
            self.written[label].append(path)

    def _get(self, label: str) -> None:
        if not self.written[label]:
            return
        path = random.choice(self.written[label])
        self.call(f"get {label}", self._read_checked, path, self.payload[label])

    async def _read_checked(self, path: str, expected: bytes) -> int:
        data = await self.fs.read_file(path)
        if data != expected:
            raise DataMismatchError(
                f"{path}: read {len(data)} bytes that differ from the {len(expected)} put"
            )
        return len(data)

    @task(4)
    def put_small(self) -> None:
        """Write a 4 KiB file."""
        self._put("4KiB")

    @task(8)
    def get_small(self) -> None:
        """Read a 4 KiB file back."""
        self._get("4KiB")

    @task(1)
    def put_large(self) -> None:
        """Write a 1 MiB file."""
        self._put("1MiB")

    @task(2)
    def get_large(self) -> None:
        """Read a 1 MiB file back."""
        self._get("1MiB")
