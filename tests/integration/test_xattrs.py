"""Extended attributes on a real namenode: through the library (os-style), in a
transaction, by inode number, across a restart and a namespace dump; the refusals and
absences Linux gives (ENODATA, EOPNOTSUPP, EEXIST, EPERM, EACCES, ENOSPC, ENAMETOOLONG);
the CLI's getfattr and setfattr."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from plasmafs.client import Client, SyncClient
from plasmafs.client.xattr_ops import XATTR_CREATE, XATTR_REPLACE
from plasmafs.core import xattrs
from plasmafs.core.errors import (
    ExistsError,
    InvalidArgumentError,
    NameTooLongError,
    NoDataError,
    NoSpaceError,
    NotSupportedError,
    OperationNotPermittedError,
    PermissionError,
)
from tests.conftest import DataCluster, NamenodeProcess, connected_client
from tests.support.cli_runner import Pfs, assert_error, assert_ok
from tests.support.mounts import mounted


async def test_set_get_list_remove(fs: Client) -> None:
    await fs.create("/f")
    before = await fs.stat("/f")
    assert not before.has_xattrs and await fs.listxattr("/f") == []
    await fs.setxattr("/f", "user.color", b"blue")
    await fs.setxattr("/f", b"user.empty", b"")
    await fs.setxattr("/f", "trusted.mark", b"\x00\xff")
    after = await fs.stat("/f")
    assert after.has_xattrs and after.ctime_ns >= before.ctime_ns
    assert after.mtime_ns == before.mtime_ns and after.version > before.version
    assert await fs.getxattr("/f", "user.color") == b"blue"
    assert await fs.getxattr(after.ino, "user.empty") == b""  # by inode, as the mount asks
    assert await fs.listxattr("/f") == ["trusted.mark", "user.color", "user.empty"]
    await fs.setxattr("/f", "user.color", b"red")
    assert await fs.getxattr("/f", "user.color") == b"red"
    await fs.removexattr("/f", "user.color")
    with pytest.raises(NoDataError):
        await fs.getxattr("/f", "user.color")
    with pytest.raises(NoDataError):
        await fs.removexattr("/f", "user.color")
    await fs.removexattr("/f", "user.empty")
    await fs.removexattr("/f", "trusted.mark")
    assert not (await fs.stat("/f")).has_xattrs
    await fs.setxattr("/f", "user.kept", b"1")
    entries, _ = await fs.readdir("/", plus=True)  # a listing says which have some
    assert [(e.name, e.attr and e.attr.has_xattrs) for e in entries] == [("f", True)]


async def test_create_and_replace_flags(fs: Client) -> None:
    await fs.mkdir("/d")
    with pytest.raises(NoDataError):
        await fs.setxattr("/d", "user.a", b"1", XATTR_REPLACE)
    await fs.setxattr("/d", "user.a", b"1", XATTR_CREATE)
    with pytest.raises(ExistsError):
        await fs.setxattr("/d", "user.a", b"2", XATTR_CREATE)
    await fs.setxattr("/d", "user.a", b"3", XATTR_REPLACE)
    assert await fs.getxattr("/d", "user.a") == b"3"
    with pytest.raises(InvalidArgumentError):
        await fs.setxattr("/d", "user.a", b"3", 7)


async def test_names_and_sizes_as_linux_limits_them(fs: Client) -> None:
    await fs.create("/f")
    for bad in ("system.posix_acl_access", "os2.x", "color"):
        with pytest.raises(NotSupportedError):
            await fs.setxattr("/f", bad, b"x")
        with pytest.raises(NotSupportedError):
            await fs.getxattr("/f", bad)
    with pytest.raises(InvalidArgumentError):
        await fs.setxattr("/f", "user.", b"x")
    with pytest.raises(NameTooLongError):
        await fs.setxattr("/f", "user." + "n" * 251, b"x")
    await fs.setxattr("/f", "user." + "n" * 250, b"x")  # 255 bytes
    await fs.setxattr("/f", "user.big", b"v" * xattrs.MAX_VALUE)
    with pytest.raises(NoSpaceError):
        await fs.setxattr("/f", "user.bigger", b"v" * (xattrs.MAX_VALUE + 1))
    with pytest.raises(NoSpaceError):  # the inode's 128 KiB
        await fs.setxattr("/f", "user.second", b"v" * xattrs.MAX_VALUE)
    assert (await fs.getxattr("/f", "user.big")) == b"v" * xattrs.MAX_VALUE


async def test_symlinks_and_follow(fs: Client) -> None:
    await fs.create("/target")
    await fs.symlink("/link", "/target")
    await fs.setxattr("/link", "user.via", b"link")  # follows to the target
    assert await fs.getxattr("/target", "user.via") == b"link"
    assert await fs.listxattr("/link", follow_symlinks=False) == []
    with pytest.raises(OperationNotPermittedError):  # user. only on files and directories
        await fs.setxattr("/link", "user.own", b"x", follow_symlinks=False)
    with pytest.raises(NoDataError):
        await fs.getxattr("/link", "user.via", follow_symlinks=False)
    await fs.setxattr("/link", "trusted.own", b"x", follow_symlinks=False)  # root may
    assert await fs.listxattr("/link", follow_symlinks=False) == ["trusted.own"]


async def test_permissions_of_each_namespace(fs: Client, alice: Client) -> None:
    await fs.mkdir("/shared", 0o777)
    await alice.create("/shared/mine", 0o644)
    await alice.setxattr("/shared/mine", "user.note", b"alice's")
    await fs.create("/shared/roots", 0o644)
    await fs.setxattr("/shared/roots", "user.note", b"root's")
    await fs.setxattr("/shared/roots", "trusted.secret", b"hidden")
    await fs.setxattr("/shared/roots", "security.label", b"public")
    # read with R, changed with W
    assert await alice.getxattr("/shared/roots", "user.note") == b"root's"
    with pytest.raises(PermissionError):
        await alice.setxattr("/shared/roots", "user.note", b"alice was here")
    await fs.chmod("/shared/roots", 0o600)
    with pytest.raises(PermissionError):
        await alice.getxattr("/shared/roots", "user.note")
    # trusted: root's alone, not even listed to others; security: set by root only
    assert await alice.listxattr("/shared/roots") == ["security.label", "user.note"]
    with pytest.raises(NoDataError):
        await alice.getxattr("/shared/roots", "trusted.secret")
    assert await alice.getxattr("/shared/roots", "security.label") == b"public"
    for name in ("trusted.mine", "security.mine"):
        with pytest.raises(OperationNotPermittedError):
            await alice.setxattr("/shared/mine", name, b"x")
    assert await fs.getxattr("/shared/roots", "trusted.secret") == b"hidden"
    # a sticky directory's user attributes: its owner's
    await fs.chmod("/shared", 0o1777)
    with pytest.raises(OperationNotPermittedError):
        await alice.setxattr("/shared", "user.dir", b"x")
    await fs.setxattr("/shared", "user.dir", b"x")


async def test_in_a_transaction_and_after_restart(namenode: NamenodeProcess) -> None:
    async with connected_client(namenode.address) as fs:
        await fs.create("/f")
        async with fs.transaction() as t:
            await t.setxattr("/f", "user.one", b"1")
            await t.setxattr("/f", "user.two", b"2")
            assert await t.getxattr("/f", "user.one") == b"1"  # its own change
            assert await fs.listxattr("/f") == []  # others see it at commit
        assert await fs.listxattr("/f") == ["user.one", "user.two"]
    namenode.stop()
    namenode.start()
    async with connected_client(namenode.address) as fs:
        assert await fs.getxattr("/f", "user.two") == b"2"
        await fs.unlink("/f")
        await fs.create("/f")
        assert await fs.listxattr("/f") == []  # they went with the inode


def test_cli_getfattr_setfattr(pfs: Pfs) -> None:
    assert_ok(pfs("touch", "/f"))
    assert_ok(pfs("setfattr", "-n", "user.text", "-v", "hello world", "/f"))
    assert_ok(pfs("setfattr", "-n", "user.hex", "-v", "0x00ff10", "/f"))
    assert_ok(pfs("setfattr", "-n", "user.b64", "-v", "0sAAEC", "/f"))
    assert_ok(pfs("setfattr", "-n", "trusted.t", "-v", '"quoted"', "/f"))
    dump = '# file: /f\nuser.b64=0sAAEC\nuser.hex=0sAP8Q\nuser.text="hello world"\n\n'
    assert_ok(pfs("getfattr", "-d", "/f"), dump)
    assert_ok(pfs("getfattr", "/f"), "# file: /f\nuser.b64\nuser.hex\nuser.text\n\n")
    assert_ok(pfs("getfattr", "-d", "-m", "-", "-e", "hex", "/f"), (
        "# file: /f\ntrusted.t=0x71756f746564\nuser.b64=0x000102\nuser.hex=0x00ff10\n"
        "user.text=0x68656c6c6f20776f726c64\n\n"
    ))  # fmt: skip
    assert_ok(pfs("getfattr", "-n", "user.text", "--only-values", "/f"), "hello world")
    assert_ok(pfs("setfattr", "-x", "user.text", "/f"))
    assert_error(
        pfs("getfattr", "-n", "user.text", "/f"), "getfattr", "user.text: No such attribute"
    )
    assert_error(pfs("setfattr", "-n", "system.x", "-v", "1", "/f"), "setfattr", "not supported")
    assert_error(pfs("setfattr", "-n", "user.x", "-v", "0xzz", "/f"), "setfattr", "bad 0x value")
    assert_error(pfs("getfattr", "-d", "/missing"), "getfattr", "no such file")


def test_through_mounts(inline_cluster: DataCluster, tmp_path: Path) -> None:
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "a") as a, mounted(address, tmp_path / "b") as b:
        d = a.path / "d"  # a directory the mount leases: its entries are queued
        d.mkdir()
        (d / "f").write_bytes(b"content")
        os.setxattr(d / "f", "user.color", b"blue")
        os.setxattr(d, "user.dir", b"yes", os.XATTR_CREATE)
        assert os.getxattr(d / "f", "user.color") == b"blue"
        assert sorted(os.listxattr(b.path / "d" / "f")) == ["user.color"]  # the other host
        os.setxattr(b.path / "d" / "f", "user.color", b"red")
        assert os.getxattr(d / "f", "user.color") == b"red"
        with pytest.raises(FileExistsError):
            os.setxattr(d, "user.dir", b"again", os.XATTR_CREATE)
        for name, code in (
            ("user.none", errno.ENODATA),
            ("system.posix_acl_access", errno.EOPNOTSUPP),
            ("security.selinux", errno.EOPNOTSUPP),  # ls -l then stops asking
        ):
            with pytest.raises(OSError) as caught:
                os.getxattr(d / "f", name)
            assert caught.value.errno == code
        with pytest.raises(OSError) as caught:
            os.setxattr(d / "f", "security.selinux", b"system_u:object_r:etc_t:s0")
        assert caught.value.errno == errno.EOPNOTSUPP
        with SyncClient(address) as fs:  # a label the library set: not one on the mount
            fs.setxattr("/d/f", "security.selinux", b"system_u:object_r:etc_t:s0")
        assert sorted(os.listxattr(d / "f")) == ["user.color"]
        os.removexattr(d / "f", "user.color")
        assert os.listxattr(b.path / "d" / "f") == []
        # ls -l asks every file for attributes: answered without the namenode
        (a.path / "plain").write_bytes(b"x")
        listing = subprocess.run(["ls", "-l", str(a.path)], capture_output=True, text=True)
        assert listing.returncode == 0 and "plain" in listing.stdout, listing
        # rsync -aX carries them in and out
        src, back = tmp_path / "src", tmp_path / "back"
        src.mkdir()
        (src / "t").write_bytes(b"tagged")
        os.setxattr(src / "t", "user.tag", b"42")
        for frm, to in ((src, a.path / "copy"), (a.path / "copy", back)):
            done = subprocess.run(["rsync", "-aX", f"{frm}/", f"{to}/"], capture_output=True)
            assert done.returncode == 0, done
        assert os.getxattr(back / "t", "user.tag") == b"42"
        assert (back / "t").read_bytes() == b"tagged"


def test_a_writeback_mount_keeps_no_reads_of_them(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    """With writeback caching the kernel would ask for security.capability before every
    write(2): getxattr is not served there (EOPNOTSUPP), setting still is."""
    with mounted(inline_cluster.namenode.address, tmp_path / "m", "writeback_cache") as m:
        f = m.path / "f"
        f.write_bytes(b"x")
        os.setxattr(f, "user.k", b"v")
        assert os.listxattr(f) == ["user.k"]
        with pytest.raises(OSError) as caught:
            os.getxattr(f, "user.k")
        assert caught.value.errno == errno.EOPNOTSUPP
