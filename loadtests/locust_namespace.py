"""Locust: a mixed namespace workload, rows named as in HDFS's NNThroughputBenchmark.

Each user works in its own directory and keeps the names of the files it made. Reads
dominate, as they do in production namespace traces; the weights (of 100) are:

  open        60  block list of a file (stat + block list), what a reader asks first
  fileStatus  15  attributes by path
  listStatus   8  first page (100 entries, with attributes) of the user's directory
  create       8  an empty file, one committed transaction
  rename       4  a file to a new name in the same directory
  delete       4  a file
  mkdirs       1  a subdirectory
"""

from __future__ import annotations

import random

from locust import task

from loadtests.locust_users import PlasmaUser

START_FILES = 20


class NamespaceUser(PlasmaUser):
    """Mixed metadata operations on the user's own files."""

    def on_start(self) -> None:
        """Make the user's directory and its first files."""
        super().on_start()
        self.serial = 0
        self.files: list[str] = []
        for _ in range(START_FILES):
            self.create()

    def _new_name(self, prefix: str) -> str:
        self.serial += 1
        return f"{self.home}/{prefix}{self.serial}"

    def _some_file(self) -> str | None:
        return random.choice(self.files) if self.files else None

    @task(60)
    def open(self) -> None:
        """The block list of one of the user's files."""
        if (path := self._some_file()) is not None:
            self.call("open", self.fs.blocks, path)

    @task(15)
    def file_status(self) -> None:
        """Attributes of one of the user's files."""
        if (path := self._some_file()) is not None:
            self.call("fileStatus", self.fs.stat, path)

    @task(8)
    def list_status(self) -> None:
        """The first page of the user's directory, with attributes."""
        self.call("listStatus", self.fs.readdir, self.home, limit=100, plus=True)

    @task(8)
    def create(self) -> None:
        """A new empty file."""
        path = self._new_name("f")
        self.call("create", self.fs.create, path)
        self.files.append(path)

    @task(4)
    def rename(self) -> None:
        """One of the user's files to a new name."""
        if (path := self._some_file()) is not None:
            target = self._new_name("r")
            self.call("rename", self.fs.rename, path, target)
            self.files[self.files.index(path)] = target

    @task(4)
    def delete(self) -> None:
        """One of the user's files."""
        if (path := self._some_file()) is not None:
            self.files.remove(path)
            self.call("delete", self.fs.unlink, path)

    @task(1)
    def mkdirs(self) -> None:
        """A new subdirectory."""
        self.call("mkdirs", self.fs.mkdir, self._new_name("d"))
