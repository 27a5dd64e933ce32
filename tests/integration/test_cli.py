"""The `pfs` command line, run as a real subprocess against a real namenode.

Every command runs as `python -m plasmafs.cli ...` with a private PFS_HOME; the
namenode comes from PFS_CLIENT_NAMENODE (the `namenode` fixture) except in the tests
of configuration and of `pfs local`. Setup and verification go through the client
library, so the CLI's output is checked against what the namenode really holds.
Errors must be one line `pfs: COMMAND: message` on stderr, a non-zero exit status and
no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from plasmafs.client import Client, FileKind, SyncClient
from plasmafs.core.attributes import Attr
from plasmafs.local.cluster import load_state, process_alive
from plasmafs.local.postgres import postgres_running, stop_postgres
from tests.support.accounts import GROUP_NAMES, USER_NAMES
from tests.support.cli_runner import Pfs, assert_error, assert_ok, clean_env, run_pfs
from tests.support.cluster import NamenodeProcess

# Variables that would point the CLI (or `pfs local up`) somewhere else than intended.


def user_name(uid: int) -> str:
    """The owner `ls -l` shows: the cluster's name of `uid` (not this host's), else the id."""
    return USER_NAMES.get(uid, str(uid))


def group_name(gid: int) -> str:
    """The group `ls -l` shows: the cluster's name of `gid`, else the id."""
    return GROUP_NAMES.get(gid, str(gid))


def minute(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ns / 1e9))


def long_line(mode: str, attr: Attr, name: str, *, replication: str = "-") -> str:
    """The `ls -l` line the CLI documents: mode, links, replication, owner, group, size,
    mtime to the minute, name."""
    return (
        f"{mode} {attr.nlink:>3} {replication:>2} {user_name(attr.uid):<8} "
        f"{group_name(attr.gid):<8} {attr.size:>12} {minute(attr.mtime_ns)} {name}"
    )


def kinds(lib: SyncClient, directory: str) -> dict[str, FileKind]:
    return {e.name: e.kind for e in lib.scandir(directory)}


# --- namespace changes and listings --------------------------------------------------------


def test_mkdir_touch_and_plain_ls(pfs: Pfs, lib: SyncClient) -> None:
    assert_ok(pfs("mkdir", "/a"))
    assert_ok(pfs("mkdir", "-p", "/a/b/c"))
    assert_ok(pfs("mkdir", "-p", "/a/b/c"))  # -p: existing directories are fine
    assert_ok(pfs("mkdir", "-m", "700", "/private"))
    assert lib.lookup("/private").mode == 0o700
    assert lib.lookup("/a/b/c").kind is FileKind.DIRECTORY

    assert_error(pfs("mkdir", "/a"), "mkdir", "/a", "exists")
    assert_error(pfs("mkdir", "/missing/child"), "mkdir", "/missing")
    assert_error(pfs("mkdir", "-m", "9", "/bad"), "mkdir", "invalid mode '9'")
    assert not lib.exists("/bad")

    # One bad path among several: one error line, the others are still done.
    assert_error(pfs("mkdir", "/ok1", "/a", "/ok2"), "mkdir", "/a", "exists")
    assert lib.exists("/ok1") and lib.exists("/ok2")

    assert_ok(pfs("touch", "/a/f", "/a/g"))
    assert lib.lookup("/a/f").kind is FileKind.FILE
    before = lib.lookup("/a/f").mtime_ns
    time.sleep(0.01)
    assert_ok(pfs("touch", "/a/f"))  # existing file: new mtime, nothing else
    after = lib.lookup("/a/f")
    assert after.mtime_ns > before and after.size == 0
    assert_error(pfs("touch", "/missing/f"), "touch", "/missing")

    assert_ok(pfs("ls", "/"), "a\nok1\nok2\nprivate\n")
    assert_ok(pfs("ls"), "a\nok1\nok2\nprivate\n")
    assert_ok(pfs("ls", "/a"), "b\nf\ng\n")
    assert_ok(pfs("ls", "/a/f"), "/a/f\n")
    assert_ok(pfs("ls", "-d", "/a"), "/a\n")
    assert_ok(pfs("ls", "/a/b/c"), "")
    assert_ok(pfs("ls", "/a/./b/../b/"), "c\n")

    assert_error(pfs("ls", "/nope"), "ls", "/nope")
    both = pfs("ls", "/nope", "/a/b")
    assert_error(both, "ls", "/nope")
    assert both.out == "/a/b:\nc\n"


