"""File locks through two mounts of one cluster, as two hosts would have them: fcntl
and flock conflicts and F_GETLK, a wait granted when the holder is killed -9 (and
when the holding mount itself is), a wait interrupted by a signal, and sqlite
(rollback journal) from processes on both mounts without a lost or torn transaction,
SQLite WAL from processes of one mount, and shared mappings refused between hosts.
Needs pyfuse3 with the lock handlers (scripts/pyfuse3-with-locks)."""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plasmafs.mount.file_locks import locks_cross_hosts
from tests.conftest import DataCluster
from tests.support.mounts import mounted

pytestmark = pytest.mark.skipif(
    not locks_cross_hosts(), reason="pyfuse3 without lock handlers (scripts/pyfuse3-with-locks)"
)
FLOCK = "hhqqi"  # struct flock on Linux: type, whence, start, len, pid


def getlk(fd: int, kind: int, start: int = 0, length: int = 0) -> tuple[int, int, int, int]:
    """F_GETLK: the type (F_UNLCK if none), start, length and pid of the lock in the way."""
    asked = struct.pack(FLOCK, kind, os.SEEK_SET, start, length, 0)
    found = struct.unpack(FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, asked))
    return found[0], found[2], found[3], found[4]


def holder(path: Path, how: str) -> subprocess.Popen[str]:
    """A process that locks `path` (lockf or flock) and waits to be killed."""
    lock = "fcntl.lockf" if how == "lockf" else "fcntl.flock"
    code = (
        "import fcntl, sys, time\n"
        "f = open(sys.argv[1], 'r+')\n"
        f"{lock}(f, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "locked\n"
    return process


def test_locks_conflict_between_mounts(inline_cluster: DataCluster, tmp_path: Path) -> None:
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "a") as a, mounted(address, tmp_path / "b") as b:
        (a.path / "f").write_bytes(b"0123456789")
        fa = os.open(a.path / "f", os.O_RDWR)
        fb = os.open(b.path / "f", os.O_RDWR)
        try:
            fcntl.lockf(fa, fcntl.LOCK_EX, 5, 0)  # bytes 0-4
            with pytest.raises(OSError) as refused:
                fcntl.lockf(fb, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 4)
            assert refused.value.errno in (errno.EAGAIN, errno.EACCES)
            fcntl.lockf(fb, fcntl.LOCK_EX | fcntl.LOCK_NB, 5, 5)  # bytes 5-9: free
            assert getlk(fb, fcntl.F_RDLCK, 0, 1) == (fcntl.F_WRLCK, 0, 5, os.getpid())
            fcntl.lockf(fa, fcntl.LOCK_UN, 5, 0)
            assert getlk(fb, fcntl.F_WRLCK, 0, 5)[0] == fcntl.F_UNLCK
            # flock: a family of its own, one per open file description
            fcntl.flock(fa, fcntl.LOCK_EX)
            with pytest.raises(BlockingIOError):
                fcntl.flock(fb, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fa, fcntl.LOCK_SH)  # converted: shared now
            fcntl.flock(fb, fcntl.LOCK_SH | fcntl.LOCK_NB)
        finally:
            os.close(fa)
            os.close(fb)
        # the closes ended every lock: another description takes them all
        fc = os.open(b.path / "f", os.O_RDWR)
        try:
            fcntl.flock(fc, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fc, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fc)


def waiter(path: Path, how: str) -> subprocess.Popen[str]:
    """A process that waits for the lock on `path` and says when it has it."""
    lock = "fcntl.lockf" if how == "lockf" else "fcntl.flock"
    code = (
        f"import fcntl, sys\nf = open(sys.argv[1], 'r+')\n{lock}(f, fcntl.LOCK_EX)\nprint('got')\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
    )


