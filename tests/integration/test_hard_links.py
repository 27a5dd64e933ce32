"""Hard links on a real cluster: one inode, many names, through the library, the CLI and
the mount; the data lives while any name does and is freed with the last; link counts,
rename over a link and of one link onto another, and the refusals POSIX gives."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from plasmafs.client import Client, FileKind
from plasmafs.client.admin import FsckSummary
from plasmafs.core.errors import (
    ExistsError,
    NotFoundError,
    OperationNotPermittedError,
    PermissionError,
)
from tests.conftest import DataCluster
from tests.support.cli_runner import Pfs, assert_error, assert_ok
from tests.support.mounts import mounted


async def test_names_share_one_inode_until_the_last_goes(dfs: Client) -> None:
    data = os.urandom(200_000)
    await dfs.mkdir("/a")
    await dfs.mkdir("/b")
    await dfs.write_file("/a/f", data)
    linked = await dfs.link("/a/f", "/b/g")
    first = await dfs.stat("/a/f")
    assert (linked.ino, linked.nlink, first.nlink) == (first.ino, 2, 2)
    assert await dfs.read_file("/b/g") == data
    await dfs.write_file("/b/g", b"new content for both names")
    assert await dfs.read_file("/a/f") == b"new content for both names"
    by_inode = await dfs.link(first.ino, "/a/h")  # as the mount names it
    assert by_inode.nlink == 3
    await dfs.unlink("/a/f")
    assert (await dfs.stat("/b/g")).nlink == 2
    assert await dfs.read_file("/a/h") == b"new content for both names"
    # rename of one name onto another of the same file does nothing (POSIX)
    await dfs.rename("/a/h", "/b/g")
    assert sorted(await dfs.listdir("/a")) == ["h"] and (await dfs.stat("/b/g")).nlink == 2
    # rename over a name of a linked file drops that name only
    await dfs.write_file("/a/other", b"other")
    await dfs.rename("/a/other", "/a/h")
    assert (await dfs.stat("/b/g")).nlink == 1
    assert await dfs.read_file("/b/g") == b"new content for both names"
    await dfs.unlink("/b/g")
    with pytest.raises(NotFoundError):
        await dfs.getattr(first.ino)


async def test_links_refused_as_posix_says(fs: Client, alice: Client) -> None:
    await fs.mkdir("/d")
    await fs.create("/f")
    await fs.symlink("/s", "/nowhere")
    with pytest.raises(OperationNotPermittedError):
        await fs.link("/d", "/d2")  # directories have one name
    with pytest.raises(ExistsError):
        await fs.link("/f", "/d")
    with pytest.raises(NotFoundError):
        await fs.link("/missing", "/m")
    assert (await fs.link("/s", "/s2")).kind is FileKind.SYMLINK  # the link, not its target
    with pytest.raises(PermissionError):
        await alice.link("/f", "/d/f2")  # no write permission in /d
    pipe = await fs.mknod("/pipe", FileKind.FIFO)
    assert (await fs.link("/pipe", "/pipe2")).ino == pipe.ino


def test_pfs_ln_makes_hard_and_symbolic_links(pfs: Pfs, tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    assert pfs("put", str(tmp_path / "f"), "/f").rc == 0
    assert_ok(pfs("mkdir", "/d"))
    assert_ok(pfs("ln", "/f", "/g"))
    assert_ok(pfs("ln", "/f", "/d"))  # into the directory, under the target's name
    assert_ok(pfs("ln", "-s", "/f", "/s"))
    listing = pfs("ls", "-l", "/f").out.split()
    assert listing[1] == "3"  # links
    assert pfs("cat", "/d/f").out == "x" and pfs("readlink", "/s").out == "/f\n"
    assert_error(pfs("ln", "/d", "/d2"), "ln", "directories")
    assert_error(pfs("ln", "/nope", "/x"), "ln")


def test_hard_links_through_the_mount(inline_cluster: DataCluster, tmp_path: Path) -> None:
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt") as m:
        d = m.path / "d"  # a directory the mount leases: its table answers stat
        d.mkdir()
        (d / "f").write_bytes(b"one file")
        os.link(d / "f", d / "g")
        os.link(d / "f", m.path / "h")
        assert os.stat(d / "f").st_ino == os.stat(m.path / "h").st_ino
        assert [os.stat(p).st_nlink for p in (d / "f", d / "g", m.path / "h")] == [3, 3, 3]
        with open(d / "g", "ab") as f:
            f.write(b", three names")
        assert (m.path / "h").read_bytes() == b"one file, three names"
        os.unlink(d / "f")
        assert os.stat(d / "g").st_nlink == 2 and os.stat(m.path / "h").st_nlink == 2
        with pytest.raises(OSError) as refused:
            os.link(d, m.path / "d2")
        assert refused.value.errno == errno.EPERM
        os.unlink(m.path / "h")
        assert os.stat(d / "g").st_nlink == 1
        assert (d / "g").read_bytes() == b"one file, three names"


async def test_a_file_with_several_names_counts_once(dfs: Client) -> None:
    await dfs.mkdir("/t")
    await dfs.mkdir("/t/x")
    await dfs.write_file("/t/f", b"12345")
    await dfs.write_file("/t/x/once", b"1")
    await dfs.link("/t/f", "/t/x/g")
    await dfs.link("/t/f", "/t/h")
    totals = await dfs.summarize("/t")
    assert (totals.files, totals.bytes) == (2, 6)
    assert (await dfs.summarize("/t/x")).files == 2  # below the others' directory: counted


async def test_fsck_finds_a_linked_file_healthy(dfs: Client) -> None:
    await dfs.write_file("/f", os.urandom(100_000))
    await dfs.link("/f", "/g")
    summary = [s async for s in dfs.fsck("/") if isinstance(s, FsckSummary)][-1]
    assert summary.record_errors == () and summary.missing_blocks == 0
    assert summary.corrupt_files == 0