def test_ls_long_inode_recursive_and_directory_flags(pfs: Pfs, lib: SyncClient) -> None:
    with lib.transaction() as t:
        t.mkdir("/d")
        t.create("/d/file", 0o640, replication=3)
        t.mkdir("/d/sub")
        t.create("/d/sub/deep")
        t.mkdir("/d/sub/inner")
        t.symlink("/d/link", "/d/sub")
    lib.setattr("/d/file", size=12345)
    d, f, link, sub = (lib.lookup(p) for p in ("/d", "/d/file", "/d/link", "/d/sub"))
    assert (f.size, f.replication, link.size) == (12345, 3, len("/d/sub"))

    expected_long = [
        long_line("-rw-r-----", f, "file", replication="3"),
        long_line("lrwxrwxrwx", link, "link") + " -> /d/sub",
        long_line("drwxr-xr-x", sub, "sub"),
    ]
    listing = pfs("ls", "-l", "/d")
    assert_ok(listing, "\n".join(expected_long) + "\n")
    # The long format really carries the attributes: mode, links, replication, size.
    file_fields, sub_fields = listing.lines[0].split(), listing.lines[2].split()
    assert file_fields[:3] == ["-rw-r-----", "1", "3"] and file_fields[5] == "12345"
    assert sub_fields[:3] == ["drwxr-xr-x", "3", "-"] and sub_fields[5] == "0"

    inos = [f.ino, link.ino, sub.ino]
    assert len(set(inos)) == 3
    assert_ok(
        pfs("ls", "-i", "/d"),
        "".join(f"{i:>10} {n}\n" for i, n in zip(inos, ["file", "link", "sub"], strict=True)),
    )
    assert_ok(
        pfs("ls", "-l", "-i", "/d"),
        "".join(f"{i:>10} {line}\n" for i, line in zip(inos, expected_long, strict=True)),
    )

    assert_ok(
        pfs("ls", "-R", "/d"),
        "/d:\nfile\nlink\nsub\n\n/d/sub:\ndeep\ninner\n\n/d/sub/inner:\n",
    )
    # Several targets get headers too, in the order given.
    assert_ok(pfs("ls", "/d/sub", "/d/sub/inner"), "/d/sub:\ndeep\ninner\n\n/d/sub/inner:\n")

    # -d lists the directory (or link) itself; without it a link to a directory is followed.
    assert_ok(pfs("ls", "-d", "/d", "/d/link"), "/d\n/d/link\n")
    assert_ok(pfs("ls", "-l", "-d", "/d"), long_line("drwxr-xr-x", d, "/d") + "\n")
    assert_ok(
        pfs("ls", "-l", "-d", "/d/link"), long_line("lrwxrwxrwx", link, "/d/link") + " -> /d/sub\n"
    )
    assert_ok(pfs("ls", "/d/link"), "deep\ninner\n")
    assert_ok(pfs("ls", "-i", "-d", "/d"), f"{d.ino:>10} /d\n")


def test_stat_and_fsstat(pfs: Pfs, lib: SyncClient) -> None:
    empty_run = pfs("fsstat")
    assert_ok(empty_run, None)
    empty = empty_run.lines
    assert empty[:3] == [
        "files:                   0",
        "directories:             1",
        "symlinks:                0",
    ]
    assert [line.split(":")[0] for line in empty[3:]] == [
        "capacity",
        "used",
        "held back",
        "live datanodes",
        "blocksize",
        "under-replicated blocks",
        "missing blocks",
        "corrupt blocks",
    ]

    with lib.transaction() as t:
        t.mkdir("/s")
        t.create("/s/f", 0o600, replication=2)
        t.create("/s/g")
        t.symlink("/s/l", "f")
    lib.chown("/s/f", 4321, 8765)
    f = lib.lookup("/s/f")

    def modify(ns: int) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns / 1e9)) + f".{ns % 10**9:09d}"

    assert_ok(
        pfs("stat", "/s/../s/f"),
        "\n".join(
            [
                "  File: /s/f",
                f"  Size: {0:<12} Blocksize: {f.blocksize:<10} regular file",
                f" Inode: {f.ino:<12} Links: {1:<6} Replication: 2",
                f"Access: (0600/-rw-------)  Uid: (4321/{user_name(4321)})"
                f"  Gid: (8765/{group_name(8765)})",
                f"Modify: {modify(f.mtime_ns)}",
                f"Change: {modify(f.ctime_ns)}",
                f"Version: {f.version}",
            ]
        )
        + "\n",
    )
    link = pfs("stat", "/s/l").lines
    assert link[0] == "  File: /s/l"
    assert link[1].split() == ["Size:", "1", "Blocksize:", str(f.blocksize), "symbolic", "link"]
    assert link[3].startswith("Access: (0777/lrwxrwxrwx)")
    directory = pfs("stat", "/s").lines
    assert directory[1].endswith(" directory")
    assert directory[2].split()[2:4] == ["Links:", "2"]
    assert_error(pfs("stat", "/s/nope"), "stat", "/s/nope")

    assert pfs("fsstat").lines[:3] == [
        "files:                   2",
        "directories:             2",
        "symlinks:                1",
    ]
    assert_ok(pfs("rm", "/s/g", "/s/l"))
    assert pfs("fsstat").lines[:3] == [
        "files:                   1",
        "directories:             2",
        "symlinks:                0",
    ]


