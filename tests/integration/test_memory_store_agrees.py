"""The namespace rules' unit tests (`tests/unit/namenode/test_namespace_rules.py`) run
again here over PostgreSQL, so that `MemoryStore`, the stand-in they use, cannot give
an outcome the real store does not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from plasmafs.namenode.lease_store import LeaseStore
from plasmafs.namenode.store import Store
from tests.support.namespace_parts import Opened, opened_namespace
from tests.unit.namenode import test_namespace_rules

# The same test functions, collected in this module: they take this module's `ns`.
globals().update(
    {name: test for name, test in vars(test_namespace_rules).items() if name.startswith("test_")}
)


@pytest.fixture
async def ns(dsn: str) -> AsyncIterator[Opened]:
    """A namespace over the test's PostgreSQL database."""
    store, leases = Store(dsn, read_pool_size=2), LeaseStore(dsn, deadline=10.0)
    async with opened_namespace(store, leases, dsn) as opened:
        yield opened