def test_a_killed_holder_lets_the_waiter_in(inline_cluster: DataCluster, tmp_path: Path) -> None:
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "a") as a, mounted(address, tmp_path / "b") as b:
        (a.path / "f").write_bytes(b"x")
        for how in ("lockf", "flock"):
            held = holder(a.path / "f", how)
            waiting = waiter(b.path / "f", how)
            time.sleep(1)
            assert waiting.poll() is None  # it waits
            held.kill()  # the kernel closes its files: flush and release end its locks
            out, _ = waiting.communicate(timeout=60)
            assert out == "got\n"
            held.wait()
        # a holding mount killed -9: its session ends, and its locks with it
        with mounted(address, tmp_path / "c") as c:
            held = holder(c.path / "f", "lockf")
            waiting = waiter(b.path / "f", "lockf")
            try:
                time.sleep(1)
                assert waiting.poll() is None
                os.kill(c.pid, signal.SIGKILL)
                out, _ = waiting.communicate(timeout=60)
                assert out == "got\n"
            finally:
                for process in (held, waiting):
                    process.kill()
                    process.wait()


def test_a_wait_ends_at_a_signal(inline_cluster: DataCluster, tmp_path: Path) -> None:
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "a") as a, mounted(address, tmp_path / "b") as b:
        (a.path / "f").write_bytes(b"x")
        process = holder(a.path / "f", "lockf")
        try:
            code = (
                "import fcntl, signal, sys\n"
                "def alarm(*_): raise TimeoutError\n"
                "signal.signal(signal.SIGALRM, alarm)\n"
                "signal.alarm(1)\n"
                "f = open(sys.argv[1], 'r+')\n"
                "try:\n"
                "    fcntl.lockf(f, fcntl.LOCK_EX)\n"
                "    print('locked')\n"
                "except TimeoutError:\n"
                "    print('interrupted')\n"
            )
            waiter = subprocess.run(
                [sys.executable, "-c", code, str(b.path / "f")],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert waiter.stdout == "interrupted\n", waiter
        finally:
            process.kill()
            process.wait()
        with open(b.path / "f", "r+") as f:  # the withdrawn wait holds nothing
            fcntl.lockf(f, fcntl.LOCK_EX)


SQLITE_WORKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
for _ in range(int(sys.argv[2])):
    db.execute("BEGIN IMMEDIATE")
    (n,) = db.execute("SELECT n FROM counter").fetchone()
    db.execute("INSERT INTO rows (worker, seen) VALUES (?, ?)", (sys.argv[3], n))
    db.execute("UPDATE counter SET n = ?", (n + 1,))
    db.execute("COMMIT")
"""


@pytest.mark.slow  # a bounded concurrent load
def test_sqlite_from_two_mounts(inline_cluster: DataCluster, tmp_path: Path) -> None:
    address = inline_cluster.namenode.address
    workers, each = 4, 40
    with mounted(address, tmp_path / "a") as a, mounted(address, tmp_path / "b") as b:
        db = sqlite3.connect(a.path / "t.db", isolation_level=None)
        db.execute("CREATE TABLE rows (worker TEXT, seen INTEGER)")
        db.execute("CREATE TABLE counter (n INTEGER)")
        db.execute("INSERT INTO counter VALUES (0)")
        db.close()
        running = [
            subprocess.Popen(
                [sys.executable, "-c", SQLITE_WORKER, str(m.path / "t.db"), str(each), str(k)]
            )
            for k, m in enumerate((a, b, a, b))
        ]
        for process in running:
            assert process.wait(timeout=300) == 0
        db = sqlite3.connect(b.path / "t.db")
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (n,) = db.execute("SELECT n FROM counter").fetchone()
        seen = sorted(s for (s,) in db.execute("SELECT seen FROM rows"))
        db.close()
        assert n == workers * each and seen == list(range(workers * each))


def new_counter_db(path: Path, journal_mode: str) -> None:
    """A database with an empty `rows` table and a counter at 0."""
    db = sqlite3.connect(path, isolation_level=None)
    assert db.execute(f"PRAGMA journal_mode={journal_mode}").fetchone() == (journal_mode,)
    db.execute("CREATE TABLE rows (worker TEXT, seen INTEGER)")
    db.execute("CREATE TABLE counter (n INTEGER)")
    db.execute("INSERT INTO counter VALUES (0)")
    db.close()


def counted(path: Path) -> tuple[int, list[int]]:
    """The counter and the sorted values the workers saw, after an integrity check."""
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        (n,) = db.execute("SELECT n FROM counter").fetchone()
        return n, sorted(s for (s,) in db.execute("SELECT seen FROM rows"))
    finally:
        db.close()


def sqlite_worker(path: Path, each: int, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SQLITE_WORKER, str(path), str(each), name],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.slow  # a bounded concurrent load
def test_sqlite_wal_from_processes_of_one_mount(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    """WAL shares memory between processes through a mapped file: one mount is one
    host, where every open of a file sees what any other wrote."""
    with mounted(inline_cluster.namenode.address, tmp_path / "a") as a:
        new_counter_db(a.path / "t.db", "wal")
        workers, each = 4, 40
        running = [sqlite_worker(a.path / "t.db", each, str(k)) for k in range(workers)]
        for process in running:
            _, err = process.communicate(timeout=300)
            assert process.returncode == 0, err
        assert counted(a.path / "t.db") == (workers * each, list(range(workers * each)))


@pytest.mark.slow  # a bounded concurrent load
def test_sqlite_wal_on_a_second_host_is_refused(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    """A WAL index cannot be shared between hosts: a connection on a second mount gets
    "disk I/O error" (the mapping is refused), the first host's go on, nothing is
    lost. (While the refused connection still holds its lock on the index, a new
    connection on the first host is refused too, as README says: the first host's
    worker starts once the second host's attempt has ended.)"""
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "a") as a, mounted(address, tmp_path / "b") as b:
        new_counter_db(a.path / "t.db", "wal")
        holder = sqlite3.connect(a.path / "t.db", isolation_level=None)
        holder.execute("SELECT n FROM counter").fetchone()  # the WAL index in use here
        second = sqlite_worker(b.path / "t.db", 40, "b")
        _, err = second.communicate(timeout=300)
        assert second.returncode != 0 and "disk I/O error" in err, err
        first = sqlite_worker(a.path / "t.db", 40, "a")
        _, err = first.communicate(timeout=300)
        assert first.returncode == 0, err
        holder.close()
        assert counted(a.path / "t.db") == (40, list(range(40)))
        # the first host closed it: the second may use it now
        assert counted(b.path / "t.db") == (40, list(range(40)))


def test_a_file_mapped_on_two_hosts_is_not_locked_there(
    inline_cluster: DataCluster, tmp_path: Path
) -> None:
    """Opened on two mounts before either locked it: the second host to lock it while
    mapping it shared gets EIO; a file opened while another host locks it cannot be
    mapped shared (ENODEV), and reads and writes it through the cluster."""
    address = inline_cluster.namenode.address
    with mounted(address, tmp_path / "a") as a, mounted(address, tmp_path / "b") as b:
        (a.path / "f").write_bytes(bytes(8192))
        fa = os.open(a.path / "f", os.O_RDWR)
        fb = os.open(b.path / "f", os.O_RDWR)
        try:
            ma = mmap.mmap(fa, 8192)
            mb = mmap.mmap(fb, 8192)
            fcntl.lockf(fa, fcntl.LOCK_SH, 1, 100)
            with pytest.raises(OSError) as refused:
                fcntl.lockf(fb, fcntl.LOCK_SH, 1, 200)
            assert refused.value.errno == errno.EIO
            mb.close()
            fc = os.open(b.path / "f", os.O_RDWR)
            try:
                with pytest.raises(OSError) as unmapped:
                    mmap.mmap(fc, 8192)
                assert unmapped.value.errno == errno.ENODEV
                fcntl.lockf(fc, fcntl.LOCK_SH, 1, 200)  # not mapped: coherent through locks
                os.pwrite(fc, b"from b", 0)
                os.fsync(fc)
                fcntl.lockf(fc, fcntl.LOCK_UN, 1, 200)
            finally:
                os.close(fc)
            fcntl.lockf(fa, fcntl.LOCK_UN, 1, 100)
            fcntl.lockf(fa, fcntl.LOCK_SH, 1, 100)  # a lock taken: the pages read again
            assert ma[:6] == b"from b"
            ma.close()
        finally:
            os.close(fa)
            os.close(fb)
