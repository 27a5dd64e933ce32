"""`pfs local up` keeps the shape (volume size, blocksize) the cluster was made with:
another one is refused before anything starts, with a way out, and a refused shape is
never recorded (else every later plain `pfs local up` would fail the same way)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from plasmafs.local.postgres import postgres_running, stop_postgres
from tests.integration.test_cli import _daemons_under
from tests.support.cli_runner import assert_error, assert_ok, clean_env, run_pfs


def _shape(home: Path) -> dict[str, int]:
    return dict(json.loads((home / "shape.json").read_text()))


def test_a_refused_shape_is_not_recorded_and_the_error_says_how_to_recover(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    try:
        first = run_pfs(env, "local", "up", "--datanodes", "1", "--capacity", "64M", timeout=120)
        assert_ok(first, None)
        made = _shape(home)
        assert made == {
            "datanodes": 1, "capacity": 64 * 1024**2, "blocksize": 1024**2, "namenodes": 1,
            "racks": 1,
        }  # fmt: skip
        assert_ok(run_pfs(env, "mkdir", "/kept"))
        assert_ok(run_pfs(env, "local", "down", timeout=120), None)

        for flags, given in [
            (("--capacity", "128M"), "--capacity 128M"),
            (("--blocksize", "512K"), "--blocksize 512K"),
        ]:
            refused = run_pfs(env, "local", "up", *flags, timeout=120)
            line = assert_error(
                refused, "local", "--capacity 64M --blocksize 1M", f"not {given}", str(home)
            )
            assert "pfs local down" in line and "without" in line, line
            assert _daemons_under(home) == []
            assert _shape(home) == made

        # The same also while the cluster runs; a plain `up` then runs the recorded shape.
        assert_ok(run_pfs(env, "local", "up", timeout=120), None)
        assert_error(run_pfs(env, "local", "up", "--capacity", "1G", timeout=120), "local")
        assert_ok(run_pfs(env, "ls", "/"), ".Trash\nkept\n")
        assert _shape(home) == made
        assert_ok(run_pfs(env, "local", "down", timeout=120), None)

        # Without a recorded shape (a PFS_HOME from before it was kept), the volume is the
        # one to refuse: that is not recorded either, and the error says what to do.
        (home / "shape.json").unlink()
        refused = run_pfs(env, "local", "up", "--datanodes", "1", "--capacity", "128M", timeout=120)
        line = assert_error(refused, "local", "has 64 blocks, the settings ask for 128")
        assert "--capacity and --blocksize it was made with" in line, line
        assert "pfs local down" in line and str(home) in line, line
        assert not (home / "shape.json").exists()
        assert _daemons_under(home) == []
        again = run_pfs(env, "local", "up", "--datanodes", "1", "--capacity", "64M", timeout=120)
        assert_ok(again, None)
        assert _shape(home) == made
        assert_ok(run_pfs(env, "ls", "/"), ".Trash\nkept\n")
    finally:
        run_pfs(env, "local", "down", timeout=120)
        for pid, _ in _daemons_under(home):
            os.kill(pid, signal.SIGKILL)
        if postgres_running(home / "postgres"):
            stop_postgres(home / "postgres")


@pytest.mark.slow
def test_a_local_cluster_with_a_standby_namenode_survives_the_active_ones_death(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    try:
        up = run_pfs(env, "local", "up", "--namenodes", "2", "--datanodes", "1",
                     "--capacity", "64M", timeout=120)  # fmt: skip
        assert_ok(up, None)
        assert "(pid" in up.out and ", active)" in up.out and ", standby)" in up.out
        record = json.loads((home / "client.json").read_text())
        assert len(record["namenode"].split(",")) == 2  # clients know both
        assert_ok(run_pfs(env, "mkdir", "/kept"))
        state = json.loads((home / "cluster.json").read_text())
        os.kill(state["namenode_pid"], signal.SIGKILL)
        # Through the standby, once it took over.
        assert_ok(run_pfs(env, "ls", "/"), ".Trash\nkept\n")
        assert_ok(run_pfs(env, "mkdir", "/after"))
        roles = run_pfs(env, "admin", "namenodes")
        assert_ok(roles, None)
        assert [line.split()[1] for line in roles.lines[1:3]] == ["not", "active"], roles.out
        status = run_pfs(env, "local", "status")
        assert "namenode 1:  NOT running" in status.out, status.out
        assert "namenode 2:  running" in status.out and ", active" in status.out
        # `up` brings the dead one back beside the active one, as a standby.
        assert_ok(run_pfs(env, "local", "up", timeout=120), None)
        status = run_pfs(env, "local", "status")
        assert_ok(status, None)
        lines = status.out.splitlines()
        assert lines[0].endswith("standby") and lines[1].endswith("active"), status.out
        assert_ok(run_pfs(env, "ls", "/"), ".Trash\nafter\nkept\n")
    finally:
        run_pfs(env, "local", "down", timeout=120)


def test_racks_spread_a_local_clusters_datanodes_and_replicas(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home)
    try:
        up = run_pfs(env, "local", "up", "--datanodes", "2", "--racks", "2",
                     "--capacity", "64M", timeout=120)  # fmt: skip
        assert_ok(up, None)
        assert "/rack1" in up.out and "/rack2" in up.out, up.out
        listed = run_pfs(env, "admin", "datanodes")
        assert_ok(listed, None)
        assert sorted(line.split()[2] for line in listed.lines[1:]) == ["/rack1", "/rack2"]
        data = tmp_path / "data"
        data.write_bytes(os.urandom(3 * 1024 * 1024))
        put = run_pfs(env, "put", "-rep", "2", str(data), "/f")
        assert put.rc == 0, put
        fsck = run_pfs(env, "fsck", "/")
        assert_ok(fsck, None)
        assert any(line.split()[:3] == ["Mis-replicated", "blocks:", "0"] for line in fsck.lines)
        # One more datanode goes to the next rack in turn, or where it is told.
        added = run_pfs(env, "local", "add-datanode", timeout=120)
        assert_ok(added, None)
        assert added.out.startswith("added datanode 3 ") and "/rack1)" in added.out
        assert_error(
            run_pfs(env, "local", "add-datanode", "--location", "rack 9", timeout=120),
            "local",
            "location",
        )
        assert_error(run_pfs(env, "local", "status", "--racks", "3"), "local", "--racks")
        placed = run_pfs(env, "local", "add-datanode", "--location", "/rack9", timeout=120)
        assert_ok(placed, None)
        listed = run_pfs(env, "admin", "datanodes")
        assert sorted(line.split()[2] for line in listed.lines[1:]) == [
            "/rack1", "/rack1", "/rack2", "/rack9"
        ]  # fmt: skip
        assert _shape(home)["datanodes"] == 4
        got = run_pfs(env, "get", "/f", str(tmp_path / "back"))
        assert got.rc == 0, got
        assert (tmp_path / "back").read_bytes() == data.read_bytes()
    finally:
        run_pfs(env, "local", "down", timeout=120)
