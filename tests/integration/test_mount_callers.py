"""A mount acting for its host's users (`pfs mount -o callers`) on a real cluster: local
users, run with setpriv, each get exactly their own rights (EACCES and EPERM where
POSIX says), own what they make, and their groups count; a mount whose user lacks the
right says so and stays its user's alone."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import Client
from tests.conftest import DataCluster
from tests.support.accounts import STAFF_GID, TOKENS
from tests.support.cli_runner import clean_env, run_pfs
from tests.support.mounts import MOUNTED, Mount, mounted, unmount

ANN, BEN, CAT = 5000, 6000, 7000  # local users without accounts on the cluster


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every local user may enter (pytest's tmp_path is root's alone)."""
    where = Path(tempfile.mkdtemp(prefix="pfs-callers-", dir="/tmp"))
    where.chmod(0o755)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture
def callers_mount(inline_cluster: DataCluster, open_dir: Path) -> Iterator[Mount]:
    """The cluster mounted as root (a superuser: it has the right) with -o callers."""
    with mounted(inline_cluster.namenode.address, open_dir / "mnt", "callers") as m:
        yield m


def _as(uid: int, script: str, *groups: int) -> subprocess.CompletedProcess[str]:
    """`sh -c script` as local user `uid` (its gid the same number) in `groups`."""
    joined = f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups"
    return subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", joined, "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=60,
        check=False,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done
    return done.stdout


def _refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode != 0 and message in done.stderr, done


async def test_each_local_user_gets_exactly_its_rights(callers_mount: Mount, ifs: Client) -> None:
    await ifs.mkdir("/shared", 0o1777)
    mnt = callers_mount.path
    _ok(_as(ANN, f"mkdir -m 700 {mnt}/shared/ann && echo hers > {mnt}/shared/ann/notes"))
    _ok(_as(ANN, f"for i in $(seq 20); do echo $i > {mnt}/shared/ann/f$i; done"))
    assert _ok(_as(ANN, f"cat {mnt}/shared/ann/notes")) == "hers\n"
    _refused(_as(BEN, f"cat {mnt}/shared/ann/notes"), "Permission denied")
    _refused(_as(BEN, f"touch {mnt}/shared/ann/x"), "Permission denied")
    _refused(_as(BEN, f"chmod 777 {mnt}/shared/ann"), "Operation not permitted")
    _ok(_as(BEN, f"mkdir {mnt}/shared/ben && echo his > {mnt}/shared/ben/notes"))
    _refused(_as(ANN, f"rm -r {mnt}/shared/ben"), "Permission denied")
    _refused(_as(BEN, f"mv {mnt}/shared/ann {mnt}/shared/mine"), "Operation not permitted")
    # What the mount queued went to the namenode as its caller: the namenode agrees.
    _ok(_as(ANN, f"sync {mnt}/shared/ann/notes"))
    _ok(_as(BEN, f"sync {mnt}/shared/ben/notes"))
    for path, uid in [
        ("/shared/ann", ANN),
        ("/shared/ann/notes", ANN),
        ("/shared/ann/f20", ANN),
        ("/shared/ben", BEN),
        ("/shared/ben/notes", BEN),
    ]:
        attr = await ifs.stat(path)
        assert (attr.uid, attr.gid) == (uid, uid), path
    assert await ifs.read_file("/shared/ann/f20") == b"20\n"
    # The host's root is the superuser.
    _ok(_as(0, f"chown {BEN}:{BEN} {mnt}/shared/ann/notes"))
    assert (await ifs.stat("/shared/ann/notes")).uid == BEN


async def test_a_local_users_groups_count(callers_mount: Mount, ifs: Client) -> None:
    await ifs.mkdir("/team", 0o770)
    await ifs.chown("/team", 0, STAFF_GID)
    mnt = callers_mount.path
    _ok(_as(CAT, f"echo plan > {mnt}/team/plan && ls {mnt}/team", STAFF_GID))
    attr = await ifs.stat("/team/plan")
    assert (attr.uid, attr.gid) == (CAT, CAT)
    _refused(_as(CAT, f"ls {mnt}/team"), "Permission denied")
    _refused(_as(CAT, f"cat {mnt}/team/plan"), "Permission denied")