def test_mv_renames_moves_into_directories_and_checks_its_target(pfs: Pfs, lib: SyncClient) -> None:
    with lib.transaction() as t:
        t.mkdir("/dir")
        for name in ("a", "b", "c", "d", "plain"):
            t.create(f"/{name}")
    a_ino = lib.lookup("/a").ino

    assert_ok(pfs("mv", "/a", "/renamed"))
    assert not lib.exists("/a") and lib.lookup("/renamed").ino == a_ino

    assert_ok(pfs("mv", "/renamed", "/dir"))  # into the existing directory, same name
    assert lib.lookup("/dir/renamed").ino == a_ino and not lib.exists("/renamed")

    assert_ok(pfs("mv", "/b", "/c", "/dir/"))
    assert sorted(kinds(lib, "/dir")) == ["b", "c", "renamed"]

    # Several sources need a directory as the target: nothing is moved otherwise.
    assert_error(pfs("mv", "/d", "/plain", "/nowhere"), "mv", "/nowhere", "not a directory")
    assert_error(pfs("mv", "/d", "/dir/b", "/plain"), "mv", "/plain", "not a directory")
    assert lib.exists("/d") and lib.exists("/dir/b") and not lib.exists("/nowhere")

    assert_error(pfs("mv", "/d"), "mv", "source and a destination")
    assert_error(pfs("mv", "/missing", "/dir"), "mv", "/missing")
    assert_error(pfs("mv", "/dir", "/dir/inside"), "mv")
    assert sorted(kinds(lib, "/")) == ["d", "dir", "plain"]


async def _make_big_tree(address: str, files: int) -> None:
    async with Client(address) as fs, fs.transaction() as t:
        await t.mkdir("/tree")
        await t.mkdir("/tree/sub")
        await t.mkdir("/tree/sub/empty")
        await t.mkdir("/keep")
        await t.create("/keep/precious")
        creates = [t.create(f"/tree/f{i:05d}") for i in range(files)]
        creates += [t.create(f"/tree/sub/g{i:03d}") for i in range(50)]
        creates.append(t.symlink("/tree/to-keep", "/keep"))
        await asyncio.gather(*creates)


def test_rm_and_rmdir(pfs: Pfs, lib: SyncClient, namenode: NamenodeProcess) -> None:
    with lib.transaction() as t:
        t.mkdir("/d")
        t.create("/d/f")
        t.create("/lone")
        t.mkdir("/empty")

    assert_ok(pfs("rm", "/lone"))
    assert not lib.exists("/lone")
    assert_error(pfs("rm", "/lone"), "rm", "no such file or directory: /lone")
    assert_ok(pfs("rm", "-f", "/lone", "/no/such/thing"))

    assert_error(pfs("rm", "/d"), "rm", "/d", "is a directory")
    assert_error(pfs("rmdir", "/d"), "rmdir", "/d", "not empty")
    assert_error(pfs("rmdir", "/d/f"), "rmdir", "/d/f")
    assert lib.exists("/d/f")
    assert_ok(pfs("rmdir", "/empty"))
    assert not lib.exists("/empty")
    assert_error(pfs("rmdir", "/"), "rmdir")

    files = 1200
    asyncio.run(_make_big_tree(namenode.address, files))
    assert lib.fsstat().files == 1 + 1 + files + 50
    result = pfs("rm", "-r", "/tree", "/d")
    assert_ok(result)
    assert not lib.exists("/tree") and not lib.exists("/d")
    # The symbolic link inside the tree was removed, not followed.
    assert lib.listdir("/keep") == ["precious"]
    st = lib.fsstat()
    assert (st.files, st.directories, st.symlinks) == (1, 2, 0)
    assert_ok(pfs("rm", "-r", "-f", "/tree"))


