"""`pfs` started with a closed stdin, stdout or stderr (`<&-`, `>&-`, `2>&-`).

The event loop's library aborts the process when it closes a descriptor 0-2 it
opened itself, which is where its first descriptors land when those are closed. A
command must run as usual, fail with a normal exit status where it must write to a
closed stdout or read a closed stdin, and never abort.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plasmafs.client import SyncClient
from tests.conftest import DataCluster
from tests.support.cli_runner import Result, assert_error, clean_env
from tests.support.cluster import NamenodeProcess


def run_closed(env: dict[str, str], closed: int, *args: str) -> Result:
    """Run `pfs ARGS...` with descriptor `closed` (0, 1 or 2) closed in the child."""
    started = time.monotonic()
    # The shell closes it, as `pfs ... <&-` would: no fork-time hook in this process.
    proc = subprocess.run(
        [
            "sh",
            "-c",
            f'exec "$@" {closed}>&-',
            "sh",
            sys.executable,
            "-m",
            "plasmafs.cli",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def assert_no_abort(result: Result) -> None:
    """Neither a signal (SIGABRT: -6) nor the shell's 128+N status of one, no traceback."""
    assert result.rc >= 0, result
    assert result.rc != 128 + signal.SIGABRT, result
    assert "Traceback" not in result.err and "Assertion" not in result.err, result


@pytest.fixture
def env(namenode: NamenodeProcess, tmp_path: Path) -> dict[str, str]:
    """The CLI's environment, pointed at the test's namenode."""
    home = tmp_path / "pfs-home"
    home.mkdir()
    return clean_env(home, namenode.address)


def test_a_closed_stdin_is_fine_for_commands_that_do_not_read_it(
    env: dict[str, str], namenode: NamenodeProcess
) -> None:
    with SyncClient(namenode.address) as lib:
        lib.mkdir("/d")
    for args, out in [(("ls", "/"), "d\n"), (("mkdir", "/e"), ""), (("--help",), None)]:
        result = run_closed(env, 0, *args)
        assert_no_abort(result)
        assert result.rc == 0 and result.err == "", result
        if out is not None:
            assert result.out == out, result
    failed = run_closed(env, 0, "ls", "/nope")
    assert_no_abort(failed)
    assert_error(failed, "ls", "/nope")


def test_writing_to_a_closed_stdout_fails_with_a_normal_exit(
    env: dict[str, str], namenode: NamenodeProcess
) -> None:
    with SyncClient(namenode.address) as lib:
        lib.mkdir("/d")
    for args in [("ls", "/"), ("ls", "-l", "/"), ("stat", "/d"), ("fsstat",)]:
        result = run_closed(env, 1, *args)
        assert_no_abort(result)
        assert_error(result, args[0], "standard output")
    helped = run_closed(env, 1, "--help")
    assert_no_abort(helped)
    assert helped.rc != 0, helped
    # A command that writes nothing to stdout does not notice.
    quiet = run_closed(env, 1, "mkdir", "/e")
    assert_no_abort(quiet)
    assert quiet.rc == 0 and quiet.err == "", quiet
    with SyncClient(namenode.address) as lib:
        assert lib.exists("/e")


def test_a_closed_stderr_keeps_the_exit_status(
    env: dict[str, str], namenode: NamenodeProcess
) -> None:
    with SyncClient(namenode.address) as lib:
        lib.mkdir("/d")
    ok = run_closed(env, 2, "ls", "/")
    assert_no_abort(ok)
    assert ok.rc == 0 and ok.out == "d\n", ok
    failed = run_closed(env, 2, "ls", "/nope")
    assert_no_abort(failed)
    assert failed.rc == 1 and failed.out == "", failed


def _data_env(cluster: DataCluster, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "pfs-home"
    home.mkdir()
    return clean_env(home, cluster.namenode.address)


def test_put_from_a_closed_stdin_and_cat_to_a_closed_stdout(
    data_cluster: DataCluster, tmp_path: Path
) -> None:
    env = _data_env(data_cluster, tmp_path)
    with SyncClient(data_cluster.namenode.address) as lib:
        lib.write_file("/f", b"x" * 200_000)
    put = run_closed(env, 0, "put", "-", "/from-stdin")
    assert_no_abort(put)
    assert_error(put, "put", "standard input")
    cat = run_closed(env, 1, "cat", "/f")
    assert_no_abort(cat)
    assert_error(cat, "cat", "standard output")
    with SyncClient(data_cluster.namenode.address) as lib:
        assert not lib.exists("/from-stdin")
