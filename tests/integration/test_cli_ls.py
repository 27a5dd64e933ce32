"""`pfs ls` of symbolic links given on the command line, as ls(1) shows them: with -l
(or -d) the link itself as `name -> target`, dangling and looping links too, also with
-R; without, a link to a directory lists that directory."""

from __future__ import annotations

from plasmafs.client import SyncClient
from tests.integration.test_cli import long_line
from tests.support.cli_runner import Pfs, assert_error, assert_ok

LINKS = {  # name -> target
    "to-file": "/d/f",
    "to-dir": "/d/sub",
    "dangling": "/nowhere",
    "relative": "sub",
    "loop": "/d/loop",
}


def _tree(lib: SyncClient) -> None:
    with lib.transaction() as t:
        t.mkdir("/d")
        t.create("/d/f")
        t.mkdir("/d/sub")
        t.create("/d/sub/inner")
        for name, target in LINKS.items():
            t.symlink(f"/d/{name}", target)


def test_ls_long_shows_a_link_given_on_the_command_line_as_name_arrow_target(
    pfs: Pfs, lib: SyncClient
) -> None:
    _tree(lib)
    for name, target in LINKS.items():
        path = f"/d/{name}"
        line = long_line("lrwxrwxrwx", lib.lookup(path), path) + f" -> {target}\n"
        assert_ok(pfs("ls", "-l", path), line)
        assert_ok(pfs("ls", "-l", "-R", path), line)  # a link is not a directory to walk
        assert_ok(pfs("ls", "-l", "-d", path), line)
    # Several at once, in the order given.
    listing = pfs("ls", "-l", "/d/dangling", "/d/loop")
    assert_ok(listing, None)
    assert [line.split()[-3:] for line in listing.lines] == [
        ["/d/dangling", "->", "/nowhere"],
        ["/d/loop", "->", "/d/loop"],
    ]
    # A trailing slash asks for the directory the link leads to.
    inner = lib.lookup("/d/sub/inner")
    expected = long_line("-rw-r--r--", inner, "inner", replication=str(inner.replication))
    assert_ok(pfs("ls", "-l", "/d/to-dir/"), expected + "\n")


def test_ls_long_recursive_shows_links_inside_directories(pfs: Pfs, lib: SyncClient) -> None:
    _tree(lib)
    listing = pfs("ls", "-l", "-R", "/d")
    assert_ok(listing, None)
    arrows = {line.split()[-3]: line.split()[-1] for line in listing.lines if " -> " in line}
    assert arrows == LINKS
    assert "/d/sub:" in listing.lines  # the real directory is walked, its link is not
    assert not any(line.startswith("/d/to-dir") for line in listing.lines)


def test_ls_without_long_follows_a_link_to_a_directory_only(pfs: Pfs, lib: SyncClient) -> None:
    _tree(lib)
    assert_ok(pfs("ls", "/d/to-dir"), "inner\n")
    assert_ok(pfs("ls", "/d/relative"), "inner\n")
    assert_ok(pfs("ls", "-R", "/d/to-dir"), "/d/to-dir:\ninner\n")
    assert_ok(pfs("ls", "/d/to-file", "/d/dangling"), "/d/to-file\n/d/dangling\n")
    link = lib.lookup("/d/to-file")
    assert_ok(pfs("ls", "-i", "/d/to-file"), f"{link.ino:>10} /d/to-file\n")
    assert_error(pfs("ls", "/d/loop"), "ls", "too many symbolic links")
