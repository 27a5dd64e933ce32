"""The trash on a real cluster whose namenode keeps removed entries 3 seconds: `pfs rm`,
the library's `remove` and fsspec's `rm` move into the remover's /.Trash/<user>/Current,
a rename restores identical bytes, the namenode's emptier checkpoints and deletes what
is past the interval (and the space comes back), -skipTrash and removes inside the
trash delete at once, `pfs expunge`, each user's trash is theirs alone, and a namenode
restart keeps all of it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client
from plasmafs.client.trash import space_in_trash
from plasmafs.core.errors import (
    NotFoundError,
    OperationNotPermittedError,
    PermissionError,
    PlasmaError,
)
from plasmafs.fsspec.filesystem import PlasmaFileSystem
from tests.conftest import TEST_BLOCKSIZE, TEST_CAPACITY, DataCluster, connected_client
from tests.support.accounts import TOKENS
from tests.support.cli_runner import clean_env, run_pfs
from tests.support.cluster import (
    DatanodeProcess,
    NamenodeProcess,
    create_database,
    drop_database,
    run,
)
from tests.support.waiting import eventually

SHORT = 3  # seconds removed entries stay on a `short` cluster (the emptier: every 0.75 s)
LONG = 3600  # on the others: nothing moves while a test looks
ROOT_TRASH = "/.Trash/root/Current"


@pytest.fixture
def cluster(dsn: str, tmp_path: Path) -> Iterator[DataCluster]:
    yield from _cluster(dsn, tmp_path, LONG)


@pytest.fixture
def short(dsn: str, tmp_path: Path) -> Iterator[DataCluster]:
    yield from _cluster(dsn, tmp_path, SHORT)


def _cluster(dsn: str, tmp_path: Path, interval: int) -> Iterator[DataCluster]:
    env = {
        "PFS_NAMENODE_TRASH_INTERVAL": str(interval),
        "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(TEST_BLOCKSIZE),
        "PFS_NAMENODE_INLINE_LIMIT": "0",
        "PFS_NAMENODE_HEARTBEAT_MS": "200",
    }
    namenode = NamenodeProcess(dsn, tmp_path, env=env).start()
    datanodes: list[DatanodeProcess] = []
    try:
        for k in range(2):
            node = DatanodeProcess(
                tmp_path / f"dn{k}", namenode.registry_address, TEST_CAPACITY, TEST_BLOCKSIZE
            )
            datanodes.append(node.start())
        yield DataCluster(namenode, datanodes, TEST_BLOCKSIZE)
    finally:
        for node in datanodes:
            node.stop()
        namenode.stop()


@pytest.fixture
async def fs(cluster: DataCluster) -> AsyncIterator[Client]:
    async with connected_client(cluster.namenode.address) as client:
        yield client


def _pfs(cluster: DataCluster, tmp_path: Path, *args: str) -> str:
    home = tmp_path / "pfs-home"
    home.mkdir(exist_ok=True)
    result = run_pfs(clean_env(home, cluster.namenode.address), *args)
    assert result.rc == 0, result.err
    return result.out


async def _gone(fs: Client, path: str) -> bool:
    try:
        await fs.stat(path)
    except NotFoundError:
        return True
    return False


async def test_rm_moves_into_the_trash_and_a_rename_restores_it(
    fs: Client, cluster: DataCluster, tmp_path: Path
) -> None:
    data = os.urandom(3 * TEST_BLOCKSIZE + 11)
    await fs.mkdir("/data/sub", parents=True)
    await fs.write_file("/data/sub/f", data, replication=2)
    out = _pfs(cluster, tmp_path, "rm", "/data/sub/f")
    assert out.strip() == f"Moved: /data/sub/f to trash at: {ROOT_TRASH}/data/sub/f"
    assert await _gone(fs, "/data/sub/f")
    assert await fs.read_file(f"{ROOT_TRASH}/data/sub/f") == data
    assert (await fs.stat("/.Trash/root")).mode & 0o777 == 0o700
    held = [line for line in _pfs(cluster, tmp_path, "fsstat").splitlines() if "trash" in line]
    assert len(held) == 1 and held[0].startswith("in your trash:") and "KiB" in held[0]
    await fs.rename(f"{ROOT_TRASH}/data/sub/f", "/data/sub/f")
    assert await fs.read_file("/data/sub/f") == data

    # The same path removed twice: the second gets the time appended.
    assert await fs.remove("/data/sub/f") == f"{ROOT_TRASH}/data/sub/f"
    await fs.write_file("/data/sub/f", b"second", replication=1)
    again = await fs.remove("/data/sub/f")
    assert again is not None and again.startswith(f"{ROOT_TRASH}/data/sub/f1")
    assert await fs.read_file(again) == b"second"

    # A tree, as one entry; -r is needed for it.
    await fs.write_file("/data/sub/g", b"g", replication=1)
    refused = run_pfs(clean_env(tmp_path / "pfs-home", cluster.namenode.address), "rm", "/data")
    assert refused.rc == 1 and "is a directory" in refused.err
    out = _pfs(cluster, tmp_path, "rm", "-r", "/data")
    assert await fs.listdir("/") == [".Trash"]
    tree = out.strip().rpartition(" ")[2]  # Current/data is taken: the time appended
    assert tree.startswith(f"{ROOT_TRASH}/data1")
    assert await fs.read_file(f"{tree}/sub/g") == b"g"


async def test_the_emptier_deletes_what_is_past_the_interval_and_the_space_returns(
    short: DataCluster,
) -> None:
    async with connected_client(short.namenode.address) as fs:
        await _expiry(fs)


async def _expiry(fs: Client) -> None:
    data = os.urandom(8 * TEST_BLOCKSIZE)
    await fs.write_file("/big", data, replication=2)
    kept = await fs.fsstat()
    await fs.remove("/big")
    assert (await fs.fsstat()).used_bytes == kept.used_bytes  # in the trash, still held
    assert await space_in_trash(fs) == 2 * len(data)  # what pfs fsstat shows
    await eventually(lambda: _gone(fs, f"{ROOT_TRASH}/big"), timeout=10)
    # Checkpointed, then deleted once past the interval: the trash holds nothing.
    await eventually(lambda: _trash_empty(fs), timeout=20)

    async def freed() -> bool:
        now = await fs.fsstat()
        return now.used_bytes - now.held_bytes <= kept.used_bytes - 2 * len(data)

    await eventually(freed, timeout=20)


async def _trash_empty(fs: Client) -> bool:
    return await fs.listdir("/.Trash/root") == []


async def test_skip_trash_removes_in_the_trash_and_expunge_delete_at_once(
    fs: Client, cluster: DataCluster, tmp_path: Path
) -> None:
    await fs.write_file("/a", b"a")
    assert _pfs(cluster, tmp_path, "rm", "-skipTrash", "/a") == ""
    assert await _gone(fs, "/a") and await _gone(fs, f"{ROOT_TRASH}/a")
    await fs.write_file("/b", b"b")
    moved = await fs.remove("/b")
    assert moved == f"{ROOT_TRASH}/b"
    assert await fs.remove(moved) is None  # inside the trash: for good
    assert await _gone(fs, moved)
    await fs.write_file("/c", b"c")
    await fs.remove("/c")
    out = _pfs(cluster, tmp_path, "expunge", "-immediate")
    assert out.strip().startswith("Deleted: /.Trash/root/")
    assert await fs.listdir("/.Trash/root") == []


async def test_each_users_trash_is_their_own(fs: Client, cluster: DataCluster) -> None:
    await fs.mkdir("/shared")
    await fs.chmod("/shared", 0o1777)
    alice = Client(cluster.namenode.address, token=TOKENS["alice"])
    bob = Client(cluster.namenode.address, token=TOKENS["bob"])
    try:
        await alice.write_file("/shared/mine", b"alice's")
        assert await alice.remove("/shared/mine") == "/.Trash/alice/Current/shared/mine"
        with pytest.raises(PermissionError):
            await bob.listdir("/.Trash/alice")
        with pytest.raises(PermissionError):
            await bob.read_file("/.Trash/alice/Current/shared/mine")
        await alice.write_file("/shared/again", b"x")
        with pytest.raises(OperationNotPermittedError):  # sticky /shared: not bob's
            await bob.remove("/shared/again")
        assert await alice.read_file("/shared/again") == b"x"
    finally:
        await alice.close()
        await bob.close()


async def test_fsspec_rm_goes_to_the_trash_unless_told(fs: Client, cluster: DataCluster) -> None:
    await fs.write_file("/p", b"p")
    await fs.write_file("/q", b"q")
    trashing = PlasmaFileSystem(cluster.namenode.address, skip_instance_cache=True)
    deleting = PlasmaFileSystem(cluster.namenode.address, skip_trash=True, skip_instance_cache=True)
    await trashing._rm("/p")
    await deleting._rm("/q")
    assert await fs.read_file(f"{ROOT_TRASH}/p") == b"p"
    assert await _gone(fs, "/q") and await _gone(fs, f"{ROOT_TRASH}/q")
    await trashing._close()
    await deleting._close()


async def test_a_namenode_restart_keeps_the_trash(cluster: DataCluster) -> None:
    async with connected_client(cluster.namenode.address) as fs:
        await fs.write_file("/kept", b"kept")
        await fs.remove("/kept")
    cluster.namenode.stop()
    cluster.namenode.start()
    async with connected_client(cluster.namenode.address) as fs:
        assert await fs.read_file(f"{ROOT_TRASH}/kept") == b"kept"


async def test_the_new_namenode_empties_what_was_removed_before_a_restart(
    short: DataCluster,
) -> None:
    async with connected_client(short.namenode.address) as fs:
        await fs.write_file("/soon", b"soon")
        await fs.remove("/soon")
    short.namenode.stop()
    short.namenode.start()
    async with connected_client(short.namenode.address) as fs:
        await eventually(lambda: _trash_empty(fs), timeout=20)


@pytest.fixture
def second_dsn(admin_dsn: str) -> Iterator[str]:
    """Another fresh database (an empty namespace)."""
    dsn = run(create_database(admin_dsn))
    assert isinstance(dsn, str)
    yield dsn
    run(drop_database(admin_dsn, dsn))


async def test_a_dump_loads_into_a_new_cluster_whose_namenode_made_its_trash(
    cluster: DataCluster, second_dsn: str
) -> None:
    async with connected_client(cluster.namenode.address) as fs:
        await fs.write_file("/x", b"removed before the dump")
        await fs.remove("/x")
        dump = b"".join([piece async for piece in fs.dump()])
    cluster.namenode.stop()
    cluster.namenode.dsn = second_dsn
    cluster.namenode.start()
    fs = Client(cluster.namenode.address, failover_timeout=30)
    try:
        await eventually(lambda: _exists(fs, "/.Trash"), timeout=30)  # made at start

        async def pieces() -> AsyncIterator[bytes]:
            yield dump

        await fs.load(pieces())
        await eventually(lambda: _readable(fs, f"{ROOT_TRASH}/x"), timeout=30)
    finally:
        await fs.close()


async def _exists(fs: Client, path: str) -> bool:
    return not await _gone(fs, path)


async def _readable(fs: Client, path: str) -> bool:
    try:
        return await fs.read_file(path) == b"removed before the dump"
    except PlasmaError:
        return False  # the namenode starting over after the load


async def test_the_trash_removed_for_good_is_made_again(short: DataCluster) -> None:
    async with connected_client(short.namenode.address) as fs:
        assert await fs.remove("/.Trash", recursive=True) is None  # in the trash: for good
        assert await _gone(fs, "/.Trash")
        await eventually(lambda: _exists(fs, "/.Trash"), timeout=10)
        assert (await fs.stat("/.Trash")).mode & 0o7777 == 0o1777


async def test_a_trash_someone_else_made_open_is_refused(fs: Client, cluster: DataCluster) -> None:
    await fs.mkdir("/shared")
    await fs.chmod("/shared", 0o1777)
    alice = Client(cluster.namenode.address, token=TOKENS["alice"])
    bob = Client(cluster.namenode.address, token=TOKENS["bob"])
    try:
        await bob.mkdir("/.Trash/alice", 0o777)  # first, in the 1777 /.Trash
        await bob.chmod("/.Trash/alice", 0o777)
        await alice.write_file("/shared/f", b"private")
        with pytest.raises(PermissionError, match="not a private directory"):
            await alice.remove("/shared/f")
        assert await alice.read_file("/shared/f") == b"private"  # where it was
    finally:
        await alice.close()
        await bob.close()


async def test_a_tree_goes_to_the_trash_only_if_its_remover_could_delete_it(
    fs: Client, cluster: DataCluster
) -> None:
    """The emptier deletes as the superuser: a user with write access on a shared
    directory may not have it delete another's tree they could not remove."""
    await fs.mkdir("/group")
    await fs.chmod("/group", 0o777)
    alice = Client(cluster.namenode.address, token=TOKENS["alice"])
    bob = Client(cluster.namenode.address, token=TOKENS["bob"])
    try:
        await alice.mkdir("/group/tree/sub", 0o755, parents=True)
        await alice.write_file("/group/tree/sub/data", b"alice's data")
        await alice.chmod("/group/tree", 0o777)  # bob may move it (its ".." changes)
        for skip_trash in (False, True):
            with pytest.raises(PermissionError):
                await bob.remove("/group/tree", recursive=True, skip_trash=skip_trash)
        await bob.mkdir("/.Trash/bob", 0o700)
        with pytest.raises(PermissionError, match="cannot move it to the trash"):
            await bob.rename("/group/tree", "/.Trash/bob/taken")  # not through `remove`
        assert await alice.read_file("/group/tree/sub/data") == b"alice's data"

        await alice.mkdir("/group/box", 0o755)
        await alice.chmod("/group/box", 0o1777)  # bob may write it, not remove alice's
        await alice.write_file("/group/box/f", b"f")
        with pytest.raises(OperationNotPermittedError, match="sticky"):
            await bob.remove("/group/box", recursive=True)
        assert await alice.read_file("/group/box/f") == b"f"

        await alice.chmod("/group/tree/sub", 0o777)  # now bob could remove it all
        assert await bob.remove("/group/tree", recursive=True) == ("/.Trash/bob/Current/group/tree")
        await bob.mkdir("/group/mine/deep", 0o700, parents=True)
        await bob.write_file("/group/mine/deep/f", b"bob's")
        assert await bob.remove("/group/mine", recursive=True)
        await bob.rename("/.Trash/bob/Current/group/mine", "/group/mine")  # out: as POSIX says
        assert await bob.read_file("/group/mine/deep/f") == b"bob's"
    finally:
        await alice.close()
        await bob.close()


