"""Special files (FIFOs, sockets, character and block devices) on a real namenode and
through the mount: kept as a name and attributes (a device with its number), made by
whoever may create there (devices by the superuser only), removed and renamed as files
are, refused as files to read; on the mount, a FIFO is what the local kernel serves,
a device is never opened (FUSE mounts are nodev)."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest

from plasmafs.client import Client, FileKind
from plasmafs.core.errors import (
    ExistsError,
    InvalidArgumentError,
    OperationNotPermittedError,
    PlasmaError,
)
from tests.conftest import DataCluster
from tests.support.accounts import UIDS
from tests.support.mounts import mounted


async def test_special_files_are_names_with_attributes(fs: Client, alice: Client) -> None:
    await fs.mkdir("/dev", 0o1777)
    fifo = await alice.mknod("/dev/pipe", FileKind.FIFO, 0o640)
    assert (fifo.kind, fifo.mode, fifo.uid, fifo.rdev, fifo.size) == (
        FileKind.FIFO, 0o640, UIDS["alice"], 0, 0,
    )  # fmt: skip
    sock = await alice.mknod("/dev/sock", FileKind.SOCKET, 0o600)
    assert stat.S_ISSOCK(sock.st_mode)
    tty = await fs.mknod("/dev/tty9", FileKind.CHAR_DEVICE, 0o620, os.makedev(4, 9))
    disk = await fs.mknod("/dev/sda", FileKind.BLOCK_DEVICE, 0o660, os.makedev(8, 0))
    assert (os.major(tty.rdev), os.minor(tty.rdev)) == (4, 9)
    assert stat.S_ISBLK((await fs.stat("/dev/sda")).st_mode)
    assert (await fs.stat("/dev/sda")).rdev == disk.rdev
    names = {e.name: e.kind async for e in fs.scandir("/dev")}
    assert names == {
        "pipe": FileKind.FIFO,
        "sock": FileKind.SOCKET,
        "tty9": FileKind.CHAR_DEVICE,
        "sda": FileKind.BLOCK_DEVICE,
    }
    with pytest.raises(OperationNotPermittedError, match="superuser"):
        await alice.mknod("/dev/mine", FileKind.CHAR_DEVICE, 0o600, os.makedev(1, 3))
    with pytest.raises(InvalidArgumentError):
        await fs.mknod("/dev/file", FileKind.FILE)
    with pytest.raises(InvalidArgumentError):
        await fs.mknod("/dev/pipe2", FileKind.FIFO, 0o600, rdev=5)
    with pytest.raises(ExistsError):
        await alice.mknod("/dev/pipe", FileKind.FIFO)
    with pytest.raises(PlasmaError):  # no content to read
        await fs.read_file("/dev/pipe")
    await alice.rename("/dev/pipe", "/dev/pipe.old")
    await fs.chmod("/dev/tty9", 0o600)
    await alice.unlink("/dev/pipe.old")
    await fs.unlink("/dev/sda")
    assert sorted(await fs.listdir("/dev")) == ["sock", "tty9"]


def test_the_mount_makes_fifos_and_devices_the_local_kernel_serves(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt") as m:
        pipe = m.path / "d" / "pipe"
        pipe.parent.mkdir()  # a directory the mount leases
        before = os.stat(pipe.parent).st_mtime_ns
        os.mkfifo(pipe, 0o600)
        assert os.stat(pipe.parent).st_mtime_ns > before
        assert stat.S_ISFIFO(os.stat(pipe).st_mode)
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()))
        reader.start()
        pipe.write_bytes(b"through the local kernel")
        reader.join(timeout=30)
        assert got == [b"through the local kernel"]
        os.mknod(m.path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        seen = os.stat(m.path / "null")
        assert stat.S_ISCHR(seen.st_mode) and seen.st_rdev == os.makedev(1, 3)
        # FUSE mounts are nodev: a device node is listed, never opened.
        with pytest.raises(PermissionError):
            (m.path / "null").write_bytes(b"not to the host's /dev/null")
        os.rename(m.path / "null", m.path / "null2")
        os.unlink(m.path / "null2")
        os.unlink(pipe)
        assert sorted(os.listdir(m.path)) == ["d"] and os.listdir(pipe.parent) == []
        with pytest.raises(OSError) as refused:
            os.mknod(m.path / "bad", 0o600 | stat.S_IFDIR)
        assert refused.value.errno in (errno.EINVAL, errno.EPERM)
