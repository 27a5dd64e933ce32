"""`pfs admin dump` and `pfs admin load`: the namespace and accounts of one cluster
loaded into a new one (another database) with the same datanodes — identical
listings, contents, tokens and S3 keys — and refused, leaving no trace, when the namespace
is not empty or the dump is damaged."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from plasmafs.client import Client, InvalidArgumentError, NotEmptyError
from plasmafs.client.admin import FsckSummary
from plasmafs.core.s3_signing import signing_key
from tests.conftest import DataCluster, data_cluster_processes
from tests.support.cli_runner import CLUSTER_TRUST
from tests.support.cluster import create_database, drop_database, run
from tests.support.waiting import eventually

BS = 64 * 1024


@pytest.fixture
def cluster(dsn: str, tmp_path: Path) -> Iterator[DataCluster]:
    """The data cluster (its namenode moves to another database in the tests)."""
    yield from data_cluster_processes(dsn, tmp_path, inline_limit=0)


@pytest.fixture
def second_dsn(admin_dsn: str) -> Iterator[str]:
    """Another fresh database (the test accounts only, an empty namespace)."""
    dsn = run(create_database(admin_dsn))
    assert isinstance(dsn, str)
    yield dsn
    run(drop_database(admin_dsn, dsn))


async def listing(fs: Client) -> list[tuple[object, ...]]:
    """`ls -lR /` as data: every entry with its kind, mode, owner, size, mtime, target."""
    return sorted(
        [
            (
                e.path,
                e.attr.kind,
                e.attr.mode,
                e.attr.uid,
                e.attr.gid,
                e.attr.size,
                e.attr.mtime_ns,
                e.attr.nlink,
                e.target,
            )
            async for e in fs.walk("/")
        ]
    )


async def build(fs: Client) -> dict[str, bytes]:
    """A small tree of every kind; the files' contents by path."""
    contents = {}
    await fs.mkdir("/a")
    await fs.mkdir("/a/b")
    for k in range(40):
        await fs.mkdir(f"/a/d{k}")
        await fs.write_file(f"/a/d{k}/empty", b"")
    for path, size, rep in (("/a/b/one", 3 * BS + 7, 1), ("/a/b/two", 1000, 2), ("/top", BS, 3)):
        contents[path] = os.urandom(size)
        await fs.write_file(path, contents[path], replication=rep)
    await fs.symlink("/link", "/a/b/one")
    await fs.chmod("/a/b/two", 0o600)
    await fs.setxattr("/a/b/two", "user.origin", b"\x00sensor")
    await fs.setxattr("/a", "trusted.mark", b"m")
    await fs.set_quota("/a/b", entries=50, space=10**9)
    return contents


async def chunks(data: bytes, size: int = 7777) -> AsyncIterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


async def dump_bytes(fs: Client) -> bytes:
    return b"".join([piece async for piece in fs.dump()])


def move_namenode(cluster: DataCluster, dsn: str) -> None:
    """The same namenode (same addresses) on another database."""
    cluster.namenode.stop()
    cluster.namenode.dsn = dsn
    cluster.namenode.start()


async def live(address: str) -> Client:
    fs = Client(address, failover_timeout=30)
    await eventually(lambda: _all_live(fs), timeout=30)
    return fs


async def _all_live(fs: Client) -> bool:
    return (await fs.fsstat()).live_datanodes == 3


