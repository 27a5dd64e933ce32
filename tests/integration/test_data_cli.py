"""The data commands of `pfs` (put, get, cat, blocks) and the library's file objects, on
a cluster with datanodes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from plasmafs.client import Client, FileKind, FileWriter, SyncClient
from tests.conftest import DataCluster
from tests.support.cli_runner import CLUSTER_TRUST

BS = 64 * 1024


def _pfs(
    cluster: DataCluster, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PFS_", "PG")) or k in CLUSTER_TRUST
    }
    env["PFS_CLIENT_NAMENODE"] = cluster.namenode.address
    return subprocess.run(
        [sys.executable, "-m", "plasmafs.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def test_put_get_cat_blocks(data_cluster: DataCluster, tmp_path: Path) -> None:
    local = tmp_path / "in.bin"
    data = os.urandom(150 * BS + 11)
    local.write_bytes(data)
    put = _pfs(data_cluster, "put", "-rep", "2", str(local), "/two")
    assert put.returncode == 0, put.stderr
    assert put.stderr.decode().strip() == f"Copied: {local} -> /two"
    assert _pfs(data_cluster, "put", str(local), "/one").returncode == 0
    out = tmp_path / "out.bin"
    got = _pfs(data_cluster, "get", "/two", str(out))
    assert got.returncode == 0 and out.read_bytes() == data
    cat = _pfs(data_cluster, "cat", "/one", "/two")
    assert cat.returncode == 0 and cat.stdout == data + data
    piped = _pfs(data_cluster, "put", "-", "/piped", stdin=b"from stdin\n")
    assert piped.returncode == 0
    assert _pfs(data_cluster, "cat", "/piped").stdout == b"from stdin\n"

    report = _pfs(data_cluster, "blocks", "/t*").stdout.decode()
    lines = report.splitlines()
    ranges = [line for line in lines if re.fullmatch(r" {0,8}\d+ - +\d+:(\[\d+-\d+\])+", line)]
    assert ranges and all(line.count("[") == 2 for line in ranges)
    assert lines[-3:] == [
        f"  blocks:                {2 * 151}",
        "  actual replication:    2",
        "  requested replication: 2",
    ]
    first = ranges[0].split(":")[0].split("-")
    assert int(first[0]) == 0
    ls = _pfs(data_cluster, "ls", "-l", "/two").stdout.decode()
    assert " 1  2 " in ls and str(len(data)) in ls


def test_data_command_errors_are_one_line(data_cluster: DataCluster, tmp_path: Path) -> None:
    local = tmp_path / "x"
    local.write_bytes(b"x")
    cases = [
        (("put", "-rep", "4", str(local), "/x"), "needs 4 live datanodes"),
        (("put", "-rep", "0", str(local), "/x"), "replication"),
        (("put", str(tmp_path / "missing"), "/x"), "not a readable local file"),
        (("get", "/nope", str(tmp_path / "o")), "no such file"),
        (("cat", "/"), "not a regular file"),
        (("blocks", "/nothing*"), "no match"),
    ]
    for args, fragment in cases:
        result = _pfs(data_cluster, *args)
        err = result.stderr.decode()
        assert result.returncode != 0, (args, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("pfs: "), (args, err)
        assert fragment in err, (args, err)
        assert "Traceback" not in err
    assert _pfs(data_cluster, "ls", "/").stdout == b""  # nothing was created


async def test_large_writes_commit_in_steps(dfs: Client) -> None:
    writer = await dfs.open("/steps", "wb", commit_every=4 * BS)
    assert isinstance(writer, FileWriter)
    for _ in range(6):
        await writer.write(os.urandom(BS))
    # the first 4 blocks were committed when the fifth began: others see that prefix
    assert (await dfs.stat("/steps")).size == 4 * BS
    await writer.write(b"tail")
    await writer.close()
    assert (await dfs.stat("/steps")).size == 6 * BS + 4


def test_sync_file_objects(data_cluster: DataCluster) -> None:
    with SyncClient(data_cluster.namenode.address) as fs:
        with fs.open("/s", "wb", replication=2) as f:
            f.write(b"hello ")
            f.write(b"world")
        with fs.open("/s") as f:
            assert f.read(5) == b"hello"
            f.seek(-5, os.SEEK_END)
            assert f.read() == b"world"
        assert fs.read_file("/s") == b"hello world"


def test_local_file_errors_are_one_line(data_cluster: DataCluster, tmp_path: Path) -> None:
    assert _pfs(data_cluster, "put", "-", "/f", stdin=b"data").returncode == 0
    result = _pfs(data_cluster, "get", "/f", str(tmp_path / "missing-dir" / "out"))
    err = result.stderr.decode()
    assert result.returncode == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("pfs: get: ") and "No such file or directory" in err


def test_put_into_an_existing_directory_takes_the_local_name(
    data_cluster: DataCluster, tmp_path: Path
) -> None:
    files = {name: os.urandom(n) for name, n in [("a.bin", 3 * BS + 1), ("b.txt", 5), ("c", 0)]}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    local = [str(tmp_path / name) for name in files]
    with SyncClient(data_cluster.namenode.address) as fs:
        fs.mkdir("/dir")
        fs.mkdir("/other")
        fs.symlink("/to-other", "/other")
        fs.write_file("/plain", b"plain")

        one = _pfs(data_cluster, "put", local[0], "/dir")
        assert one.returncode == 0, one.stderr
        assert one.stderr.decode() == f"Copied: {local[0]} -> /dir/a.bin\n"
        assert fs.read_file("/dir/a.bin") == files["a.bin"]

        several = _pfs(data_cluster, "put", "-rep", "2", *local, "/other/")
        assert several.returncode == 0, several.stderr
        assert sorted(fs.listdir("/other")) == sorted(files)
        for name, data in files.items():
            assert fs.read_file(f"/other/{name}") == data
            assert fs.stat(f"/other/{name}").replication == 2

        through_link = _pfs(data_cluster, "put", local[1], "/to-other")
        assert through_link.returncode == 0, through_link.stderr
        assert fs.lookup("/to-other").kind is FileKind.SYMLINK  # still the link
        assert fs.read_file("/other/b.txt") == files["b.txt"]

        # A missing source among several: one error line, the others are copied.
        fs.mkdir("/mixed")
        mixed = _pfs(data_cluster, "put", local[0], str(tmp_path / "missing"), local[1], "/mixed")
        errors = [line for line in mixed.stderr.decode().splitlines() if line.startswith("pfs:")]
        assert mixed.returncode == 1 and len(errors) == 1, mixed.stderr
        assert "not a readable local file" in errors[0]
        assert sorted(fs.listdir("/mixed")) == ["a.bin", "b.txt"]

        # Several sources need a directory as the target; - has no name to put there.
        before = sorted(fs.listdir("/"))
        for args, fragment in [
            ((*local, "/plain"), "target /plain is not a directory"),
            ((*local, "/nowhere"), "target /nowhere is not a directory"),
            ((local[0], "/nowhere/"), "target /nowhere/ is not a directory"),
            (("-", "/dir"), "standard input"),
        ]:
            result = _pfs(data_cluster, "put", *args, stdin=b"piped")
            err = result.stderr.decode()
            assert result.returncode != 0 and "Traceback" not in err, (args, err)
            assert len(err.splitlines()) == 1 and err.startswith("pfs: put: "), (args, err)
            assert fragment in err, (args, err)
        assert sorted(fs.listdir("/")) == before
        assert fs.read_file("/plain") == b"plain"
        assert sorted(fs.listdir("/dir")) == ["a.bin"]


def test_pfs_concat_appends_without_a_copy(data_cluster: DataCluster, tmp_path: Path) -> None:
    pieces = [os.urandom(2 * BS), os.urandom(BS), os.urandom(100)]
    for k, piece in enumerate(pieces):
        (tmp_path / f"p{k}").write_bytes(piece)
        assert _pfs(data_cluster, "put", str(tmp_path / f"p{k}"), f"/p{k}").returncode == 0
    done = _pfs(data_cluster, "concat", "/p0", "/p1", "/p2")
    assert done.returncode == 0, done.stderr
    assert _pfs(data_cluster, "cat", "/p0").stdout == b"".join(pieces)
    assert _pfs(data_cluster, "ls", "/").stdout.split() == [b"p0"]
    (tmp_path / "odd").write_bytes(b"x" * (BS + 1))
    _pfs(data_cluster, "put", str(tmp_path / "odd"), "/odd")
    _pfs(data_cluster, "put", str(tmp_path / "odd"), "/odd2")
    refused = _pfs(data_cluster, "concat", "/odd", "/odd2")
    assert refused.returncode != 0
    assert len(refused.stderr.splitlines()) == 1 and b"whole blocks" in refused.stderr
