"""Snapshots on a real cluster: a snapshot reads back identical after the live files are
overwritten, truncated, removed and renamed; it is read-only; its blocks are freed
only when neither a live file nor another snapshot names them, with fsck's records
consistent throughout; a restart keeps it all; who may take them; diff."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from plasmafs.client import Client
from plasmafs.client.admin import FsckSummary
from plasmafs.client.snapshots import SnapshotChange
from plasmafs.core.errors import (
    ExistsError,
    InvalidArgumentError,
    NotEmptyError,
    NotFoundError,
    OperationNotPermittedError,
    ReadOnlyError,
)
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.fsspec.filesystem import PlasmaFileSystem
from tests.conftest import TEST_BLOCKSIZE, DataCluster, connected_client, data_cluster_processes
from tests.support.accounts import TOKENS, UIDS
from tests.support.cli_runner import Result, clean_env, run_pfs
from tests.support.cluster import tls_env
from tests.support.mounts import mounted
from tests.support.waiting import eventually

SIZE = 5 * TEST_BLOCKSIZE + 123


@pytest.fixture
async def fs(data_cluster: DataCluster) -> AsyncIterator[Client]:
    async with connected_client(data_cluster.namenode.address) as client:
        yield client


async def _records_consistent(fs: Client) -> None:
    items = [item async for item in fs.fsck("/")]
    summary = items[-1]
    assert isinstance(summary, FsckSummary)
    assert summary.record_errors == (), summary.record_errors
    assert summary.missing_blocks == 0 and summary.corrupt_blocks == 0


@contextlib.asynccontextmanager
async def _restarted(cluster: DataCluster) -> AsyncIterator[Client]:
    """Restart the namenode; a client once every datanode is live again."""
    cluster.namenode.stop()
    cluster.namenode.start()
    async with connected_client(cluster.namenode.address) as fs:
        async with asyncio.timeout(30):
            while (await fs.fsstat()).live_datanodes < len(cluster.datanodes):
                await asyncio.sleep(0.05)  # heartbeats arrive every 200 ms
        yield fs


async def _used(fs: Client) -> int:
    st = await fs.fsstat()
    return st.used_bytes - st.held_bytes


async def _tree(fs: Client) -> dict[str, bytes]:
    await fs.mkdir("/proj")
    await fs.mkdir("/proj/src")
    files = {
        "/proj/a": os.urandom(SIZE),
        "/proj/src/b": os.urandom(2 * TEST_BLOCKSIZE),
        "/proj/src/small": b"tiny",
        "/proj/empty": b"",
    }
    for path, content in files.items():
        await fs.write_file(path, content, replication=2)
    await fs.symlink("/proj/link", "src/b")
    return files


async def test_a_snapshot_reads_back_after_the_live_tree_changes(fs: Client) -> None:
    files = await _tree(fs)
    snaps = await fs.snapshots()
    taken = await snaps.create("/proj", "s1")
    assert (taken.name, taken.inodes) == ("s1", 6)
    used = await _used(fs)
    # Overwrite, truncate, remove, rename, and add: the snapshot stays as it was.
    await fs.write_file("/proj/a", os.urandom(SIZE), replication=2)
    await fs.truncate("/proj/src/b", 10)
    await fs.unlink("/proj/src/small")
    await fs.rename("/proj/empty", "/proj/renamed")
    await fs.write_file("/proj/new", b"new")
    for path, content in files.items():
        assert await fs.read_file(path.replace("/proj", "/proj/.snapshot/s1")) == content
    assert await fs.readlink("/proj/.snapshot/s1/link") == "src/b"
    assert sorted(await fs.listdir("/proj/.snapshot/s1")) == ["a", "empty", "link", "src"]
    assert await fs.listdir("/proj/.snapshot") == ["s1"]
    assert ".snapshot" not in await fs.listdir("/proj")
    summary = await fs.summarize("/proj/.snapshot/s1")  # du -s: a walk of the copy
    assert (summary.files, summary.directories, summary.symlinks) == (4, 2, 1)
    assert summary.bytes == sum(len(c) for c in files.values())
    # The old blocks of a and b are kept for the snapshot: more space is in use.
    assert await _used(fs) > used
    await _records_consistent(fs)


async def test_a_snapshot_is_read_only(fs: Client) -> None:
    await _tree(fs)
    await (await fs.snapshots()).create("/proj", "ro")
    for refused in (
        lambda: fs.write_file("/proj/.snapshot/ro/a", b"x"),
        lambda: fs.create("/proj/.snapshot/ro/new"),
        lambda: fs.unlink("/proj/.snapshot/ro/a"),
        lambda: fs.rmdir("/proj/.snapshot/ro/src"),
        lambda: fs.rename("/proj/.snapshot/ro/a", "/taken"),
        lambda: fs.rename("/proj/a", "/proj/.snapshot/ro/a2"),
        lambda: fs.chmod("/proj/.snapshot/ro/a", 0o600),
        lambda: fs.truncate("/proj/.snapshot/ro/a", 0),
        lambda: fs.mkdir("/proj/.snapshot/other"),
        lambda: fs.link("/proj/.snapshot/ro/a", "/hard"),
    ):
        with pytest.raises(ReadOnlyError):
            await refused()
    with pytest.raises(InvalidArgumentError, match="reserved"):
        await fs.create("/proj/src/.snapshot")
    with pytest.raises(ExistsError):
        await (await fs.snapshots()).create("/proj", "ro")
    # A directory with snapshots is not removed; once they are deleted it is.
    for path in ("/proj/a", "/proj/src/b", "/proj/src/small", "/proj/empty", "/proj/link"):
        await fs.unlink(path)
    await fs.rmdir("/proj/src")
    with pytest.raises(NotEmptyError, match="snapshots"):
        await fs.rmdir("/proj")
    assert await (await fs.snapshots()).delete("/proj", "ro") == []
    await fs.rmdir("/proj")
    await _records_consistent(fs)


async def test_blocks_are_freed_only_when_nothing_names_them(fs: Client) -> None:
    start = await _used(fs)
    content = os.urandom(8 * TEST_BLOCKSIZE)
    await fs.mkdir("/d")
    await fs.write_file("/d/f", content, replication=2)
    one = await _used(fs) - start
    snaps = await fs.snapshots()
    await snaps.create("/d", "s1")
    await snaps.create("/d", "s2")
    assert await _used(fs) - start == one  # no data copied
    await fs.unlink("/d/f")
    assert await _used(fs) - start == one  # the snapshots keep them
    await _records_consistent(fs)
    await snaps.delete("/d", "s1")
    assert await _used(fs) - start == one  # s2 still names them
    assert await fs.read_file("/d/.snapshot/s2/f") == content
    await _records_consistent(fs)
    await snaps.delete("/d", "s2")
    async with asyncio.timeout(30):  # held while read tickets may be out
        while await _used(fs) - start:
            await asyncio.sleep(0.2)
    with pytest.raises(NotFoundError):
        await fs.lookup("/d/.snapshot/s2/f")
    await _records_consistent(fs)


async def test_a_snapshot_then_live_changes_then_delete_keeps_the_live_data(fs: Client) -> None:
    content = os.urandom(6 * TEST_BLOCKSIZE)
    await fs.mkdir("/keep")
    await fs.write_file("/keep/f", content, replication=1)
    snaps = await fs.snapshots()
    await snaps.create("/keep", "s")
    await snaps.delete("/keep", "s")  # the live file still names every block
    assert await fs.read_file("/keep/f") == content
    # New data does not land on the live file's blocks.
    await fs.write_file("/other", os.urandom(6 * TEST_BLOCKSIZE), replication=1)
    assert await fs.read_file("/keep/f") == content
    await _records_consistent(fs)


async def test_a_restart_keeps_snapshots_and_their_shared_blocks(
    data_cluster: DataCluster,
) -> None:
    content = os.urandom(4 * TEST_BLOCKSIZE)
    async with connected_client(data_cluster.namenode.address) as fs:
        await fs.mkdir("/r")
        await fs.write_file("/r/f", content, replication=2)
        await (await fs.snapshots()).create("/r", "before")
        await fs.unlink("/r/f")
    async with _restarted(data_cluster) as fs:
        assert [s.name for s in await (await fs.snapshots()).list("/r")] == ["before"]
        assert await fs.read_file("/r/.snapshot/before/f") == content
        # The restarted namenode counts the snapshot's blocks as used.
        await fs.write_file("/fill", os.urandom(8 * TEST_BLOCKSIZE), replication=2)
        assert await fs.read_file("/r/.snapshot/before/f") == content
        await _records_consistent(fs)


async def test_who_may_take_snapshots(fs: Client, data_cluster: DataCluster) -> None:
    await fs.mkdir("/alice")
    await fs.chown("/alice", uid=UIDS["alice"])
    await fs.mkdir("/root-only")
    alice = Client(data_cluster.namenode.address, token=TOKENS["alice"])
    try:
        snaps = await alice.snapshots()
        await snaps.create("/alice", "mine")
        with pytest.raises(OperationNotPermittedError):
            await snaps.create("/root-only", "theirs")
        await fs.mkdir("/alice/limited")
        await fs.chown("/alice/limited", uid=UIDS["alice"])
        await fs.set_quota("/alice/limited", entries=100)  # a quota below: refused too
        with pytest.raises(OperationNotPermittedError, match="quota"):
            await snaps.create("/alice", "over-a-quota")
        await fs.set_quota("/alice", entries=100)
        with pytest.raises(OperationNotPermittedError, match="quota"):
            await snaps.create("/alice", "under-quota")
        await (await fs.snapshots()).create("/alice", "by-root")  # a superuser may
        assert [s.name for s in await snaps.list("/alice")] == ["mine", "by-root"]
    finally:
        await alice.close()


async def test_diff_between_snapshots_and_now(fs: Client) -> None:
    await _tree(fs)
    snaps = await fs.snapshots()
    await snaps.create("/proj", "s1")
    await fs.write_file("/proj/a", b"changed")
    await fs.unlink("/proj/src/small")
    await fs.write_file("/proj/src/added", b"added")
    await snaps.create("/proj", "s2")
    await fs.rename("/proj/empty", "/proj/moved")
    one_two = [c async for c in snaps.diff("/proj", "s1", "s2")]
    assert one_two == [
        SnapshotChange("M", "a"),
        SnapshotChange("M", "src"),
        SnapshotChange("+", "src/added"),
        SnapshotChange("-", "src/small"),
    ]
    to_now = [c async for c in snaps.diff("/proj", "s2")]
    assert SnapshotChange("-", "empty") in to_now and SnapshotChange("+", "moved") in to_now
    assert [c async for c in snaps.diff("/proj", "s2", "s2")] == []


def _pfs(cluster: DataCluster, tmp_path: Path, *args: str) -> Result:
    home = tmp_path / "pfs-home"
    home.mkdir(exist_ok=True)
    return run_pfs(clean_env(home, cluster.namenode.address), *args)


async def test_the_cli_creates_lists_diffs_and_deletes(
    fs: Client, data_cluster: DataCluster, tmp_path: Path
) -> None:
    files = await _tree(fs)
    created = _pfs(data_cluster, tmp_path, "snapshot", "create", "/proj", "daily")
    assert created.rc == 0 and created.out.strip() == (
        "created /proj/.snapshot/daily (6 entries)"
    ), created
    await fs.unlink("/proj/a")
    listed = _pfs(data_cluster, tmp_path, "snapshot", "list", "/proj")
    assert listed.rc == 0 and listed.out.split()[-2:] == ["6", "/proj/.snapshot/daily"]
    diff = _pfs(data_cluster, tmp_path, "snapshot", "diff", "/proj", "daily")
    assert diff.rc == 0 and diff.out.splitlines() == ["M\t./", "-\t./a"], diff
    local = tmp_path / "a"
    got = _pfs(data_cluster, tmp_path, "get", "/proj/.snapshot/daily/a", str(local))
    assert got.rc == 0 and local.read_bytes() == files["/proj/a"]
    refused = _pfs(data_cluster, tmp_path, "rm", "-skipTrash", "/proj/.snapshot/daily/src/b")
    assert refused.rc != 0 and "read-only" in refused.err
    assert len(refused.err.strip().splitlines()) == 1
    missing = _pfs(data_cluster, tmp_path, "snapshot", "delete", "/proj", "nightly")
    assert missing.rc != 0 and "no snapshot named 'nightly'" in missing.err
    assert _pfs(data_cluster, tmp_path, "snapshot", "delete", "/proj", "daily").rc == 0
    assert _pfs(data_cluster, tmp_path, "snapshot", "list", "/proj").out == ""


async def test_fsspec_reads_a_snapshot(fs: Client, data_cluster: DataCluster) -> None:
    files = await _tree(fs)
    await (await fs.snapshots()).create("/proj", "s")
    await fs.write_file("/proj/a", b"new")
    pfs = PlasmaFileSystem(data_cluster.namenode.address, skip_instance_cache=True)
    try:
        assert await pfs._cat_file("/proj/.snapshot/s/a") == files["/proj/a"]
        names = sorted(i["name"] for i in await pfs._ls("/proj/.snapshot/s", detail=True))
        assert names == [f"/proj/.snapshot/s/{n}" for n in ("a", "empty", "link", "src")]
        with pytest.raises(OSError):
            await pfs._pipe_file("/proj/.snapshot/s/a", b"x")
    finally:
        await pfs._close()


async def test_the_mount_reads_a_snapshot_and_refuses_changes(
    fs: Client, data_cluster: DataCluster, tmp_path: Path
) -> None:
    files = await _tree(fs)
    with mounted(data_cluster.namenode.address, tmp_path / "m") as m:
        # Taken while mounted: the mount has listed the directory before.
        assert sorted(os.listdir(m.path / "proj")) == ["a", "empty", "link", "src"]
        await (await fs.snapshots()).create("/proj", "s")
        await fs.write_file("/proj/a", b"overwritten")
        snap = m.path / "proj" / ".snapshot" / "s"
        assert (snap / "a").read_bytes() == files["/proj/a"]
        assert (snap / "src" / "b").read_bytes() == files["/proj/src/b"]
        assert os.listdir(m.path / "proj" / ".snapshot") == ["s"]
        assert ".snapshot" not in os.listdir(m.path / "proj")
        for change in (
            lambda: (snap / "a").write_bytes(b"x"),
            lambda: (snap / "new").write_bytes(b"x"),
            lambda: (snap / "a").unlink(),
            lambda: os.rename(snap / "a", m.path / "a"),
            lambda: os.chmod(snap / "a", 0o600),
        ):
            with pytest.raises(OSError) as refused:
                change()
            assert refused.value.errno == errno.EROFS, change
        assert (m.path / "proj" / "a").read_bytes() == b"overwritten"


async def test_snapshots_taken_while_files_are_rewritten_and_removed(fs: Client) -> None:
    """Each snapshot holds every file as one of its committed versions, whichever
    commits raced it, and no block is freed under it."""
    size = 3 * TEST_BLOCKSIZE
    await fs.mkdir("/busy")
    versions = 6

    def content(k: int, v: int) -> bytes:
        return bytes([k]) * (size // 2) + bytes([v]) * (size - size // 2)

    for k in range(8):
        await fs.write_file(f"/busy/f{k}", content(k, 0), replication=2)

    async def rewrite(k: int) -> None:
        for v in range(1, versions):
            await fs.write_file(f"/busy/f{k}", content(k, v), replication=2)
        await fs.unlink(f"/busy/f{k}")

    snaps = await fs.snapshots()
    writers = [asyncio.create_task(rewrite(k)) for k in range(8)]
    names = []
    for n in range(3):
        await asyncio.sleep(0.05)
        names.append((await snaps.create("/busy", f"s{n}")).name)
    await asyncio.gather(*writers)
    for name in names:
        for path in await fs.listdir(f"/busy/.snapshot/{name}"):
            k = int(path[1:])
            got = await fs.read_file(f"/busy/.snapshot/{name}/{path}")
            assert got in [content(k, v) for v in range(versions)], (name, path)
    await _records_consistent(fs)
    for name in names:
        await snaps.delete("/busy", name)
    await _records_consistent(fs)
    async with asyncio.timeout(30):
        while await _used(fs):
            await asyncio.sleep(0.2)


@pytest.fixture
def short_tickets(dsn: str, tmp_path: Path) -> Iterator[DataCluster]:
    """The data cluster with read tickets of 2 s: released blocks are held that long."""
    yield from data_cluster_processes(
        dsn, tmp_path, inline_limit=0, env={"PFS_NAMENODE_READ_TICKET_TTL": "2"}
    )


async def test_a_restart_does_not_free_what_a_snapshot_names_after_a_release(
    short_tickets: DataCluster,
) -> None:
    """PostgreSQL records every release, also of blocks a snapshot still names; the
    restarted namenode must not free them when the release's hold ends."""
    cluster = short_tickets
    content = os.urandom(6 * TEST_BLOCKSIZE)
    async with connected_client(cluster.namenode.address) as fs:
        await fs.mkdir("/h")
        await fs.write_file("/h/f", content, replication=3)
        await (await fs.snapshots()).create("/h", "s")
        assert await fs.read_file("/h/f") == content  # read tickets: the release is held
        await fs.unlink("/h/f")
    async with _restarted(cluster) as fs:
        await asyncio.sleep(4)  # the recorded hold is over
        st = await fs.fsstat()
        free = st.capacity_bytes - st.used_bytes  # all of it, if the snapshot's were free
        await fs.write_file("/fill", os.urandom(free // 3 - TEST_BLOCKSIZE), replication=3)
        assert await fs.read_file("/h/.snapshot/s/f") == content
        await _records_consistent(fs)


@pytest.fixture
def healing(dsn: str, tmp_path: Path) -> Iterator[DataCluster]:
    """The data cluster replacing a dead datanode's replicas after 2 s."""
    yield from data_cluster_processes(
        dsn, tmp_path, inline_limit=0, env={"PFS_NAMENODE_REPLICA_LOST_AFTER": "2"}
    )


async def test_a_lost_datanode_s_replicas_of_a_snapshot_are_replaced(healing: DataCluster) -> None:
    content = os.urandom(5 * TEST_BLOCKSIZE)
    async with connected_client(healing.namenode.address) as fs:
        await fs.mkdir("/k")
        await fs.write_file("/k/f", content, replication=2)
        snaps = await fs.snapshots()
        await snaps.create("/k", "s")
        await fs.unlink("/k/f")  # only the snapshot names the blocks
        blocks = await fs.blocks("/k/.snapshot/s/f")
        first = blocks.extents[0].replicas[0]
        holder = first.datanode_id
        next(d for d in healing.datanodes if d.address == first.address).stop()

        async def replaced() -> bool:
            listed = await fs.blocks("/k/.snapshot/s/f")
            return all(
                sum(r.datanode_id != holder for r in e.replicas) == 2 for e in listed.extents
            )

        await eventually(replaced, timeout=60)
        assert await fs.read_file("/k/.snapshot/s/f") == content
        await snaps.delete("/k", "s")  # waits for the upkeep of its files, then goes
        with pytest.raises(NotFoundError):
            await fs.lookup("/k/.snapshot/s/f")


def _used_pages(cluster: DataCluster, limit: int) -> list[tuple[int, int, int, int, int]]:
    """Every used range of the first datanode as its scrub pages them (UsedBlocks, as
    that datanode), `limit` a page: (start, count, owner ino, generation, index)."""
    dn = cluster.datanodes[0]
    identity = str(json.loads((dn.volume / "volume.json").read_text())["identity"])
    env = tls_env("datanode", "dn1")
    ca, key, cert = (Path(env[f"PFS_DATANODE_TLS_{k}"]).read_bytes() for k in ("CA", "KEY", "CERT"))
    seen: list[tuple[int, int, int, int, int]] = []
    request = pb.UsedBlocksRequest(datanode_id=dn.datanode_id, identity=identity, limit=limit)
    credentials = grpc.ssl_channel_credentials(ca, key, cert)
    with grpc.secure_channel(cluster.namenode.registry_address, credentials) as link:
        stub = pb_grpc.DatanodeRegistryStub(link)
        while True:
            reply = stub.UsedBlocks(request, timeout=10)
            seen += [
                (r.block_start, r.block_count, o.ino, o.generation, o.file_index)
                for r, o in zip(reply.ranges, reply.owners, strict=True)
            ]
            if not reply.more:
                return seen
            request.after, request.after_ino = reply.next_after, reply.next_ino
            request.after_file_index = reply.next_file_index


async def test_a_scrub_pages_past_ranges_that_snapshots_share(
    fs: Client, data_cluster: DataCluster
) -> None:
    """Several files name blocks from one start (a file and its snapshots): a page may
    end among them, and the next one starts after the last range given, not past its
    blocks (which skipped the rest of them, and longer ones, unscrubbed)."""
    await fs.mkdir("/p")
    await fs.write_file("/p/a", os.urandom(3 * TEST_BLOCKSIZE), replication=3)
    await fs.write_file("/p/b", os.urandom(TEST_BLOCKSIZE), replication=3)
    snaps = await fs.snapshots()
    for name in ("s1", "s2", "s3"):
        await snaps.create("/p", name)
    whole = _used_pages(data_cluster, 1000)
    starts = [r[0] for r in whole]
    assert len(whole) == 8 and len(set(starts)) == 2  # 4 files name each of the 2 runs
    for limit in (1, 2, 3):
        assert _used_pages(data_cluster, limit) == whole