async def test_what_pjdfstest_found_about_open_and_unchanged_files(
    callers_mount: Mount, ifs: Client
) -> None:
    await ifs.mkdir("/shared", 0o1777)
    mnt = callers_mount.path
    ann = mnt / "shared" / "ann"
    _ok(_as(ANN, f"mkdir {ann} && echo x > {ann}/f && chmod 755 {ann}"))
    # chown(f, -1, -1) changes nothing, so anyone may ask it (POSIX).
    _ok(_as(BEN, f"python3 -c 'import os; os.chown(\"{mnt}/shared/ann/f\", -1, -1)'"))
    # A file removed while open has no link left, whether the removal was queued or not.
    for where in ("shared/ann/f", "shared/g"):
        script = (
            "import os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600); "
            "os.unlink(sys.argv[1]); print(os.fstat(fd).st_nlink)"
        )
        out = _as(ANN, f"python3 -c '{script}' {mnt}/{where}")
        assert _ok(out).strip() == "0", (where, out)
    # O_TRUNC empties a file at the open, written after or not, and that is a change.
    _ok(_as(ANN, f"echo test > {ann}/t"))
    before = (await ifs.stat("/shared/ann/t")).mtime_ns
    script = "import os, sys; os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC))"
    _ok(_as(ANN, f"python3 -c '{script}' {ann}/t"))
    after = await ifs.stat("/shared/ann/t")
    assert after.size == 0 and after.mtime_ns > before
    # A write by anyone but root clears set-user-ID (and set-group-ID with group x).
    for mode, flag in ((0o4777, "O_WRONLY"), (0o6777, "O_RDWR"), (0o2777, "O_WRONLY")):
        await ifs.write_file("/shared/setid", b"")
        await ifs.chmod("/shared/setid", mode)
        script = f"import os, sys; fd = os.open(sys.argv[1], os.{flag}); os.write(fd, b'x')"
        _ok(_as(BEN, f'python3 -c "{script}" {mnt}/shared/setid'))
        assert (await ifs.stat("/shared/setid")).mode == 0o777, oct(mode)


def test_a_mount_without_the_right_is_its_users_alone(
    inline_cluster: DataCluster, open_dir: Path
) -> None:
    token = open_dir / "alice.token"
    token.write_text(TOKENS["alice"])
    token.chmod(0o600)
    where = open_dir / "alice-mnt"
    where.mkdir()
    home = open_dir / "home"
    home.mkdir()
    env = {**clean_env(home, inline_cluster.namenode.address), "PFS_TOKEN_FILE": str(token)}
    done = run_pfs(env, "mount", str(where), "-o", "callers")
    match = MOUNTED.match(done.out.strip())
    try:
        assert done.rc == 0 and match is not None, done
        assert "alice may not act for this host's users" in done.err, done
        assert "mounted for alice alone" in done.err
        # Not let in at all (no allow_other): the kernel refuses other local users.
        _refused(_as(ANN, f"ls {where}"), "Permission denied")
    finally:
        unmount(where, int(match["pid"]) if match else None)


async def test_extended_attributes_and_locks_as_each_caller(
    callers_mount: Mount, ifs: Client
) -> None:
    await ifs.mkdir("/shared", 0o1777)
    mnt = callers_mount.path
    _ok(_as(ANN, f"echo x > {mnt}/shared/a && chmod 644 {mnt}/shared/a"))
    set_note = "import os, sys; os.setxattr(sys.argv[1], 'user.note', sys.argv[2].encode())"
    _ok(_as(ANN, f'python3 -c "{set_note}" {mnt}/shared/a hers'))
    get_note = "import os, sys; print(os.getxattr(sys.argv[1], 'user.note').decode())"
    assert _ok(_as(BEN, f'python3 -c "{get_note}" {mnt}/shared/a')) == "hers\n"  # R: may read
    _refused(_as(BEN, f'python3 -c "{set_note}" {mnt}/shared/a his'), "Permission denied")
    trusted = "import os, sys; os.setxattr(sys.argv[1], 'trusted.t', b'1')"
    _refused(_as(ANN, f'python3 -c "{trusted}" {mnt}/shared/a'), "Operation not permitted")
    _ok(_as(0, f'python3 -c "{trusted}" {mnt}/shared/a'))
    assert await ifs.listxattr("/shared/a") == ["trusted.t", "user.note"]
    # locks as each caller: one who may not open the file gets no lock either
    _ok(_as(ANN, f"chmod 600 {mnt}/shared/a"))
    lock = "import fcntl, sys; fcntl.flock(open(sys.argv[1]), fcntl.LOCK_SH)"
    _ok(_as(ANN, f'python3 -c "{lock}" {mnt}/shared/a'))
    _refused(_as(BEN, f'python3 -c "{lock}" {mnt}/shared/a'), "Permission denied")


