"""`pfs://` through fsspec beyond fsspec's own suite: URLs and storage options,
descriptions of files, directories and links, ranges read without the namenode,
subtree operations, errors as the built-in OSErrors, the asynchronous API, and the
data stack (pandas, pyarrow datasets, dask or polars when installed) on a real
cluster."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
from fsspec.callbacks import Callback

from plasmafs.client import SyncClient
from plasmafs.fsspec.filesystem import PlasmaFileSystem
from tests.conftest import DataCluster
from tests.support.accounts import UIDS, write_test_token
from tests.support.cluster import namenode_requests


@pytest.fixture
def pfs_fs(inline_cluster: DataCluster) -> Iterator[PlasmaFileSystem]:
    fs = PlasmaFileSystem(inline_cluster.namenode.address, skip_instance_cache=True)
    yield fs
    fs.close()


def test_paths_and_urls_name_the_path_and_the_cluster() -> None:
    strip = PlasmaFileSystem._strip_protocol
    assert strip("pfs:///a/b/") == "/a/b"
    assert strip("pfs://host:7530/a/b") == "/a/b"
    assert strip("pfs://host:7530") == "/"
    assert strip("a//b/./c") == "/a/b/c"
    assert strip("/") == "/"
    assert PlasmaFileSystem._get_kwargs_from_urls("pfs://nn:7530/x") == {"namenode": "nn:7530"}
    assert PlasmaFileSystem._get_kwargs_from_urls("pfs:///x") == {}
    assert fsspec.get_filesystem_class("pfs") is PlasmaFileSystem


def test_a_url_names_its_namenode(inline_cluster: DataCluster) -> None:
    address = inline_cluster.namenode.address
    with fsspec.open(f"pfs://{address}/hello.txt", "wb") as f:
        f.write(b"hello")
    with fsspec.open(f"pfs://{address}/hello.txt", "rb") as f:
        assert f.read() == b"hello"
    fs, path = fsspec.core.url_to_fs(f"pfs://{address}/hello.txt", replication=2)
    assert isinstance(fs, PlasmaFileSystem) and fs.namenode == address and path == "/hello.txt"
    assert fs.replication == 2


def test_files_directories_and_links_are_described(pfs_fs: PlasmaFileSystem) -> None:
    fs = pfs_fs
    fs.pipe("/d/f", b"12345")
    fs.mkdir("/d/sub")
    with SyncClient(fs.namenode) as lib:
        lib.symlink("/d/link", "f")
        lib.symlink("/d/dangling", "nowhere")
    info = fs.info("/d/f")
    assert (info["type"], info["size"], info["islink"]) == ("file", 5, False)
    assert info["name"] == "/d/f" and info["replication"] >= 1
    link = fs.info("/d/link")
    assert (link["type"], link["size"], link["islink"], link["destination"]) == (
        "file", 5, True, "f",
    )  # fmt: skip
    assert fs.info("/d/dangling")["type"] == "other"
    assert fs.info("/d")["type"] == "directory" and fs.isdir("/d/sub")
    listing = {i["name"]: i for i in fs.ls("/d")}
    assert sorted(listing) == ["/d/dangling", "/d/f", "/d/link", "/d/sub"]
    assert listing["/d/link"]["islink"] and listing["/d/link"]["type"] == "file"
    assert fs.ls("/d/f", detail=False) == ["/d/f"]
    assert fs.modified("/d/f").timestamp() == pytest.approx(info["mtime"])
    with pytest.raises(FileNotFoundError):
        fs.info("/d/none")
    with pytest.raises(FileNotFoundError):
        fs.ls("/none")
    with pytest.raises(NotADirectoryError):
        fs.info("/d/f/below")


def test_ranges_are_read_from_the_datanodes_alone(
    pfs_fs: PlasmaFileSystem, inline_cluster: DataCluster
) -> None:
    fs, address = pfs_fs, inline_cluster.namenode.address
    data = os.urandom(1_000_000)
    fs.pipe("/big", data)
    assert fs.cat_file("/big", start=10, end=20) == data[10:20]
    assert fs.cat_file("/big", start=-5) == data[-5:]
    assert fs.cat_file("/big", start=999_990, end=2_000_000) == data[999_990:]
    assert fs.cat_file("/big", start=50, end=10) == b""
    starts = list(range(0, 900_000, 9_000))
    before = namenode_requests(address).get("blocks", 0)
    got = fs.cat_ranges(["/big"] * len(starts), starts, [s + 4096 for s in starts])
    assert got == [data[s : s + 4096] for s in starts]
    # one block list for 100 ranges
    assert namenode_requests(address).get("blocks", 0) - before == 1
    with fs.open("/big", "rb", block_size=64 * 1024) as f:
        before = namenode_requests(address).get("blocks", 0)
        for offset in (700_000, 3, 512_000, 999_000):
            f.seek(offset)
            assert f.read(5000) == data[offset : offset + 5000]
        assert namenode_requests(address).get("blocks", 0) == before  # the block list of open
    ranges = fs.cat_ranges(["/big", "/missing"], [0, 0], [3, 3])
    assert ranges[0] == data[:3] and isinstance(ranges[1], FileNotFoundError)


def test_subtrees_are_found_summed_walked_and_removed(pfs_fs: PlasmaFileSystem) -> None:
    fs = pfs_fs
    for k in range(6):
        fs.pipe(f"/t/d{k % 2}/e/f{k}", b"x" * (k + 1))
    fs.pipe("/t/top", b"top")
    files = fs.find("/t")
    assert files == sorted([f"/t/d{k % 2}/e/f{k}" for k in range(6)] + ["/t/top"])
    assert fs.find("/t", maxdepth=1) == ["/t/top"]
    assert "/t/d0/e" in fs.find("/t", withdirs=True)
    assert fs.du("/t") == 21 + 3
    assert fs.du("/t", total=False)["/t/d1/e/f5"] == 6
    triples = list(fs.walk("/t"))
    assert [t[0] for t in triples] == ["/t", "/t/d0", "/t/d0/e", "/t/d1", "/t/d1/e"]
    assert triples[0][1:] == (["d0", "d1"], ["top"])
    assert [t[0] for t in fs.walk("/t", topdown=False)][-1] == "/t"
    assert fs.glob("/t/*/e/f[01]") == ["/t/d0/e/f0", "/t/d1/e/f1"]
    with pytest.raises(IsADirectoryError):
        fs.rm("/t/d0")
    fs.rm("/t/d0", recursive=True)
    assert not fs.exists("/t/d0") and fs.exists("/t/d1/e/f1")
    fs.mv("/t/top", "/t/d1")  # into the directory
    assert fs.cat("/t/d1/top") == b"top"
    fs.cp("/t/d1", "/copy", recursive=True)
    assert fs.find("/copy") == ["/copy/e/f1", "/copy/e/f3", "/copy/e/f5", "/copy/top"]
    with pytest.raises(FileExistsError):
        fs.mkdir("/copy")
    fs.makedirs("/copy", exist_ok=True)
    with pytest.raises(FileExistsError):
        fs.makedirs("/copy")
    fs.touch("/copy/top", truncate=False)
    assert fs.cat("/copy/top") == b"top"
    fs.touch("/copy/top")
    assert fs.cat("/copy/top") == b""


def test_put_and_get_report_progress(pfs_fs: PlasmaFileSystem, tmp_path: Path) -> None:
    fs = pfs_fs
    local = tmp_path / "local.bin"
    data = os.urandom(3 * 1024 * 1024 + 5)
    local.write_bytes(data)

    class Counted(Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.moved = 0

        def relative_update(self, inc: int = 1) -> None:
            self.moved += inc

    up, down = Counted(), Counted()
    fs.put_file(str(local), "/in/remote.bin", callback=up)
    assert up.size == len(data) and up.moved == len(data)
    fs.get_file("/in/remote.bin", str(tmp_path / "back.bin"), callback=down)
    assert (tmp_path / "back.bin").read_bytes() == data and down.moved == len(data)
    with fs.open("/in/remote.bin", "ab") as f:
        f.write(b"tail")
    assert fs.cat("/in/remote.bin") == data + b"tail"


def test_a_credential_acts_as_its_user(inline_cluster: DataCluster, tmp_path: Path) -> None:
    address = inline_cluster.namenode.address
    root = PlasmaFileSystem(address, skip_instance_cache=True)
    bob = PlasmaFileSystem(
        address, token_file=write_test_token(tmp_path, "bob"), skip_instance_cache=True
    )
    try:
        root.pipe("/private/secret", b"s")
        root.mkdir("/bob")
        with SyncClient(address) as lib:
            lib.chmod("/private", 0o700)
            lib.chown("/bob", UIDS["bob"], UIDS["bob"])
        with pytest.raises(PermissionError):
            bob.cat("/private/secret")
        with pytest.raises(PermissionError):
            bob.pipe("/private/mine", b"m")
        bob.pipe("/bob/mine", b"m")
        assert root.info("/bob/mine")["uid"] == UIDS["bob"]
        # A directory bob may not read is listed, not entered; listing it is refused.
        assert "/private" in bob.ls("/", detail=False)
        assert "/private/secret" not in bob.find("/")
        with pytest.raises(PermissionError):
            bob.ls("/private")
    finally:
        root.close()
        bob.close()


async def test_the_asynchronous_api_runs_on_the_callers_loop(inline_cluster: DataCluster) -> None:
    fs = PlasmaFileSystem(
        inline_cluster.namenode.address, asynchronous=True, skip_instance_cache=True
    )
    try:
        await fs._pipe_file("/a/x", b"async")
        assert await fs._cat_file("/a/x") == b"async"
        assert [i["name"] for i in await fs._ls("/a")] == ["/a/x"]
        got = await asyncio.gather(*(fs._cat_file("/a/x", start=k, end=k + 1) for k in range(5)))
        assert b"".join(got) == b"async"
    finally:
        await fs._close()


def test_pandas_reads_and_writes_parquet_and_csv(inline_cluster: DataCluster) -> None:
    pd = pytest.importorskip("pandas")
    url = f"pfs://{inline_cluster.namenode.address}/frames"
    frame = pd.DataFrame({"n": range(5000), "s": [f"row {i}" for i in range(5000)]})
    frame.to_parquet(f"{url}/f.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(f"{url}/f.parquet"), frame)
    frame.to_csv(f"{url}/f.csv", index=False)
    pd.testing.assert_frame_equal(pd.read_csv(f"{url}/f.csv"), frame)


def test_a_pyarrow_dataset_is_written_and_scanned(pfs_fs: PlasmaFileSystem) -> None:
    pa = pytest.importorskip("pyarrow")
    ds = pytest.importorskip("pyarrow.dataset")
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    arrow_fs = PyFileSystem(FSSpecHandler(pfs_fs))
    table = pa.table({"part": [k % 3 for k in range(3000)], "v": list(range(3000))})
    ds.write_dataset(table, "/ds", filesystem=arrow_fs, format="parquet", partitioning=["part"])
    assert sorted(pfs_fs.ls("/ds", detail=False)) == ["/ds/0", "/ds/1", "/ds/2"]
    scanned = ds.dataset("/ds", filesystem=arrow_fs, format="parquet", partitioning=["part"])
    assert scanned.count_rows() == 3000
    assert sorted(scanned.to_table(columns=["v"])["v"].to_pylist()) == list(range(3000))


def test_dask_or_polars_read_through_pfs(inline_cluster: DataCluster) -> None:
    pd = pytest.importorskip("pandas")
    url = f"pfs://{inline_cluster.namenode.address}/frames/f.parquet"
    frame = pd.DataFrame({"n": range(100)})
    frame.to_parquet(url)
    try:
        import dask.dataframe as dd
    except ImportError:
        dd = None
    if dd is not None:
        assert int(dd.read_parquet(url)["n"].sum().compute()) == 4950
        return
    pl = pytest.importorskip("polars")
    with fsspec.open(url, "rb") as f:
        assert pl.read_parquet(f)["n"].sum() == 4950


def test_a_program_that_ends_with_a_file_still_open_exits(inline_cluster: DataCluster) -> None:
    # The file objects are finalized as the interpreter shuts down, when fsspec's I/O
    # loop no longer runs: closing them must not wait for it.
    address = inline_cluster.namenode.address
    program = (
        "import fsspec\n"
        f"with fsspec.open('pfs://{address}/left-open', 'wb') as f:\n"
        "    f.write(b'x' * 100000)\n"
        f"kept = fsspec.open('pfs://{address}/left-open', 'rb').open()\n"
        "assert kept.read(10) == b'x' * 10\n"
        f"writing = fsspec.open('pfs://{address}/never-closed', 'wb').open()\n"
        "writing.write(b'y' * 100000)\n"
        "writing.flush()\n"
        "print('read')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "read\n"
    with SyncClient(address) as fs:  # what was never closed was never committed
        assert not fs.exists("/never-closed") or fs.stat("/never-closed").size == 0


def test_extended_attributes_as_os_functions(pfs_fs: PlasmaFileSystem) -> None:
    pfs_fs.pipe_file("/x/f", b"data")
    pfs_fs.setxattr("pfs:///x/f", "user.origin", b"sensor-7")
    pfs_fs.setxattr("/x/f", "user.batch", b"12", os.XATTR_CREATE)
    assert pfs_fs.listxattr("/x/f") == ["user.batch", "user.origin"]
    assert pfs_fs.getxattr("/x/f", "user.origin") == b"sensor-7"
    with pytest.raises(FileExistsError):
        pfs_fs.setxattr("/x/f", "user.batch", b"13", os.XATTR_CREATE)
    pfs_fs.removexattr("/x/f", "user.batch")
    with pytest.raises(OSError) as caught:
        pfs_fs.getxattr("/x/f", "user.batch")
    assert caught.value.errno == errno.ENODATA
    with pytest.raises(FileNotFoundError):
        pfs_fs.listxattr("/x/missing")
