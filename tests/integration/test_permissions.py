"""POSIX permissions enforced by a real namenode, for alice and bob (tests/accounts.py),
the identity coming from their credentials: one test per row of the rules
(namenode/permissions.py), the sticky and setgid bits, inode numbers, tickets, the
issue's scenarios, and the superuser (the `fs` and `dfs` fixtures act as root)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from plasmafs.client import Client, ExistsError, FileKind
from plasmafs.core.errors import AccessDeniedError, OperationNotPermittedError
from tests.conftest import DataCluster
from tests.support.accounts import STAFF_GID, TOKENS, UIDS
from tests.support.cluster import NamenodeProcess

ALICE, BOB = UIDS["alice"], UIDS["bob"]


@contextlib.asynccontextmanager
async def _user(address: str, name: str) -> AsyncIterator[Client]:
    client = Client(address, token=TOKENS[name])
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def alice(namenode: NamenodeProcess) -> AsyncIterator[Client]:
    async with _user(namenode.address, "alice") as client:
        yield client


@pytest.fixture
async def bob(namenode: NamenodeProcess) -> AsyncIterator[Client]:
    async with _user(namenode.address, "bob") as client:
        yield client


async def _home(root: Client, name: str, mode: int = 0o755) -> str:
    """/NAME, made by root and given to the user NAME."""
    path = f"/{name}"
    await root.mkdir(path, mode)
    await root.chown(path, UIDS[name], UIDS[name])
    return path


async def _refused(error: type[Exception], *attempts: Callable[[], Awaitable[object]]) -> None:
    for attempt in attempts:
        with pytest.raises(error):
            await attempt()


# --- any path: search on every directory walked ---------------------------------------------


async def test_a_path_needs_search_on_every_directory_walked(fs: Client, alice: Client) -> None:
    await fs.mkdir("/private", 0o700)
    await fs.mkdir("/private/d", 0o755)
    await fs.create("/private/d/f")
    assert (await alice.stat("/private")).mode == 0o700  # itself: search on / only
    await _refused(
        AccessDeniedError,
        lambda: alice.stat("/private/d/f"),
        lambda: alice.stat("/private/nope"),  # refused, not "no such file": nothing leaks
        lambda: alice.create("/private/d/g"),
        lambda: alice.listdir("/private/d"),
    )
    await fs.chmod("/private", 0o711)  # search without read
    assert (await alice.stat("/private/d/f")).kind is FileKind.FILE
    await fs.chmod("/private/d", 0o700)  # every level counts
    await _refused(AccessDeniedError, lambda: alice.stat("/private/d/f"))


async def test_a_symlink_target_is_walked_with_the_same_checks(fs: Client, alice: Client) -> None:
    await fs.mkdir("/private", 0o700)
    await fs.create("/private/f", 0o644)
    await _home(fs, "alice")
    await alice.symlink("/alice/to-file", "/private/f")
    await alice.symlink("/alice/to-dir", "../private")
    assert await alice.readlink("/alice/to-file") == "/private/f"  # the link itself is hers
    assert (await alice.lookup("/alice/to-dir")).kind is FileKind.SYMLINK
    await _refused(
        AccessDeniedError,
        lambda: alice.stat("/alice/to-file"),
        lambda: alice.stat("/alice/to-dir/f"),
        lambda: alice.create("/alice/to-dir/g"),
        lambda: alice.listdir("/alice/to-dir"),
    )
    assert (await fs.stat("/alice/to-dir/f")).kind is FileKind.FILE


# --- by inode number --------------------------------------------------------------------------


async def test_an_inode_number_needs_search_on_the_directories_above(
    fs: Client, alice: Client
) -> None:
    await fs.mkdir("/private", 0o700)
    await fs.mkdir("/private/d", 0o755)
    f = await fs.create("/private/d/f", 0o644)
    hers = await fs.create("/private/d/hers", 0o666)
    await fs.chown("/private/d/hers", ALICE, ALICE)
    # Inode numbers are easy to guess: a 0644 file under a 0700 directory stays closed.
    for ino in (f.ino, hers.ino):
        await _refused(AccessDeniedError, lambda ino=ino: alice.getattr(ino))
    await _refused(AccessDeniedError, lambda: alice.setattr(hers.ino, mode=0o600))
    t = await alice.begin()
    await _refused(
        AccessDeniedError,
        lambda: t.blocks(f.ino),
        lambda: t.allocate(hers.ino, 0, 1),
        lambda: t.getattr(hers.ino),
    )
    await t.abort()
    await fs.chmod("/private", 0o711)
    assert (await alice.getattr(hers.ino)).uid == ALICE
    assert (await alice.setattr(hers.ino, mode=0o600)).mode == 0o600
    # The walk follows renames: into a closed directory, out of one.
    await fs.chmod("/private", 0o700)
    await fs.rename("/private/d/f", "/f")
    assert (await alice.getattr(f.ino)).ino == f.ino
    await fs.mkdir("/closed", 0o700)
    await fs.rename("/f", "/closed/f")
    await _refused(AccessDeniedError, lambda: alice.getattr(f.ino))
    assert (await fs.getattr(f.ino)).ino == f.ino


async def test_a_search_allowed_by_number_ends_with_the_change_that_closes_it(
    fs: Client, alice: Client
) -> None:
    # The namenode remembers which directories a caller may search by number; each
    # change below must close what it closes on the very next request.
    await fs.mkdir("/open", 0o755)
    await fs.mkdir("/open/d", 0o750)
    await fs.chown("/open/d", 0, STAFF_GID)  # alice is in staff
    f = await fs.create("/open/d/f", 0o644)
    await fs.mkdir("/closed", 0o700)

    async def allowed() -> None:
        for _ in range(3):
            assert (await alice.getattr(f.ino)).ino == f.ino

    async def refused() -> None:
        await _refused(AccessDeniedError, lambda: alice.getattr(f.ino))

    await allowed()
    await fs.chmod("/open", 0o700)  # the mode of a directory above
    await refused()
    await fs.chmod("/open", 0o755)
    await allowed()
    await fs.chown("/open/d", 0, 0)  # the group of the parent
    await refused()
    await fs.chown("/open/d", 0, STAFF_GID)
    await allowed()
    await fs.rename("/open/d", "/closed/d")  # the parent moves under a closed directory
    await refused()
    await fs.rename("/closed/d", "/open/d")
    await allowed()
    await fs.rename("/open", "/closed/open")  # a directory further up moves
    await refused()


# --- readdir ----------------------------------------------------------------------------------


async def test_a_listing_needs_read_and_its_attributes_search(fs: Client, alice: Client) -> None:
    await fs.mkdir("/d", 0o744)  # others may read, not search
    await fs.create("/d/f")
    assert await alice.listdir("/d") == ["f"]
    await _refused(
        AccessDeniedError,
        lambda: alice.readdir("/d", plus=True),
        lambda: alice.stat("/d/f"),
    )
    await fs.chmod("/d", 0o711)  # search, not read
    await _refused(AccessDeniedError, lambda: alice.listdir("/d"))
    assert (await alice.stat("/d/f")).kind is FileKind.FILE
    await fs.chmod("/d", 0o755)
    entries, _ = await alice.readdir("/d", plus=True)
    assert [(e.name, e.attr.uid if e.attr else None) for e in entries] == [("f", 0)]


# --- create, mkdir, symlink -------------------------------------------------------------------


@pytest.mark.parametrize("others", [0o5, 0o2, 0o1, 0o3])
async def test_a_new_name_needs_write_and_search_on_its_parent(
    fs: Client, alice: Client, others: int
) -> None:
    await fs.mkdir("/d", 0o770 | others)
    allowed = others & 0o3 == 0o3
    makers = {
        "create": lambda: alice.create("/d/create"),
        "mkdir": lambda: alice.mkdir("/d/mkdir"),
        "symlink": lambda: alice.symlink("/d/symlink", "create"),
    }
    for make in makers.values():
        if allowed:
            assert (await make()).uid == ALICE
        else:
            await _refused(AccessDeniedError, make)
    assert await fs.listdir("/d") == (sorted(makers) if allowed else [])


async def test_a_taken_name_is_exists_before_any_write_check(fs: Client, alice: Client) -> None:
    await fs.mkdir("/ro", 0o755)
    await fs.create("/ro/f")
    # As open(O_CREAT) of an existing file in a directory one cannot write.
    await _refused(ExistsError, lambda: alice.create("/ro/f"), lambda: alice.mkdir("/ro/f"))
    await _refused(AccessDeniedError, lambda: alice.create("/ro/g"))


async def test_new_inodes_belong_to_the_caller(fs: Client, alice: Client, bob: Client) -> None:
    await fs.mkdir("/shared", 0o777)
    for client, uid in ((alice, ALICE), (bob, BOB), (fs, 0)):
        base = f"/shared/{uid}"
        made = [
            await client.mkdir(base),
            await client.create(f"{base}/f"),
            await client.symlink(f"{base}/ln", "f"),
        ]
        assert [(a.uid, a.gid) for a in made] == [(uid, uid)] * 3


async def test_a_setgid_directory_passes_its_group_down(fs: Client, alice: Client) -> None:
    await fs.mkdir("/proj", 0o2777)
    await fs.chown("/proj", gid=STAFF_GID)
    d = await alice.mkdir("/proj/sub", 0o755)
    assert (d.uid, d.gid, d.mode) == (ALICE, STAFF_GID, 0o2755)  # directories keep the bit
    f = await alice.create("/proj/sub/f", 0o2644)  # she is in staff: S_ISGID stays
    assert (f.uid, f.gid, f.mode) == (ALICE, STAFF_GID, 0o2644)
    assert (await alice.symlink("/proj/ln", "sub")).gid == STAFF_GID
    await fs.mkdir("/rootgroup", 0o2777)  # group 0, which alice is not in
    f = await alice.create("/rootgroup/f", 0o2755)
    assert (f.uid, f.gid, f.mode) == (ALICE, 0, 0o755)
    await _home(fs, "alice")
    assert (await alice.create("/alice/plain")).gid == ALICE


# --- unlink, rmdir, rename --------------------------------------------------------------------


async def test_removing_needs_write_and_search_on_the_parent(fs: Client, alice: Client) -> None:
    await fs.mkdir("/ro", 0o755)
    await fs.create("/ro/hers")
    await fs.mkdir("/ro/dir")
    for path in ("/ro/hers", "/ro/dir"):
        await fs.chown(path, ALICE, ALICE)  # owning the entry is not enough
    await _refused(
        AccessDeniedError, lambda: alice.unlink("/ro/hers"), lambda: alice.rmdir("/ro/dir")
    )
    await fs.chmod("/ro", 0o757)
    await fs.create("/ro/roots", 0o000)
    await alice.unlink("/ro/hers")
    await alice.rmdir("/ro/dir")
    await alice.unlink("/ro/roots")  # not sticky: the directory decides, not the file
    assert await fs.listdir("/ro") == []


async def test_a_sticky_directory_keeps_entries_to_their_owners(
    fs: Client, alice: Client, bob: Client
) -> None:
    await fs.mkdir("/tmp", 0o1777)
    await alice.create("/tmp/a", 0o666)
    await alice.mkdir("/tmp/ad", 0o777)
    await bob.create("/tmp/b")
    await _refused(
        OperationNotPermittedError,
        lambda: bob.unlink("/tmp/a"),
        lambda: bob.rmdir("/tmp/ad"),
        lambda: bob.rename("/tmp/a", "/tmp/x"),
        lambda: bob.rename("/tmp/b", "/tmp/a"),  # replacing hers
    )
    assert await fs.listdir("/tmp") == ["a", "ad", "b"]
    await bob.rename("/tmp/b", "/tmp/c")  # his own
    await alice.unlink("/tmp/a")
    await fs.rmdir("/tmp/ad")  # the superuser
    await fs.chown("/tmp", BOB, BOB)  # the directory's owner removes anyone's entries
    await alice.create("/tmp/a2")
    await bob.unlink("/tmp/a2")
    assert await fs.listdir("/tmp") == ["c"]


async def test_rename_needs_both_parents_and_write_on_a_directory_changing_parent(
    fs: Client, alice: Client
) -> None:
    await fs.mkdir("/ro", 0o755)
    await fs.create("/ro/f")
    await fs.chown("/ro/f", ALICE, ALICE)
    await fs.mkdir("/shared", 0o777)
    await alice.create("/shared/g")
    await _refused(
        AccessDeniedError,
        lambda: alice.rename("/ro/f", "/shared/f"),  # the source's parent
        lambda: alice.rename("/shared/g", "/ro/g"),  # the target's parent
        lambda: alice.rename("/shared/g", "/ro/f"),  # replacing in it
    )
    await fs.mkdir("/shared/roots", 0o755)
    await alice.mkdir("/shared/sub")
    # Moving root's directory elsewhere changes its "..": alice cannot write it.
    await _refused(AccessDeniedError, lambda: alice.rename("/shared/roots", "/shared/sub/r"))
    await alice.rename("/shared/roots", "/shared/renamed")  # same parent: fine
    await fs.create("/shared/roots-file", 0o600)
    await alice.rename("/shared/g", "/shared/roots-file")  # not sticky: replacing is fine
    assert (await fs.stat("/shared/roots-file")).uid == ALICE
    assert await fs.listdir("/shared") == ["renamed", "roots-file", "sub"]


# --- attributes -------------------------------------------------------------------------------


async def test_only_the_owner_changes_the_mode(fs: Client, alice: Client, bob: Client) -> None:
    await _home(fs, "alice")
    await alice.create("/alice/f", 0o644)
    assert (await alice.chmod("/alice/f", 0o600)).mode == 0o600
    await fs.create("/roots")
    await _refused(
        OperationNotPermittedError,
        lambda: bob.chmod("/alice/f", 0o666),
        lambda: alice.chmod("/roots", 0o777),
    )
    assert (await fs.chmod("/alice/f", 0o640)).mode == 0o640
    await fs.chown("/alice/f", gid=0)  # a group alice is not in: S_ISGID is dropped
    assert (await alice.chmod("/alice/f", 0o2755)).mode == 0o755
    await alice.chown("/alice/f", gid=STAFF_GID)
    assert (await alice.chmod("/alice/f", 0o2755)).mode == 0o2755


async def test_only_the_superuser_gives_away_and_an_owner_picks_its_groups(
    fs: Client, alice: Client, bob: Client
) -> None:
    await _home(fs, "alice")
    await alice.create("/alice/f")
    await _refused(
        OperationNotPermittedError,
        lambda: alice.chown("/alice/f", BOB),
        lambda: alice.chown("/alice/f", gid=0),  # root's group
        lambda: alice.chown("/alice/f", gid=BOB),  # bob's group
        lambda: bob.chown("/alice/f", gid=STAFF_GID),  # bob's group, not his file
    )
    assert (await alice.chown("/alice/f", ALICE)).uid == ALICE  # her own uid: no change
    assert (await alice.chown("/alice/f", gid=STAFF_GID)).gid == STAFF_GID
    a = await fs.chown("/alice/f", BOB, 0)
    assert (a.uid, a.gid) == (BOB, 0)


async def test_truncate_and_replication_need_write(fs: Client, alice: Client, bob: Client) -> None:
    await _home(fs, "alice")
    await alice.create("/alice/f", 0o644)
    await _refused(
        AccessDeniedError,
        lambda: bob.setattr("/alice/f", size=0),
        lambda: bob.setattr("/alice/f", replication=2),
    )
    await alice.chmod("/alice/f", 0o646)
    assert (await bob.setattr("/alice/f", size=5)).size == 5
    assert (await bob.setattr("/alice/f", replication=2)).replication == 2
    await alice.chmod("/alice/f", 0o444)
    await _refused(AccessDeniedError, lambda: alice.setattr("/alice/f", size=0))  # owner too


async def test_mtime_now_needs_write_and_any_other_time_ownership(
    fs: Client, alice: Client, bob: Client
) -> None:
    await _home(fs, "alice")
    f = await alice.create("/alice/f", 0o644)
    await _refused(
        AccessDeniedError, lambda: bob.touch("/alice/f"), lambda: bob.setattr("/alice/f")
    )
    await _refused(OperationNotPermittedError, lambda: bob.setattr("/alice/f", mtime_ns=1))
    await alice.chmod("/alice/f", 0o646)
    assert (await bob.touch("/alice/f")).mtime_ns >= f.mtime_ns
    await _refused(OperationNotPermittedError, lambda: bob.touch("/alice/f", 1))
    assert (await alice.touch("/alice/f", 7)).mtime_ns == 7
    assert (await alice.setattr("/alice/f", mtime_ns=1)).mtime_ns == 1


# --- the superuser ----------------------------------------------------------------------------


async def test_the_superuser_passes_every_check(fs: Client, alice: Client) -> None:
    await _home(fs, "alice", 0o700)
    f = await alice.create("/alice/f", 0o000)
    await alice.mkdir("/alice/d", 0o000)
    await alice.chmod("/alice", 0o1000)  # sticky, and nothing for anyone
    assert (await fs.stat("/alice/f")).mode == 0o000
    assert (await fs.getattr(f.ino)).uid == ALICE
    assert await fs.listdir("/alice") == ["d", "f"]
    await fs.create("/alice/d/g")
    await fs.setattr("/alice/f", mtime_ns=1, size=3, mode=0o2000)
    await fs.rename("/alice/d/g", "/alice/g")
    await fs.unlink("/alice/f")
    assert await fs.listdir("/alice") == ["d", "g"]


# --- tickets ----------------------------------------------------------------------------------


async def test_read_tickets_need_read_permission(dfs: Client, data_cluster: DataCluster) -> None:
    address = data_cluster.namenode.address
    await _home(dfs, "alice")
    async with _user(address, "alice") as alice, _user(address, "bob") as bob:
        await alice.write_file("/alice/secret", b"hers")
        await alice.chmod("/alice/secret", 0o600)
        assert await alice.read_file("/alice/secret") == b"hers"
        ino = (await bob.stat("/alice/secret")).ino
        t = await bob.begin()
        await _refused(
            AccessDeniedError,
            lambda: bob.read_file("/alice/secret"),
            lambda: bob.blocks("/alice/secret"),
            lambda: t.blocks(ino),
        )
        await t.abort()
    assert await dfs.read_file("/alice/secret") == b"hers"


async def test_write_tickets_need_write_permission(dfs: Client, data_cluster: DataCluster) -> None:
    address = data_cluster.namenode.address
    await _home(dfs, "alice")
    async with _user(address, "alice") as alice, _user(address, "bob") as bob:
        ino = (await alice.write_file("/alice/ro", b"first")).ino
        t = await bob.begin()
        await _refused(AccessDeniedError, lambda: t.allocate(ino, 0, 1))  # 0644: not bob's
        await t.abort()
        await alice.chmod("/alice/ro", 0o444)
        t = await alice.begin()
        await _refused(AccessDeniedError, lambda: t.allocate(ino, 0, 1))
        await t.abort()
        await _refused(AccessDeniedError, lambda: alice.write_file("/alice/ro", b"second"))
        assert await alice.read_file("/alice/ro") == b"first"


async def test_a_file_created_read_only_is_writable_in_its_transaction(
    dfs: Client, data_cluster: DataCluster
) -> None:
    await _home(dfs, "alice")
    async with _user(data_cluster.namenode.address, "alice") as alice:
        async with alice.transaction() as t:
            a = await t.create("/alice/new", 0o444)
            assert (await t.allocate(a.ino, 0, 1)).extents  # as open(O_CREAT) with 0444
            await t.setattr(a.ino, size=0)  # and the reservation goes again
        t = await alice.begin()
        await _refused(
            AccessDeniedError, lambda: t.allocate(a.ino, 0, 1), lambda: t.setattr(a.ino, size=1)
        )
        await t.abort()


# --- the issue's scenarios --------------------------------------------------------------------


async def test_the_issues_scenarios_are_refused(dfs: Client, data_cluster: DataCluster) -> None:
    """A non-root user could read root's mode-000 file, create in root's 0700
    directory, and chmod, chown and remove root's files."""
    await dfs.write_file("/secret", b"root only")
    await dfs.chmod("/secret", 0o000)
    await dfs.mkdir("/rootdir", 0o700)
    async with _user(data_cluster.namenode.address, "alice") as alice:
        await _refused(
            AccessDeniedError,
            lambda: alice.read_file("/secret"),
            lambda: alice.write_file("/secret", b"mine"),
            lambda: alice.create("/rootdir/x"),
            lambda: alice.mkdir("/rootdir/x"),
            lambda: alice.unlink("/secret"),
        )
        await _refused(
            OperationNotPermittedError,
            lambda: alice.chmod("/secret", 0o644),
            lambda: alice.chown("/secret", ALICE),
            lambda: alice.chown("/secret", gid=ALICE),
        )
    a = await dfs.stat("/secret")
    assert (a.mode, a.uid, a.gid, a.size) == (0o000, 0, 0, 9)
    assert await dfs.listdir("/rootdir") == []
    assert await dfs.read_file("/secret") == b"root only"  # the superuser passes
