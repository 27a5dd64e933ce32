"""Locust: one empty file created per committed transaction, each user in its own
directory, like PlasmaFS's ps_create.

Rows: `create` (the request, which also begins the transaction), `commit`, and
`txn:create+commit` (the whole transaction as the application sees it).
"""

from __future__ import annotations

import contextlib

from locust import task
from locust.exception import RescheduleTask

from loadtests.locust_users import PlasmaUser


class CommitUser(PlasmaUser):
    """begin + create + commit, in a closed loop."""

    def on_start(self) -> None:
        """Make this user's directory."""
        super().on_start()
        self.created = 0

    @task
    def create_and_commit(self) -> None:
        """One transaction creating one empty file."""
        path = f"{self.home}/f{self.created}"
        self.created += 1
        with self.timed("txn:create+commit"):
            txn = self.bridge.call(self.fs.begin)
            try:
                self.call("create", txn.create, path)
                self.call("commit", txn.commit)
            except RescheduleTask:
                with contextlib.suppress(Exception):  # the failure reported is the first one
                    self.bridge.call(txn.abort)
                raise
