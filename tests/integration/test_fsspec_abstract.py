"""fsspec's own abstract test suite (copy, get, put, pipe, open) on `pfs://`, against a
real namenode and datanodes shared by the module's tests (each test cleans up what it
made)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

import fsspec.tests.abstract as abstract
import pytest

from plasmafs.fsspec.filesystem import PlasmaFileSystem
from tests.conftest import DataCluster, data_cluster_processes
from tests.support.cluster import create_database, drop_database, run

ROOT = "/abstract"


@pytest.fixture(scope="module")
def shared_cluster(
    admin_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DataCluster]:
    database = run(create_database(admin_dsn))
    assert isinstance(database, str)
    try:
        yield from data_cluster_processes(database, tmp_path_factory.mktemp("fsspec"), None)
    finally:
        run(drop_database(admin_dsn, database))


class PlasmaFixtures(abstract.AbstractFixtures):  # type: ignore[misc]
    """The fixtures fsspec's suite asks each file system for."""

    @pytest.fixture(scope="class")
    @classmethod
    def fs(cls, shared_cluster: DataCluster) -> Iterator[PlasmaFileSystem]:
        filesystem = PlasmaFileSystem(shared_cluster.namenode.address, skip_instance_cache=True)
        filesystem.makedirs(ROOT, exist_ok=True)
        yield filesystem
        filesystem.rm(ROOT, recursive=True)
        filesystem.close()

    @pytest.fixture
    def fs_join(self) -> object:
        return posixpath.join

    @pytest.fixture
    def fs_path(self) -> str:
        return ROOT


class TestPlasmaCopy(abstract.AbstractCopyTests, PlasmaFixtures):  # type: ignore[misc]
    pass


class TestPlasmaGet(abstract.AbstractGetTests, PlasmaFixtures):  # type: ignore[misc]
    pass


class TestPlasmaPut(abstract.AbstractPutTests, PlasmaFixtures):  # type: ignore[misc]
    pass


class TestPlasmaPipe(abstract.AbstractPipeTests, PlasmaFixtures):  # type: ignore[misc]
    pass


class TestPlasmaOpen(abstract.AbstractOpenTests, PlasmaFixtures):  # type: ignore[misc]
    pass