def test_rm_recursive_on_root_refuses_without_removing_anything(pfs: Pfs, lib: SyncClient) -> None:
    lib.mkdir("/keep")
    assert_error(pfs("rm", "-r", "/"), "rm", "root")
    assert lib.exists("/keep")


def test_symlink_readlink_chmod_chown(pfs: Pfs, lib: SyncClient) -> None:
    lib.mkdir("/d")
    lib.create("/d/f")

    assert_ok(pfs("symlink", "/d/f", "/ln"))
    assert_ok(pfs("symlink", "../dangling target", "/d/rel"))
    assert lib.lookup("/ln").kind is FileKind.SYMLINK
    assert_ok(pfs("readlink", "/ln", "/d/rel"), "/d/f\n../dangling target\n")
    assert_error(pfs("readlink", "/d/f"), "readlink", "/d/f")
    assert_error(pfs("readlink", "/nope"), "readlink", "/nope")
    assert_error(pfs("symlink", "/d/f", "/ln"), "symlink", "/ln")
    assert_error(pfs("symlink", "", "/empty-target"), "symlink")
    assert not lib.exists("/empty-target")

    assert_ok(pfs("chmod", "640", "/d/f"))
    assert lib.lookup("/d/f").mode == 0o640
    assert_ok(pfs("chmod", "0o2750", "/d"))
    assert lib.lookup("/d").mode == 0o2750
    assert pfs("ls", "-l", "-d", "/d").out.startswith("drwxr-s---")
    assert_ok(pfs("chmod", "0600", "/ln"))  # follows the link
    assert lib.lookup("/d/f").mode == 0o600
    for bad in ("99", "abc", "17777", "-1", "u+q"):
        assert_error(pfs("chmod", bad, "/d/f"), "chmod", f"invalid mode {bad!r}")
    assert lib.lookup("/d/f").mode == 0o600
    assert_error(pfs("chmod", "644", "/nope"), "chmod", "/nope")

    assert_ok(pfs("chown", "1234:5678", "/d/f"))
    f = lib.lookup("/d/f")
    assert (f.uid, f.gid) == (1234, 5678)
    assert_ok(pfs("chown", "42", "/d/f"))
    assert (lib.lookup("/d/f").uid, lib.lookup("/d/f").gid) == (42, 5678)
    assert_ok(pfs("chown", ":7", "/d/f"))
    assert (lib.lookup("/d/f").uid, lib.lookup("/d/f").gid) == (42, 7)
    fields = pfs("ls", "-l", "/d/f").out.split()
    assert fields[3:5] == [user_name(42), group_name(7)]
    assert_error(pfs("chown", "4294967296", "/d/f"), "chown", "out of range")
    assert_error(pfs("chown", "no-such-user-pfs", "/d/f"), "chown", "no-such-user-pfs")
    assert_error(pfs("chown", "1:2", "/nope"), "chown", "/nope")
    assert (lib.lookup("/d/f").uid, lib.lookup("/d/f").gid) == (42, 7)


# --- configuration -----------------------------------------------------------------------


def test_without_a_configured_namenode_every_command_fails_in_one_line(
    tmp_path: Path, namenode: NamenodeProcess
) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    env = clean_env(home)  # an empty PFS_HOME, no PFS_CLIENT_NAMENODE
    line = assert_error(run_pfs(env, "ls", "/"), "ls", "no namenode configured")
    assert "PFS_CLIENT_NAMENODE" in line
    assert_error(run_pfs(env, "mkdir", "/x"), "mkdir", "no namenode configured")
    bad = dict(env, PFS_CLIENT_NAMENODE="no-port-here")
    assert_error(run_pfs(bad, "ls"), "ls", "host:port", "no-port-here")
    # --namenode beats the (missing) configuration.
    env.update({k: os.environ[k] for k in ("PFS_CLIENT_CA", "PFS_TOKEN_FILE")})
    assert_ok(run_pfs(env, "--namenode", namenode.address, "mkdir", "/via-flag"))
    assert_ok(run_pfs(env, "--namenode", namenode.address, "ls", "/"), "via-flag\n")
    assert list(home.iterdir()) == []  # a client never writes into PFS_HOME


