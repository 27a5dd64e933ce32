"""The replica-health side of `pfs` and the library that needs no namenode support
beyond what is there: bad arguments refused before connecting, setrep changing the
replication of a file or of a tree, and one datanode of the local cluster stopped and
started again."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from plasmafs.client import Client, FileKind, NotFoundError, SyncClient, replication_change
from plasmafs.local.postgres import postgres_running, stop_postgres
from tests.conftest import DataCluster
from tests.integration.test_cli import _daemons_under
from tests.support.cli_runner import assert_error, assert_ok, clean_env, run_pfs


def test_bad_numbers_are_refused_before_connecting(tmp_path: Path) -> None:
    # Nothing listens on the namenode address: each error comes from the arguments.
    env = clean_env(tmp_path / "home", "127.0.0.1:1")
    cases = [
        (("setrep", "0", "/x"), "setrep", "replication must be a whole number from 1 to 32"),
        (("setrep", "-1", "/x"), "setrep", "not '-1'"),
        (("setrep", "33", "/x"), "setrep", "not '33'"),
        (("setrep", "-w", "two", "/x"), "setrep", "not 'two'"),
        (("admin", "decommission", "x"), "admin", "datanode id must be a positive integer"),
        (("admin", "recommission", "0"), "admin", "not '0'"),
        (("admin", "remove", "1.5"), "admin", "not '1.5'"),
        (("admin", "remove", "4294967296"), "admin", "not '4294967296'"),
        (("local", "stop-datanode"), "local", "needs the datanode's number"),
        (("local", "start-datanode", "x"), "local", "datanode number must be a positive integer"),
        (("local", "status", "2"), "local", "takes no datanode number"),
    ]
    for args, command, fragment in cases:
        assert_error(run_pfs(env, *args), command, fragment)


def test_local_datanode_commands_need_a_running_cluster(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    for action in ("stop-datanode", "start-datanode"):
        assert_error(run_pfs(env, "local", action, "1"), "local", "no local cluster is running")


def _tree(lib: SyncClient) -> None:
    with lib.transaction() as t:
        t.mkdir("/t")
        t.mkdir("/t/sub")
        t.mkdir("/t/sub/deeper")
        t.mkdir("/t/empty")
        t.create("/t/a", replication=1)
        t.create("/t/sub/b", replication=1)
        t.create("/t/sub/deeper/c", replication=3)
        t.symlink("/t/link", "/t/a")
        t.create("/other", replication=1)


def test_setrep_sets_a_file_or_every_file_below_a_directory(
    data_cluster: DataCluster, tmp_path: Path
) -> None:
    env = clean_env(tmp_path / "home", data_cluster.namenode.address)
    with SyncClient(data_cluster.namenode.address) as lib:
        _tree(lib)
        result = run_pfs(env, "setrep", "2", "/t")
        assert_ok(result, None)
        assert sorted(result.lines) == [
            "Replication 2 set: /t/a",
            "Replication 2 set: /t/sub/b",
            "Replication 2 set: /t/sub/deeper/c",
        ]
        for path in ("/t/a", "/t/sub/b", "/t/sub/deeper/c"):
            assert lib.stat(path).replication == 2, path
        assert lib.stat("/other").replication == 1
        assert lib.lookup("/t/link").kind is FileKind.SYMLINK

        # A symbolic link given by name is followed, as hdfs dfs -setrep does.
        assert_ok(run_pfs(env, "setrep", "3", "/t/link"), "Replication 3 set: /t/link\n")
        assert lib.stat("/t/a").replication == 3

        # One bad path among good ones: the others are set, one line for the bad one.
        mixed = run_pfs(env, "setrep", "1", "/t/sub/b", "/t/nope", "/other")
        assert_error(mixed, "setrep", "/t/nope")
        assert mixed.lines == ["Replication 1 set: /t/sub/b", "Replication 1 set: /other"]
        assert lib.stat("/t/sub/b").replication == 1

        # The synchronous facade has it too, with nothing written for it.
        assert lib.setrep("/t/sub", 2) == ["/t/sub/b", "/t/sub/deeper/c"]
        with pytest.raises(NotFoundError):
            lib.setrep("/missing", 2)


async def test_setrep_changes_a_big_directory_a_page_per_transaction(
    dfs: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replication_change, "BATCH", 3)
    async with dfs.transaction() as t:
        await t.mkdir("/big")
        for k in range(10):
            await t.create(f"/big/f{k:02d}", replication=1)
        await t.mkdir("/big/d")
        await t.create("/big/d/inner", replication=1)
    before = await dfs.request_counts()
    changed = await dfs.setrep("/big", 2)
    after = await dfs.request_counts()
    assert sorted(changed) == sorted([f"/big/f{k:02d}" for k in range(10)] + ["/big/d/inner"])
    for path in changed:
        assert (await dfs.stat(path)).replication == 2
    # Four pages of /big (3+3+3+2 entries with the directory) and one of /big/d.
    assert after.get("commit", 0) - before.get("commit", 0) == 5


def test_local_stop_and_start_one_datanode(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    try:
        up = run_pfs(env, "local", "up", "--datanodes", "2", "--capacity", "64M", timeout=120)
        assert_ok(up, None)
        state = json.loads((home / "cluster.json").read_text())
        second = state["datanodes"][1]
        first_pid = second["pid"]

        assert_error(run_pfs(env, "local", "stop-datanode", "3"), "local", "datanodes 1 to 2")
        stopped = run_pfs(env, "local", "stop-datanode", "2")
        assert_ok(
            stopped, f"stopped datanode 2 (pid {first_pid}, {state['datanodes'][1]['address']})\n"
        )
        status = run_pfs(env, "local", "status")
        assert status.rc != 0
        lines = {line.split(":")[0]: line for line in status.lines}
        assert "NOT running" in lines["datanode 2"] and "running, pid" in lines["datanode 1"]
        assert_error(run_pfs(env, "local", "stop-datanode", "2"), "local", "already stopped")
        assert_error(run_pfs(env, "local", "start-datanode", "1"), "local", "already running")
        assert_ok(run_pfs(env, "mkdir", "/still-served"))

        started = run_pfs(env, "local", "start-datanode", "2", timeout=120)
        assert_ok(started, None)
        again = json.loads((home / "cluster.json").read_text())
        restarted = again["datanodes"][1]
        assert restarted["pid"] != first_pid and restarted["dir"] == state["datanodes"][1]["dir"]
        assert (
            started.out == f"started datanode 2 (pid {restarted['pid']}, {restarted['address']})\n"
        )
        assert again["datanodes"][0] == state["datanodes"][0]
        assert again["namenode_pid"] == state["namenode_pid"]
        assert_ok(run_pfs(env, "local", "status"), None)
        assert_ok(run_pfs(env, "ls", "/"), ".Trash\nstill-served\n")
    finally:
        run_pfs(env, "local", "down", timeout=120)
        for pid, _ in _daemons_under(home):
            os.kill(pid, signal.SIGKILL)
        if postgres_running(home / "postgres"):
            stop_postgres(home / "postgres")
