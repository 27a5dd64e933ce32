"""`pfs mount` against a real cluster: system calls and ordinary programs on the mount,
its errnos, close-to-open consistency with the library, and mounting and unmounting."""

from __future__ import annotations

import ctypes
import errno
import filecmp
import mmap
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loadtests.churn import run_churn
from plasmafs.client import Client, SyncClient
from plasmafs.mount.mountpoints import is_mounted
from plasmafs.mount.process import READ_AHEAD
from tests.conftest import DataCluster
from tests.support.accounts import TOKENS
from tests.support.cli_runner import assert_error, run_pfs
from tests.support.cluster import DatanodeProcess, NamenodeProcess
from tests.support.mounts import Mount, mounted, unmount


@pytest.fixture
def mount(inline_cluster: DataCluster, tmp_path: Path) -> Iterator[Mount]:
    """The data cluster mounted at tmp_path/mnt, as root."""
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt") as m:
        yield m


def _errno(call: object, *args: object) -> int:
    try:
        call(*args)  # type: ignore[operator]
    except OSError as exc:
        return exc.errno or 0
    raise AssertionError(f"{call} did not fail")


def test_files_and_directories_through_system_calls(mount: Mount) -> None:
    root = mount.path
    (root / "d").mkdir(mode=0o750)
    data = os.urandom(300_000)
    (root / "d" / "f").write_bytes(data)
    assert (root / "d" / "f").read_bytes() == data
    st = os.stat(root / "d" / "f")
    assert st.st_size == len(data) and stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(os.stat(root / "d").st_mode) == 0o750
    os.chmod(root / "d" / "f", 0o600)
    assert stat.S_IMODE(os.stat(root / "d" / "f").st_mode) == 0o600
    os.utime(root / "d" / "f", ns=(10**18, 10**18))
    assert os.stat(root / "d" / "f").st_mtime_ns == 10**18
    os.symlink("f", root / "d" / "l")
    assert os.readlink(root / "d" / "l") == "f"
    assert (root / "d" / "l").read_bytes() == data
    os.rename(root / "d" / "f", root / "g")
    assert sorted(os.listdir(root)) == ["d", "g"]
    assert sorted(os.listdir(root / "d")) == ["l"]
    os.truncate(root / "g", 1000)
    assert (root / "g").read_bytes() == data[:1000]
    os.unlink(root / "d" / "l")
    os.rmdir(root / "d")
    vfs = os.statvfs(root)
    assert vfs.f_blocks > 0 and vfs.f_bavail <= vfs.f_blocks and vfs.f_namemax == 255