async def test_a_dump_loads_into_a_new_cluster_with_the_same_datanodes(
    cluster: DataCluster, second_dsn: str
) -> None:
    async with Client(cluster.namenode.address) as fs:
        contents = await build(fs)
        accounts = await fs.accounts()
        _, carol_token = await accounts.add_user("carol")
        s3_key, s3_secret = await (await fs.s3_keys()).create("carol")
        before = await listing(fs)
        dump = await dump_bytes(fs)
    move_namenode(cluster, second_dsn)
    fs = await live(cluster.namenode.address)
    try:
        assert len(await listing(fs)) == 1  # the root alone
        summary = await fs.load(chunks(dump))
        assert summary.entries == len(before) - 1  # the root has no entry
        assert summary.rows["extents"] == 1 + 2 + 3
        await eventually(lambda: _all_live(fs), timeout=30)  # it started over
        assert await listing(fs) == before
        for path, data in contents.items():
            assert await fs.read_file(path) == data
        assert await fs.getxattr("/a/b/two", "user.origin") == b"\x00sensor"
        assert await fs.listxattr("/a") == ["trusted.mark"]
        quota = (await fs.summarize("/a/b")).quota  # with the usage counted afresh
        assert quota is not None and (quota.max_entries, quota.max_space) == (50, 10**9)
        assert quota.entries == 3
        report = [item async for item in fs.fsck("/")][-1]
        assert isinstance(report, FsckSummary) and report.healthy
        # New files go to blocks the loaded ones do not use.
        fresh = os.urandom(5 * BS)
        await fs.write_file("/fresh", fresh, replication=3)
        assert await fs.read_file("/fresh") == fresh
        for path, data in contents.items():
            assert await fs.read_file(path) == data
        async with Client(cluster.namenode.address, token=carol_token) as carol:
            assert (await (await carol.accounts()).whoami()).name == "carol"
        # The S3 key came along, sealed, and opens with the same s3_secret_file.
        signing = await (await fs.s3_keys()).signing_key(
            s3_key.access_key_id, "20261128", "us-east-1"
        )
        assert signing.key == signing_key(s3_secret, "20261128", "us-east-1")
        assert signing.user == "carol"
    finally:
        await fs.close()


async def test_a_load_into_a_namespace_that_is_not_empty_is_refused(
    cluster: DataCluster,
) -> None:
    async with Client(cluster.namenode.address) as fs:
        await fs.write_file("/here", b"x" * 10, replication=1)
        dump = await dump_bytes(fs)
        with pytest.raises(NotEmptyError, match="not empty"):
            await fs.load(chunks(dump))
        assert await fs.read_file("/here") == b"x" * 10


async def test_a_damaged_or_foreign_dump_is_refused_and_leaves_no_trace(
    cluster: DataCluster, second_dsn: str
) -> None:
    async with Client(cluster.namenode.address) as fs:
        await build(fs)
        dump = await dump_bytes(fs)
    move_namenode(cluster, second_dsn)
    fs = await live(cluster.namenode.address)
    try:
        flipped = bytearray(dump)
        flipped[len(dump) // 2] ^= 0xFF
        for bad, why in (
            (dump[: len(dump) // 2], "ends too early"),
            (bytes(flipped), "damaged"),
            (b"PK\x03\x04" + dump[4:], "not a plasmafs namespace dump"),
        ):
            with pytest.raises(InvalidArgumentError, match=why):
                await fs.load(chunks(bad))
            assert await fs.listdir("/") == []
        summary = await fs.load(chunks(dump))  # the whole one still loads
        assert summary.entries > 40
    finally:
        await fs.close()


def pfs(cluster: DataCluster, *args: str, stdin: bytes | None = None) -> CompletedProcess[bytes]:
    """`pfs ARGS` against the cluster's namenode, as the test superuser."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PFS_", "PG")) or k in CLUSTER_TRUST
    }
    env["PFS_CLIENT_NAMENODE"] = cluster.namenode.address
    return subprocess.run(
        [sys.executable, "-m", "plasmafs.cli", *args],
        env=env, input=stdin, capture_output=True, timeout=120,
    )  # fmt: skip


async def test_the_cli_dumps_to_a_file_and_loads_from_standard_input(
    cluster: DataCluster, second_dsn: str, tmp_path: Path
) -> None:
    async with Client(cluster.namenode.address) as fs:
        contents = await build(fs)
        before = await listing(fs)
    saved = tmp_path / "namespace.dump"
    dumped = pfs(cluster, "admin", "dump", str(saved))
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout == b"" and dumped.stderr.decode().startswith("dumped ")
    assert not (tmp_path / "namespace.dump.partial").exists()
    move_namenode(cluster, second_dsn)
    await (await live(cluster.namenode.address)).close()  # the datanodes are back
    loaded = pfs(cluster, "admin", "load", "-", stdin=saved.read_bytes())
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.decode().startswith("loaded in ")
    again = pfs(cluster, "admin", "load", str(saved))
    assert again.returncode == 1
    [line] = again.stderr.decode().splitlines()
    assert "not empty" in line
    missing = pfs(cluster, "admin", "load", str(tmp_path / "nothing"))
    assert missing.returncode == 1 and "nothing" in missing.stderr.decode()
    fs = await live(cluster.namenode.address)
    try:
        assert await listing(fs) == before
        for path, data in contents.items():
            assert await fs.read_file(path) == data
    finally:
        await fs.close()