async def test_each_caller_is_held_to_its_rights_at_every_step(
    callers_mount: Mount, ifs: Client
) -> None:
    """Each caller as POSIX says, whoever checks it (the kernel, the mount, the
    namenode): a name the kernel keeps is no way past a directory made private, and
    opens, access(2), exec, times and FIFOs follow the caller's rights."""
    await ifs.mkdir("/shared", 0o1777)
    mnt = callers_mount.path
    d = mnt / "shared" / "d"
    _ok(_as(ANN, f"mkdir -m 755 {d} && echo hers > {d}/f && chmod 644 {d}/f"))
    assert _ok(_as(BEN, f"cat {d}/f")) == "hers\n"  # the kernel now keeps the name d/f
    _ok(_as(ANN, f"chmod 700 {d}"))
    _refused(_as(BEN, f"cat {d}/f"), "Permission denied")  # at once, not a second later
    _refused(_as(BEN, f"stat {d}/f"), "Permission denied")
    assert _ok(_as(ANN, f"cat {d}/f")) == "hers\n"
    _refused(_as(BEN, f"python3 -c 'import os; os.chdir(\"{d}\")'"), "Permission denied")
    # access(2) and open by mode
    _ok(_as(ANN, f"chmod 755 {d} && chmod 640 {d}/f"))
    _ok(_as(ANN, f"test -r {d}/f && test -w {d}/f"))
    _ok(_as(BEN, f"test ! -r {d}/f && test ! -w {d}/f && test -x {d}"))
    _refused(_as(BEN, f"cat {d}/f"), "Permission denied")
    _refused(_as(BEN, f"echo more >> {d}/f"), "Permission denied")
    _refused(_as(BEN, f": > {d}/f"), "Permission denied")  # O_TRUNC: nothing cut
    assert await ifs.read_file("/shared/d/f") == b"hers\n"
    # exec(2) needs x for the caller, not for anyone
    _ok(_as(ANN, f"printf '#!/bin/sh\\necho ran\\n' > {d}/run && chmod 744 {d}/run"))
    assert _ok(_as(ANN, f"{d}/run")) == "ran\n"
    _refused(_as(BEN, f"{d}/run"), "Permission denied")
    # times: to now for whoever may write, any time for the owner alone
    _ok(_as(ANN, f"chmod 666 {d}/f"))
    _ok(_as(BEN, f"touch {d}/f"))
    _refused(_as(BEN, f"touch -d 2020-01-01 {d}/f"), "Operation not permitted")
    _ok(_as(ANN, f"chmod 644 {d}/f"))
    _refused(_as(BEN, f"touch {d}/f"), "Permission denied")
    _refused(_as(BEN, f"chmod 777 {d}/f"), "Operation not permitted")
    _refused(_as(BEN, f"chgrp {BEN} {d}/f"), "Operation not permitted")
    # a FIFO opens for its caller's rights too (the kernel serves it, not the mount)
    _ok(_as(ANN, f"mkfifo -m 600 {d}/pipe"))
    reader = f"python3 -c 'import os; os.open(\"{d}/pipe\", os.O_RDONLY | os.O_NONBLOCK)'"
    _ok(_as(ANN, reader))
    _refused(_as(BEN, reader), "Permission denied")
    assert (await ifs.stat("/shared/d/f")).mode == 0o644