@pytest.mark.slow  # a fault test that waits out the client's retries (~10 s)
def test_unreachable_namenode_fails_in_one_line_within_15_seconds(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The port is closed now: connections are refused.
    result = run_pfs(clean_env(tmp_path, f"127.0.0.1:{port}"), "ls", "/", timeout=30)
    assert_error(result, "ls", f"127.0.0.1:{port}")
    assert result.seconds < 15, result


# --- pfs local ------------------------------------------------------------------------------


def test_local_cluster_up_status_down(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    assert "PFS_NAMENODE_DSN" not in env and "PGHOST" not in env
    pids: list[int] = []
    try:
        up = run_pfs(env, "local", "up", "--datanodes", "1", "--capacity", "64M", timeout=120)
        assert_ok(up, None)
        assert up.lines[0] == f"local cluster started in {home}"
        state = load_state(home)
        assert state is not None and state.embedded_postgres
        pids.append(state.namenode_pid)
        assert f"{state.namenode_address} (pid {state.namenode_pid})" in up.lines[1]
        assert up.lines[2].startswith("  datanode 1: 127.0.0.1:")
        assert up.lines[3] == f"  metrics:    http://{state.metrics_address}/metrics"
        assert up.lines[4] == f"  postgresql: embedded, {home / 'postgres'}"
        assert (home / "client.json").is_file()

        # Plain commands find the namenode through PFS_HOME/client.json.
        assert "PFS_CLIENT_NAMENODE" not in env
        assert_ok(run_pfs(env, "ls", "/"), ".Trash\n")  # the trash: on by default
        assert_ok(run_pfs(env, "mkdir", "/hello"))
        assert_ok(run_pfs(env, "ls", "/"), ".Trash\nhello\n")

        again = run_pfs(env, "local", "up", timeout=120)
        assert_ok(again, None)
        assert again.lines[0] == f"local cluster already running in {home}"
        assert load_state(home) == state

        status = run_pfs(env, "local", "status")
        assert_ok(
            status,
            f"namenode:    running, pid {state.namenode_pid}, {state.namenode_address}, "
            "active\n"
            f"datanode 1:  running, pid {state.datanodes[0]['pid']}, "
            f"{state.datanodes[0]['address']}\n"
            f"postgresql:  running, embedded, {home / 'postgres'}\n",
        )
    finally:
        with contextlib.suppress(Exception):  # whatever `up` recorded, even if a check failed
            recorded = load_state(home)
            if recorded is not None and recorded.namenode_pid not in pids:
                pids.append(recorded.namenode_pid)
            if recorded is not None:
                pids.extend(int(str(d["pid"])) for d in recorded.datanodes)
        try:
            down = run_pfs(env, "local", "down", timeout=120)
        finally:  # never leave our daemons behind, even if `down` is broken
            for pid in pids:
                for marker in ("plasmafs.namenode", "plasmafs.datanode"):
                    if process_alive(pid, marker):
                        os.kill(pid, signal.SIGKILL)
            if postgres_running(home / "postgres"):
                stop_postgres(home / "postgres")
    assert_ok(down, None)
    assert down.out.startswith("stopped: datanode (pid ")
    assert down.out.rstrip().endswith(", postgresql")
    assert all(not process_alive(pid, "plasmafs.namenode") for pid in pids)
    assert not postgres_running(home / "postgres")
    assert not (home / "client.json").exists()

    status = run_pfs(env, "local", "status")
    assert status.rc != 0 and status.err == "", status
    assert status.out == f"cluster:     not started (no {home / 'cluster.json'})\n"
    assert_error(run_pfs(env, "ls", "/"), "ls", "no namenode configured")
    assert_ok(run_pfs(env, "local", "down"), "nothing was running\n")


def _daemons_under(home: Path) -> list[tuple[int, str]]:
    """Pids of plasmafs daemons whose command line names `home`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(home) in cmdline and (
            "plasmafs.namenode" in cmdline or "plasmafs.datanode" in cmdline
        ):
            found.append((int(proc.name), cmdline))
    return found


def test_local_up_that_fails_leaves_no_daemons_behind(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    try:
        assert_ok(
            run_pfs(env, "local", "up", "--datanodes", "1", "--capacity", "64M", timeout=120), None
        )
        assert_ok(run_pfs(env, "local", "down", timeout=120), None)
        # the volume exists with 64M: asking for another size must fail cleanly (without
        # the recorded shape, which `up` checks first, the datanode is the one to refuse)
        (home / "shape.json").unlink()
        failed = run_pfs(env, "local", "up", "--datanodes", "2", "--capacity", "128M", timeout=120)
        assert_error(failed, "local", "has 64 blocks, the settings ask for 128")
        assert _daemons_under(home) == []
    finally:
        run_pfs(env, "local", "down", timeout=120)
        for pid, _ in _daemons_under(home):
            os.kill(pid, signal.SIGKILL)
