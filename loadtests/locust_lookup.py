"""Locust: attribute lookups of existing files by inode number, like PlasmaFS's ps_lookup.

Each user picks one of `FILES` shared files (made once, by whichever process comes
first) and asks for its attributes, one request at a time. Rows: `getattr`.
"""

from __future__ import annotations

import random

from locust import task

from loadtests.locust_users import PlasmaUser, ensure_files

FILES = 100


class LookupUser(PlasmaUser):
    """getattr of an existing file, in a closed loop."""

    def on_start(self) -> None:
        """Make (or find) the shared files and learn their inode numbers."""
        super().on_start()
        self.inodes = ensure_files(self, f"{self.root}/lookup-files", FILES)

    @task
    def getattr(self) -> None:
        """One attribute lookup by inode number (served from the namenode's cache)."""
        self.call("getattr", self.fs.getattr, random.choice(self.inodes))