async def test_a_directory_with_snapshots_stays_in_the_trash_until_they_are_deleted(
    short: DataCluster,
) -> None:
    async with connected_client(short.namenode.address) as fs:
        await fs.mkdir("/p")
        await fs.mkdir("/p/kept")
        await fs.write_file("/p/kept/f", b"snapshotted")
        await fs.mkdir("/p/other")
        await fs.write_file("/p/other/g", b"plain")
        snaps = await fs.snapshots()
        await snaps.create("/p/kept", "s")
        await fs.remove("/p", recursive=True)

        async def checkpoints() -> list[str]:
            return await fs.listdir("/.Trash/root")

        async def emptied_around_it() -> bool:
            names = await checkpoints()
            if len(names) != 1 or names[0] == "Current":
                return False
            below = await fs.listdir(f"/.Trash/root/{names[0]}/p")
            return below == ["kept"] and await fs.listdir(f"/.Trash/root/{names[0]}/p/kept") == []

        await eventually(emptied_around_it, timeout=20)
        (checkpoint,) = await checkpoints()
        kept = f"/.Trash/root/{checkpoint}/p/kept"
        assert await fs.read_file(f"{kept}/.snapshot/s/f") == b"snapshotted"
        await snaps.delete(kept, "s")
        await eventually(lambda: _trash_empty(fs), timeout=20)
