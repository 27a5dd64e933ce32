"""A cluster on several hosts (`loadtests/hosts.py`: a network namespace per host,
addresses on a bridge, certificates naming them): data across hosts, the active
namenode killed or cut off under a create load, the old active restored (it stands
by, never a second active one), a datanode host cut off and restored. In each, every
acknowledged create is there afterwards and clients go on without a restart."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtests.hosts import HostCluster, host_cluster
from plasmafs.client import Client, ConnectionLostError
from tests.support.cli_runner import assert_ok, clean_env, run_pfs
from tests.support.create_load import CreateLoad
from tests.support.mounts import mounted

pytestmark = pytest.mark.hosts


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[HostCluster]:
    """Two namenode hosts, three datanode hosts, PostgreSQL's host, a client host; the
    test process reaches them over the bridge as one more client."""
    with host_cluster(namenodes=2, datanodes=3, lease_ttl=2.0) as made:
        for key, value in made.client_env().items():
            monkeypatch.setenv(key, value)
        yield made


def _client(cluster: HostCluster, addresses: str | None = None) -> Client:
    return Client(addresses or cluster.addresses, connect_timeout=3)


async def _until_logged(cluster: HostCluster, host: str, text: str, timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while text not in cluster.log_tail(host):
            await asyncio.sleep(0.1)


async def _stands_by(cluster: HostCluster, host: str) -> None:
    await _until_logged(cluster, host, "standing by")
    with pytest.raises(ConnectionLostError, match="standby"):
        async with _client(cluster, cluster.address(host)) as fs:
            await fs.ping()


async def _all_present(cluster: HostCluster, load: CreateLoad) -> None:
    async with _client(cluster) as fs:
        names = set(await fs.listdir(load.directory))
    missing = set(load.acknowledged) - names
    assert not missing, f"{len(missing)} acknowledged creates lost"


async def _loaded(cluster: HostCluster) -> CreateLoad:
    async with _client(cluster) as fs:
        await fs.mkdir("/load")
    load = CreateLoad(cluster.addresses)
    load.start()
    await load.wait_for_progress()
    return load


def test_data_moves_between_hosts_through_the_cli_and_a_mount(
    cluster: HostCluster, tmp_path: Path
) -> None:
    data = os.urandom(5 * 64 * 1024 + 7)
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    client = cluster.network.host("client")
    env = {**clean_env(tmp_path / "home", cluster.addresses), **cluster.client_env()}
    put = client.run("env", *[f"{k}={v}" for k, v in env.items()],
                     "pfs", "put", "-rep", "2", str(source), "/across")  # fmt: skip
    assert put.returncode == 0, put.stderr
    copy = tmp_path / "copy.bin"
    got = client.run("env", *[f"{k}={v}" for k, v in env.items()],
                     "pfs", "get", "/across", str(copy))  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert copy.read_bytes() == data
    blocks = run_pfs(env, "blocks", "/across")
    assert_ok(blocks, None)
    assert "actual replication:    2" in blocks.out, blocks.out
    with mounted(cluster.addresses, tmp_path / "mnt", token_file=cluster.token_file) as mount:
        assert (mount.path / "across").read_bytes() == data
        (mount.path / "from-mount").write_bytes(data[:1000])
    back = run_pfs(env, "get", "/from-mount", str(tmp_path / "back.bin"))
    assert back.rc == 0, back
    assert (tmp_path / "back.bin").read_bytes() == data[:1000]


async def test_the_active_namenode_host_dies_under_load(cluster: HostCluster) -> None:
    load = await _loaded(cluster)
    try:
        cluster.network.host("nn1").kill()
        await load.wait_for_progress()
        await _until_logged(cluster, "nn2", "namenode active")
        await load.stop()
        await _all_present(cluster, load)
        cluster.start_namenode("nn1")  # back: it stands by
        await _stands_by(cluster, "nn1")
    finally:
        await load.stop()


async def test_the_active_namenode_host_is_cut_off_and_restored(cluster: HostCluster) -> None:
    load = await _loaded(cluster)
    try:
        cluster.network.cut("nn1")
        await load.wait_for_progress()  # through nn2, once its lease lapsed
        await _until_logged(cluster, "nn2", "namenode active")
        cluster.network.restore("nn1")
        # nn1 ran on, cut off: its next renewal finds nn2's term and it stands by.
        await _until_logged(cluster, "nn1", "no longer the active one")
        await _stands_by(cluster, "nn1")
        await load.wait_for_progress()
        await load.stop()
        await _all_present(cluster, load)
    finally:
        await load.stop()


async def test_a_datanode_host_cut_off_and_restored(cluster: HostCluster) -> None:
    data = os.urandom(6 * 64 * 1024)
    async with _client(cluster) as fs:
        await fs.write_file("/kept", data, replication=2)
        cluster.network.cut("dn1")
        assert await fs.read_file("/kept") == data  # from whichever replica answers
        await fs.write_file("/during", data, replication=2)  # to the hosts still there
        assert await fs.read_file("/during") == data
        cluster.network.restore("dn1")
        async with asyncio.timeout(60):
            while (await fs.fsstat()).live_datanodes < 3:
                await asyncio.sleep(0.2)
        assert await fs.read_file("/kept") == data