def test_refusals_carry_the_right_errno(mount: Mount) -> None:
    root = mount.path
    (root / "d").mkdir()
    (root / "d" / "x").write_bytes(b"abc")
    fd = os.open(root / "new", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os.close(fd)
    assert _errno(os.open, root / "new", os.O_CREAT | os.O_EXCL | os.O_WRONLY) == errno.EEXIST
    assert _errno(os.stat, root / "missing") == errno.ENOENT
    assert _errno(os.rmdir, root / "d") == errno.ENOTEMPTY
    assert _errno(os.unlink, root / "d") == errno.EISDIR
    assert _errno(os.mkdir, root / "d") == errno.EEXIST
    assert _errno(os.link, root / "d", root / "hard") == errno.EPERM  # a directory
    assert _errno(os.mkfifo, root / "d") == errno.EEXIST
    assert _errno(os.rename, root / "d", root / "d" / "inside") == errno.EINVAL
    assert _errno(os.mkdir, root / ("n" * 256)) == errno.ENAMETOOLONG
    # no unnamed files (pyfuse3 has no tmpfile handler): programs fall back to a name
    assert _errno(os.open, root, os.O_TMPFILE | os.O_RDWR, 0o600) == errno.EOPNOTSUPP


RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2  # renameat2(2)'s flags


def renameat2(src: Path, dst: Path, flags: int) -> None:
    """renameat2(2) through glibc, which Python's os does not wrap."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd = -100
    if libc.renameat2(at_fdcwd, bytes(src), at_fdcwd, bytes(dst), flags) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(dst))


def test_renames_that_swap_or_refuse_to_replace(mount: Mount, inline_cluster: DataCluster) -> None:
    root = mount.path
    (root / "d").mkdir()
    (root / "d" / "inside").write_bytes(b"in d")
    (root / "f").write_bytes(b"the file")
    d_ino, f_ino = (root / "d").stat().st_ino, (root / "f").stat().st_ino
    assert _errno(renameat2, root / "d", root / "f", RENAME_NOREPLACE) == errno.EEXIST
    renameat2(root / "d", root / "f", RENAME_EXCHANGE)
    assert (root / "f").stat().st_ino == d_ino and (root / "d").stat().st_ino == f_ino
    assert (root / "f" / "inside").read_bytes() == b"in d"
    assert (root / "d").read_bytes() == b"the file"
    assert _errno(renameat2, root / "d", root / "gone", RENAME_EXCHANGE) == errno.ENOENT
    flags = RENAME_EXCHANGE | RENAME_NOREPLACE
    assert _errno(renameat2, root / "d", root / "f", flags) == errno.EINVAL
    with SyncClient(inline_cluster.namenode.address) as lib:  # for every client
        assert lib.read_file("/d") == b"the file"
        assert lib.listdir("/f") == ["inside"]


def listed_inodes(directory: Path) -> dict[str, int]:
    """Every name `ls -a` lists in `directory`, with the inode number it lists."""
    out = subprocess.run(["ls", "-a1i", str(directory)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = (line.split(maxsplit=1) for line in out.stdout.splitlines())
    return {name: int(ino) for ino, name in lines}


def test_listings_have_dot_and_dot_dot(mount: Mount) -> None:
    root = mount.path
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    (root / "a" / "b" / "f").write_bytes(b"x")
    inode = {p: (root / p).stat().st_ino for p in ("", "a", "a/b", "c")}
    assert listed_inodes(root)["."] == inode[""]  # (its ".." is outside the mount)
    assert listed_inodes(root / "a" / "b") == {
        ".": inode["a/b"], "..": inode["a"], "f": (root / "a" / "b" / "f").stat().st_ino,
    }  # fmt: skip
    os.rename(root / "a" / "b", root / "c" / "b")  # moved: ".." follows
    assert listed_inodes(root / "c" / "b")[".."] == inode["c"]
    assert sorted(os.listdir(root / "c" / "b")) == ["f"]  # programs skip the two
    assert sorted(p.name for p in (root / "c").iterdir()) == ["b"]


def test_writes_anywhere_in_a_file(mount: Mount, inline_cluster: DataCluster) -> None:
    bs = inline_cluster.blocksize
    path = mount.path / "f"
    original = os.urandom(3 * bs + 100)
    path.write_bytes(original)
    expected = bytearray(original)
    fd = os.open(path, os.O_RDWR)
    try:
        for offset, data in ((5, b"inside"), (bs - 2, b"across a block"), (3 * bs + 90, b"x" * 30)):
            os.pwrite(fd, data, offset)
            expected[offset : offset + len(data)] = data
            expected += bytes(max(0, offset + len(data) - len(expected)))
        assert os.pread(fd, len(expected) + 10, 0) == bytes(expected)  # its own writes
        with open(path, "rb") as other:  # another open on this host sees them at once
            assert other.read() == bytes(expected)
        with SyncClient(inline_cluster.namenode.address) as lib:
            assert lib.read_file("/f") == original  # another client: not committed yet
            os.fsync(fd)
            assert lib.read_file("/f") == bytes(expected)
    finally:
        os.close(fd)
    with open(path, "ab") as f:  # append to committed content
        f.write(b"appended")
    expected += b"appended"
    assert path.read_bytes() == bytes(expected)
    with open(path, "r+b") as f:  # a hole past the end reads as zeros
        f.seek(6 * bs)
        f.write(b"far")
    expected += bytes(6 * bs - len(expected)) + b"far"
    assert path.read_bytes() == bytes(expected)
    os.truncate(path, bs + 7)
    assert path.read_bytes() == bytes(expected[: bs + 7])
    with open(path, "r+b") as f:  # shrink and grow again in one open
        f.truncate(3)
        f.seek(10)
        f.write(b"!")
    assert path.read_bytes() == bytes(expected[:3]) + bytes(7) + b"!"


def test_a_file_cut_then_extended_reads_zeros_past_the_cut(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    bs = inline_cluster.blocksize
    path = mount.path / "cut"
    data = os.urandom(2 * bs)
    path.write_bytes(data)
    os.truncate(path, bs + 5)  # not open: one namenode request
    os.truncate(path, 2 * bs)  # growing past an end inside a block
    assert path.read_bytes() == data[: bs + 5] + bytes(bs - 5)
    with open(path, "r+b") as f:  # cut and grown again in one open, nothing written
        f.truncate(7)
        f.truncate(bs + 1)
    assert path.read_bytes() == data[:7] + bytes(bs - 6)


def test_sqlite_creates_and_queries_a_database(mount: Mount) -> None:
    db = sqlite3.connect(mount.path / "db.sqlite")
    try:
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
        for chunk in range(5):
            db.executemany(
                "INSERT INTO t (v) VALUES (?)", [(f"row {chunk} {i}" * 10,) for i in range(200)]
            )
            db.commit()
        db.execute("UPDATE t SET v = 'changed' WHERE k % 7 = 0")
        db.execute("DELETE FROM t WHERE k % 11 = 0")
        db.commit()
    finally:
        db.close()
    again = sqlite3.connect(mount.path / "db.sqlite")
    try:
        assert again.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        total = again.execute("SELECT count(*) FROM t").fetchone()[0]
        assert total == 1000 - 1000 // 11
        changed = again.execute("SELECT count(*) FROM t WHERE v = 'changed'").fetchone()[0]
        assert changed == len([k for k in range(1, 1001) if k % 7 == 0 and k % 11])
    finally:
        again.close()


def test_git_init_add_commit_status_log(mount: Mount) -> None:
    repo = mount.path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    for k in range(5):
        (repo / f"f{k}.txt").write_text(f"file {k}\n" * (k + 1))
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (repo / "f0.txt").write_text("changed\n")
    subprocess.run([*git, "commit", "-qam", "second"], check=True)
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True)
    assert status.returncode == 0 and status.stdout == ""
    log = subprocess.run([*git, "log", "--oneline"], capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 2
    fsck = subprocess.run([*git, "fsck", "--strict"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_close_to_open_with_the_library(mount: Mount, inline_cluster: DataCluster) -> None:
    with SyncClient(inline_cluster.namenode.address) as lib:
        (mount.path / "from-mount").write_bytes(b"written through the mount")
        assert lib.read_file("/from-mount") == b"written through the mount"
        lib.write_file("/from-lib", b"first")
        assert (mount.path / "from-lib").read_bytes() == b"first"
        lib.write_file("/from-lib", b"second version")
        assert (mount.path / "from-lib").read_bytes() == b"second version"
        lib.mkdir("/made-by-lib")
        assert (mount.path / "made-by-lib").is_dir()


def test_a_removed_file_stays_readable_while_open(mount: Mount) -> None:
    path = mount.path / "tmp"
    path.write_bytes(b"still here")
    with open(path, "rb") as f:
        os.unlink(path)
        assert f.read() == b"still here"
        assert os.fstat(f.fileno()).st_size == len(b"still here")
    assert not path.exists()


def test_ordinary_programs_copy_archive_find_and_remove_a_tree(
    mount: Mount, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    for d in range(4):
        for f in range(6):
            p = source / f"dir{d}" / f"sub{f % 2}" / f"file{f}.txt"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(os.urandom(100 + 97 * f * d))
    (source / "dir0" / "link").symlink_to("sub0/file0.txt")
    subprocess.run(["cp", "-a", str(source), str(mount.path / "copy")], check=True)
    diff = subprocess.run(["diff", "-r", str(source), str(mount.path / "copy")], check=False)
    assert diff.returncode == 0
    found = subprocess.run(
        ["find", str(mount.path / "copy"), "-type", "f"], capture_output=True, text=True
    ).stdout.split()
    assert len(found) == 24
    listing = subprocess.run(["ls", "-lR", str(mount.path)], capture_output=True, text=True)
    assert listing.returncode == 0 and "file5.txt" in listing.stdout
    du = subprocess.run(["du", "-sb", str(mount.path / "copy")], capture_output=True, text=True)
    assert du.returncode == 0
    archive = tmp_path / "tree.tar"
    subprocess.run(["tar", "cf", str(archive), "-C", str(mount.path), "copy"], check=True)
    (mount.path / "unpacked").mkdir()
    subprocess.run(["tar", "xf", str(archive), "-C", str(mount.path / "unpacked")], check=True)
    cmp = filecmp.dircmp(source / "dir3", mount.path / "unpacked" / "copy" / "dir3")
    assert not cmp.diff_files and not cmp.left_only and not cmp.right_only
    shutil.copytree(source, mount.path / "shutil-copy", symlinks=True)
    subprocess.run(["rm", "-rf", str(mount.path / "copy"), str(mount.path / "unpacked")])
    assert sorted(os.listdir(mount.path)) == ["shutil-copy"]
    shutil.rmtree(mount.path / "shutil-copy")
    assert os.listdir(mount.path) == []


def test_python_shutil_and_tempfile_work_on_the_mount(mount: Mount) -> None:
    root = mount.path
    with tempfile.NamedTemporaryFile(dir=root, suffix=".tmp") as named:
        named.write(b"temporary" * 1000)
        named.flush()
        os.fsync(named.fileno())
        assert Path(named.name).read_bytes() == b"temporary" * 1000
    assert not Path(named.name).exists()
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        (Path(scratch) / "inside").mkdir()
        (Path(scratch) / "inside" / "f").write_text("x")
        descriptor, name = tempfile.mkstemp(dir=scratch)
        os.close(descriptor)
        assert stat.S_IMODE(Path(name).stat().st_mode) == 0o600
    assert not Path(scratch).exists()
    source = root / "source.bin"
    source.write_bytes(os.urandom(200_000))
    os.utime(source, ns=(1_000_000_000, 1_500_000_000_123_456_789))
    shutil.copy2(source, root / "copy2.bin")
    assert (root / "copy2.bin").read_bytes() == source.read_bytes()
    assert (root / "copy2.bin").stat().st_mtime_ns == 1_500_000_000_123_456_789
    shutil.copyfile(source, root / "copyfile.bin")
    shutil.move(root / "copyfile.bin", root / "moved.bin")
    assert (root / "moved.bin").read_bytes() == source.read_bytes()
    assert shutil.disk_usage(root).total > 0
    assert sorted(os.listdir(root)) == ["copy2.bin", "moved.bin", "source.bin"]


def test_rsync_copies_a_tree_and_then_only_what_changed(mount: Mount, tmp_path: Path) -> None:
    source = tmp_path / "src"
    for k in range(12):
        p = source / f"d{k % 3}" / f"f{k}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(500 * k + 1))
    target = mount.path / "mirror"
    rsync = ["rsync", "-a", "--itemize-changes", f"{source}/", f"{target}/"]
    subprocess.run(rsync, check=True, capture_output=True)
    assert subprocess.run(["diff", "-r", str(source), str(target)]).returncode == 0
    again = subprocess.run(rsync, check=True, capture_output=True, text=True)
    assert again.stdout == ""  # sizes and mtimes kept: nothing to send
    (source / "d1" / "f4").write_bytes(b"new content")
    changed = subprocess.run(rsync, check=True, capture_output=True, text=True)
    assert [line.split()[-1] for line in changed.stdout.splitlines()] == ["d1/f4"]
    assert (target / "d1" / "f4").read_bytes() == b"new content"


def test_dd_writes_and_reads_back_whole(mount: Mount) -> None:
    target = mount.path / "dd.bin"
    subprocess.run(
        ["dd", "if=/dev/urandom", f"of={target}", "bs=64k", "count=40", "conv=fsync"],
        check=True,
        capture_output=True,
    )
    assert target.stat().st_size == 40 * 65536
    copy = mount.path / "dd.copy"
    subprocess.run(["dd", f"if={target}", f"of={copy}", "bs=1k"], check=True, capture_output=True)
    assert copy.read_bytes() == target.read_bytes()


def test_writes_through_a_write_only_open_skip_the_kernel_page_cache(mount: Mount) -> None:
    """A write-only open writes around the kernel's page cache (nothing could read those
    pages before the next open drops them); a read-write open keeps it (it may map the
    file). Seen through a mapping made before the write: mincore(2) counts its pages."""
    size = 64 * mmap.PAGESIZE
    target = mount.path / "pages.bin"
    target.write_bytes(b"\0" * size)
    for access, cached_pages in ((os.O_WRONLY, 0), (os.O_RDWR, 64)):
        reader = os.open(target, os.O_RDONLY)
        writer = os.open(target, access)  # each open drops the cached pages
        try:
            os.pwrite(writer, os.urandom(size), 0)
            assert _pages_in_cache(reader, size) == cached_pages
        finally:
            os.close(writer)
            os.close(reader)
    data = os.urandom(size)
    with open(target, "wb") as out:  # O_WRONLY | O_TRUNC | O_CREAT
        out.write(data)
    assert target.read_bytes() == data


def test_the_last_close_of_a_file_read_lets_the_kernel_free_its_pages(mount: Mount) -> None:
    """Pages read through the mount are freed at the file's last close (the next open
    would drop them anyway, close-to-open), not when memory runs short: the next reads
    reuse that memory. Seen in the kernel's count of cached memory, which grows by the
    file's size while it is open and falls back once it is closed."""
    size = 8 * 1024 * 1024
    target = mount.path / "read-once.bin"
    with open(target, "wb") as out:  # a write-only open: around the page cache
        for _ in range(size // (1024 * 1024)):
            out.write(os.urandom(1024 * 1024))
    with open(target, "rb") as f:
        before = _cached_bytes()
        while f.read(1024 * 1024):
            pass
        while_open = _cached_bytes()
    assert while_open - before > size * 3 // 4  # reading filled the page cache
    deadline = time.monotonic() + 10
    while _cached_bytes() > while_open - size * 3 // 4:
        assert time.monotonic() < deadline, "the file's pages stayed cached after its close"
        time.sleep(0.05)


def _cached_bytes() -> int:
    """The kernel's cached memory (/proc/meminfo: page cache and shared memory)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Cached:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no Cached line in /proc/meminfo")


def _pages_in_cache(fd: int, size: int) -> int:
    """How many pages of the first `size` bytes of `fd`'s file are in the page cache
    (a shared read-only mapping is made and not touched: mincore(2) asks the cache)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]  # fmt: skip
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if address == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        resident = ctypes.create_string_buffer(size // mmap.PAGESIZE)
        if libc.mincore(address, size, resident) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return sum(byte & 1 for byte in resident.raw)
    finally:
        libc.munmap(address, size)


def test_the_kernel_reads_ahead_a_whole_request(mount: Mount) -> None:
    """As root, the mount raises its kernel read-ahead from 128 KiB to 1 MiB."""
    if os.geteuid() != 0:
        pytest.skip("the read-ahead of a mount is raised by root only")
    device = mount.path.stat().st_dev
    setting = Path(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb")
    assert _wait(lambda: setting.read_text().strip() == str(READ_AHEAD // 1024), 10)
    data = os.urandom(3 * READ_AHEAD + 5)
    source, copy = mount.path / "whole.bin", mount.path / "whole.copy"
    source.write_bytes(data)
    subprocess.run(["cp", str(source), str(copy)], check=True)
    assert copy.read_bytes() == data


async def test_the_mount_acts_as_the_user_of_its_credential(
    inline_cluster: DataCluster, tmp_path: Path, ifs: Client
) -> None:
    await ifs.mkdir("/private", 0o700)
    await ifs.write_file("/private/secret", b"root's")
    await ifs.write_file("/shared", b"readable")
    await ifs.mkdir("/alice")
    await ifs.chown("/alice", 1001, 1001)
    token = tmp_path / "alice.token"
    token.write_text(TOKENS["alice"])
    token.chmod(0o600)
    with mounted(inline_cluster.namenode.address, tmp_path / "m", token_file=token) as m:
        assert _errno(os.listdir, m.path / "private") == errno.EACCES
        assert _errno(os.stat, m.path / "private" / "secret") == errno.EACCES
        assert _errno(os.mkdir, m.path / "mine") == errno.EACCES
        assert (m.path / "shared").read_bytes() == b"readable"
        (m.path / "alice" / "hers").write_bytes(b"alice's")
        assert os.stat(m.path / "alice" / "hers").st_uid == 1001
        assert _errno(os.chown, m.path / "alice" / "hers", 0, 0) == errno.EPERM


def test_a_read_only_mount_refuses_changes(inline_cluster: DataCluster, tmp_path: Path) -> None:
    with SyncClient(inline_cluster.namenode.address) as lib:
        lib.write_file("/f", b"content")
    with mounted(inline_cluster.namenode.address, tmp_path / "ro", "ro") as m:
        assert (m.path / "f").read_bytes() == b"content"
        assert _errno(os.mkdir, m.path / "d") == errno.EROFS
        assert _errno(os.unlink, m.path / "f") == errno.EROFS


def test_mount_and_umount_report_bad_input_in_one_line(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt") as m:
        env = m.env
        assert_error(run_pfs(env, "mount", str(m.path)), "mount", "already a mount point")
        assert_error(run_pfs(env, "mount", str(tmp_path / "none")), "mount", "not a directory")
        (tmp_path / "other").mkdir()
        assert_error(
            run_pfs(env, "mount", str(tmp_path / "other"), "-o", "replication=0x"),
            "mount",
            "replication",
        )
        assert_error(
            run_pfs(env, "mount", str(tmp_path / "other"), "-o", "speed=max"),
            "mount",
            "unknown mount option",
        )
        assert not is_mounted(tmp_path / "other")
        assert_error(run_pfs(env, "umount", str(tmp_path / "other")), "umount", "not a mount")


def test_a_killed_mount_process_leaves_a_mount_point_umount_clears(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt") as m:
        os.kill(m.pid, signal.SIGKILL)
        assert _wait(lambda: not m.alive())
        # An error at once, not a hung shell (the first call may see the connection
        # aborted, later ones see it gone).
        assert _errno(os.listdir, m.path) in (errno.ECONNABORTED, errno.ENOTCONN)
        result = run_pfs(m.env, "umount", str(m.path))
        assert result.rc == 0, result
        assert not is_mounted(m.path)
        assert os.listdir(m.path) == []


def test_umount_ends_the_mount_process(inline_cluster: DataCluster, tmp_path: Path) -> None:
    with mounted(inline_cluster.namenode.address, tmp_path / "mnt") as m:
        (m.path / "f").write_bytes(b"x")
        assert run_pfs(m.env, "umount", str(m.path)).rc == 0
        assert _wait(lambda: not m.alive())
        assert "unmounted" in m.log.read_text()
    unmount(m.path, m.pid)


def _wait(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Poll a condition the mount's process makes true (it is not our child)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_requests_wait_while_the_namenode_restarts_then_the_mount_carries_on(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    (mount.path / "before").write_bytes(b"written before")
    inline_cluster.namenode.kill9()
    restart = threading.Timer(1.0, inline_cluster.namenode.start)
    restart.start()
    try:
        os.mkdir(mount.path / "made-while-down")  # waits, as on an NFS hard mount
    finally:
        restart.join()
    assert (mount.path / "before").read_bytes() == b"written before"
    assert sorted(os.listdir(mount.path)) == ["before", "made-while-down"]


@pytest.mark.slow
def test_requests_fail_with_eio_after_failover_timeout_then_carry_on(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "mnt", "failover_timeout=1") as m:
        (m.path / "before").write_bytes(b"written before")
        inline_cluster.namenode.kill9()
        started = time.monotonic()
        assert _errno(os.stat, m.path / "unknown-name") == errno.EIO
        assert _errno(os.mkdir, m.path / "made-while-down") == errno.EIO
        assert time.monotonic() - started < 30  # fails, never hangs
        inline_cluster.namenode.start()
        assert _wait(lambda: _ok(lambda: os.mkdir(m.path / "made-after")))
        assert (m.path / "before").read_bytes() == b"written before"
        assert sorted(os.listdir(m.path)) == ["before", "made-after"]


def test_reads_fail_over_when_a_datanode_dies(mount: Mount, inline_cluster: DataCluster) -> None:
    data = os.urandom(10 * inline_cluster.blocksize)
    with mounted(inline_cluster.namenode.address, mount.path.parent / "rep2", "replication=2") as m:
        (m.path / "twice").write_bytes(data)
        inline_cluster.datanodes[0].kill9()
        for _ in range(3):  # whichever replica a read starts with
            assert (m.path / "twice").read_bytes() == data


def _ok(call: Callable[[], object]) -> bool:
    try:
        call()
    except OSError:
        return False
    return True


@pytest.fixture
def roomy_cluster(dsn: str, tmp_path: Path) -> Iterator[NamenodeProcess]:
    """A namenode and two datanodes of 1 GiB: replaced files keep their blocks for a
    ticket lifetime, so steady rewriting needs room."""
    namenode = NamenodeProcess(
        dsn, tmp_path, env={"PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(64 * 1024)}
    ).start()
    datanodes = []
    try:
        for k in range(2):
            datanodes.append(
                DatanodeProcess(
                    tmp_path / f"dn{k}", namenode.registry_address, 2**30, 64 * 1024
                ).start()
            )
        yield namenode
    finally:
        for d in datanodes:
            d.stop()
        namenode.stop()


@pytest.mark.slow
def test_three_writers_and_ten_readers_see_only_whole_files(
    roomy_cluster: NamenodeProcess, tmp_path: Path
) -> None:
    with mounted(roomy_cluster.address, tmp_path / "mnt") as mount:
        _churn(mount)


def _churn(mount: Mount) -> None:
    directory = mount.path / "churn"
    directory.mkdir()
    result = run_churn(directory, 60)  # a full minute
    assert result["errors"] == [] and result["broken"] == [] and result["idle"] == []
    assert result["temporaries"] == []
    assert result["written"] > 0 and result["read"] > 0


def test_a_quota_answers_edquot_and_the_tree_stays_whole(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    bs = inline_cluster.blocksize
    root = mount.path
    (root / "limited").mkdir()
    with SyncClient(inline_cluster.namenode.address) as fs:
        fs.set_quota("/limited", entries=3, space=4 * bs)
    (root / "limited" / "a").write_bytes(b"a")
    (root / "limited" / "b").write_bytes(b"b")
    assert _errno(os.open, str(root / "limited" / "c"), os.O_CREAT | os.O_WRONLY) == errno.EDQUOT
    assert _errno(os.mkdir, root / "limited" / "d") == errno.EDQUOT
    big = os.urandom(5 * bs)  # 5 blocks, twice over (replication 2): past the space
    with pytest.raises(OSError) as raised, open(root / "limited" / "a", "wb") as f:
        f.write(big)
        os.fsync(f.fileno())
    assert raised.value.errno == errno.EDQUOT
    assert sorted(os.listdir(root / "limited")) == ["a", "b"]
    assert (root / "limited" / "b").read_bytes() == b"b"


def test_a_directory_moved_under_a_quota_is_no_longer_written_behind(
    mount: Mount, inline_cluster: DataCluster
) -> None:
    root = mount.path
    (root / "q").mkdir()
    (root / "x" / "d").mkdir(parents=True)  # the mount leases what it makes
    (root / "x" / "d" / "a").write_bytes(b"a")
    with SyncClient(inline_cluster.namenode.address) as fs:
        fs.set_quota("/q", entries=3)  # q, d and a
    os.rename(root / "x" / "d", root / "q" / "d")  # its lease ends as it moves
    assert _errno(os.open, str(root / "q" / "d" / "b"), os.O_CREAT | os.O_WRONLY) == errno.EDQUOT
    assert os.listdir(root / "q" / "d") == ["a"]
    with SyncClient(inline_cluster.namenode.address) as fs:
        assert fs.listdir("/q/d") == ["a"]
