"""`pfs chmod`, `pfs mkdir -m` and `pfs chown` arguments: octal digits and symbolic modes
as chmod(1) takes them, ASCII decimal ids; anything else is a one-line error that
changes nothing."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from plasmafs.client import SyncClient
from tests.support.cli_runner import Pfs, assert_error, assert_ok

# Near-misses of octal digits and of symbolic modes: int(text, 8) took the first two.
BAD_MODES = [
    "6_4_4",
    " 644",
    "644 ",
    "644\n",
    "\u0666\u0664\u0664",  # 644 in Arabic-Indic digits
    "+0o644",
    "99",
    "8",
    "17777",
    "0o",
    "",
    "abc",
    "u",
    "ux",
    "u+q",
    "u+x,",
    ",u+x",
    "a+r x",
    "u=go",
    "+ux",
]


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """The CLI inherits umask 022, which symbolic modes without u, g, o or a respect."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_octal_modes_are_ascii_octal_digits_only(pfs: Pfs, lib: SyncClient) -> None:
    lib.create("/f", 0o600)
    for bad in BAD_MODES:
        assert_error(pfs("chmod", bad, "/f"), "chmod", f"invalid mode {bad!r}")
        assert_error(pfs("mkdir", "-m", bad, "/never"), "mkdir", f"invalid mode {bad!r}")
    assert lib.lookup("/f").mode == 0o600
    assert not lib.exists("/never")
    for good, mode in [("644", 0o644), ("0644", 0o644), ("00750", 0o750), ("0o2750", 0o2750)]:
        assert_ok(pfs("chmod", good, "/f"))
        assert lib.lookup("/f").mode == mode


@pytest.mark.parametrize(
    ("start", "symbolic", "expected"),
    [
        (0o644, "u+x", 0o744),
        (0o666, "go-w", 0o644),
        (0o751, "a=r", 0o444),
        (0o664, "u+rwx,g-w", 0o744),
        (0o644, "+x", 0o755),
        (0o666, "-w", 0o466),  # umask 022: only the owner's w goes
        (0o640, "g=u", 0o660),
        (0o740, "o=g,g=", 0o704),
        (0o777, "u=rw,go=", 0o600),
        (0o644, "u+x-w", 0o544),
        (0o644, "a+X", 0o644),  # X: a plain file without execute bits stays so
        (0o744, "a+X", 0o755),
        (0o755, "u+s,g+s", 0o6755),
        (0o755, "+t", 0o1755),
        (0o6755, "ug-s", 0o755),
        (0o644, "u+", 0o644),
        (0o644, "=", 0o000),
    ],
    ids=lambda v: f"{v:o}" if isinstance(v, int) else v,
)
def test_symbolic_modes_change_the_current_mode_as_chmod_does(
    pfs: Pfs, lib: SyncClient, tmp_path: Path, start: int, symbolic: str, expected: int
) -> None:
    lib.create("/f", start)
    assert_ok(pfs("chmod", symbolic, "/f"))
    assert lib.lookup("/f").mode == expected
    # The reference: chmod(1) on a local file, with the same umask.
    local = tmp_path / "local"
    local.touch()
    local.chmod(start)
    subprocess.run(["chmod", "--", symbolic, str(local)], check=True)
    assert stat.S_IMODE(local.stat().st_mode) == expected


def test_symbolic_modes_on_directories_links_and_several_files(pfs: Pfs, lib: SyncClient) -> None:
    lib.mkdir("/d", 0o2644)
    lib.create("/a", 0o600)
    lib.create("/b", 0o640)
    lib.symlink("/ln", "/b")
    assert_ok(pfs("chmod", "a+X", "/d"))  # X: directories get execute bits
    assert lib.lookup("/d").mode == 0o2755
    assert_ok(pfs("chmod", "a=rx", "/d"))  # a directory keeps set-id bits not named
    assert lib.lookup("/d").mode == 0o2555
    assert_ok(pfs("chmod", "u+x", "/a", "/ln"))  # each from its own mode; links followed
    assert (lib.lookup("/a").mode, lib.lookup("/b").mode) == (0o700, 0o740)
    assert_ok(pfs("chmod", "--", "-x", "/a"))  # a mode starting with - after --
    assert lib.lookup("/a").mode == 0o600
    assert_error(pfs("chmod", "u+x", "/a", "/nope", "/b"), "chmod", "/nope")
    assert (lib.lookup("/a").mode, lib.lookup("/b").mode) == (0o700, 0o740)


def test_mkdir_takes_symbolic_modes_from_a_equals_rwx(pfs: Pfs, lib: SyncClient) -> None:
    assert_ok(pfs("mkdir", "-m", "go-w", "/one"))
    assert_ok(pfs("mkdir", "-m", "u=rwx,go=", "/two"))
    assert_ok(pfs("mkdir", "-p", "-m", "0700", "/three/four"))
    assert_ok(pfs("mkdir", "-m", "=rx,+t", "/five"))  # umask 022 leaves w out either way
    assert lib.lookup("/one").mode == 0o755
    assert lib.lookup("/two").mode == 0o700
    assert lib.lookup("/three/four").mode == 0o700
    assert lib.lookup("/five").mode == 0o1555


def test_chown_takes_ascii_decimal_ids_and_names(pfs: Pfs, lib: SyncClient) -> None:
    lib.create("/f")
    lib.chown("/f", 10, 20)
    for bad, fragment in [
        ("\u0663", "unknown user"),  # Arabic-Indic 3: not uid 3
        ("\u00b2", "unknown user"),  # superscript 2: str.isdigit() says yes
        (":\u0663", "unknown group"),
        ("1:\u0663", "unknown group"),
        ("+5", "unknown user"),
        (" 5", "unknown user"),
        ("5:", "invalid owner"),
        (":", "invalid owner"),
        ("", "invalid owner"),
        ("4294967296", "out of range"),
    ]:
        assert_error(pfs("chown", bad, "/f"), "chown", fragment)
    f = lib.lookup("/f")
    assert (f.uid, f.gid) == (10, 20)
    assert_ok(pfs("chown", "0042", "/f"))
    assert (lib.lookup("/f").uid, lib.lookup("/f").gid) == (42, 20)
    assert_ok(pfs("chown", "7:8", "/f"))
    assert (lib.lookup("/f").uid, lib.lookup("/f").gid) == (7, 8)
    assert_ok(pfs("chown", ":9", "/f"))
    assert (lib.lookup("/f").uid, lib.lookup("/f").gid) == (7, 9)
    assert_ok(pfs("chown", "root:0", "/f"))
    assert (lib.lookup("/f").uid, lib.lookup("/f").gid) == (0, 0)
