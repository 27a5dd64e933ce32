"""`pfs du`, `count`, `find` and `cp` against a real namenode (small files kept inline,
so no datanode is needed): their output, their options, and their refusals."""

from __future__ import annotations

from plasmafs.client import SyncClient
from tests.support.cli_runner import Pfs, assert_error, assert_ok


def _tree(lib: SyncClient) -> None:
    """/t: a (b (300 B, 700 B), 100 B, link), c (empty), top 50 B; /t/a/b/deep at -rep 2."""
    for d in ("/t", "/t/a", "/t/a/b", "/t/c"):
        lib.mkdir(d)
    lib.write_file("/t/a/b/small.txt", b"s" * 300)
    lib.write_file("/t/a/b/deep.bin", b"d" * 700, replication=2)
    lib.write_file("/t/a/note.txt", b"n" * 100)
    lib.write_file("/t/top", b"t" * 50)
    lib.symlink("/t/a/link", "b/small.txt")


def test_du_prints_each_directory_after_its_contents(pfs: Pfs, lib: SyncClient) -> None:
    _tree(lib)
    # Small files are kept in the namespace: their space is their size, once.
    assert_ok(
        pfs("du", "/t"),
        "1000\t1000\t/t/a/b\n1100\t1100\t/t/a\n0\t0\t/t/c\n1150\t1150\t/t\n",
    )
    assert_ok(
        pfs("du", "-s", "/t", "/t/a/b/deep.bin"), "1150\t1150\t/t\n700\t700\t/t/a/b/deep.bin\n"
    )
    assert_ok(pfs("du", "-s", "-h", "/t", "/t/top"), "1.1 KiB\t1.1 KiB\t/t\n50 B\t50 B\t/t/top\n")
    assert_ok(pfs("du", "/t/top"), "50\t50\t/t/top\n")
    result = pfs("du", "-s", "/nothing", "/t/c")
    assert result.out == "0\t0\t/t/c\n"
    assert_error(result, "du", "/nothing")


def test_count_prints_directories_files_and_bytes(pfs: Pfs, lib: SyncClient) -> None:
    _tree(lib)
    header = f"{'DIR_COUNT':>12} {'FILE_COUNT':>12} {'CONTENT_SIZE':>18} PATHNAME\n"
    assert_ok(
        pfs("count", "-v", "/t", "/t/a/b"),
        header + f"{4:>12} {5:>12} {1150:>18} /t\n" + f"{1:>12} {2:>12} {1000:>18} /t/a/b\n",
    )
    assert_ok(pfs("count", "-h", "/t/a"), f"{2:>12} {4:>12} {'1.1 KiB':>18} /t/a\n")
    usage = pfs("count")  # argparse's usage error
    assert usage.rc == 2 and "required: PATH" in usage.err


def test_find_tests_names_types_and_sizes(pfs: Pfs, lib: SyncClient) -> None:
    _tree(lib)
    everything = ["/t", "/t/a", "/t/a/b", "/t/a/b/deep.bin", "/t/a/b/small.txt"]
    everything += ["/t/a/link", "/t/a/note.txt", "/t/c", "/t/top"]
    assert_ok(pfs("find", "/t"), "".join(p + "\n" for p in everything))
    assert_ok(pfs("find", "/t", "-type", "d"), "/t\n/t/a\n/t/a/b\n/t/c\n")
    assert_ok(pfs("find", "/t", "-type", "l"), "/t/a/link\n")
    assert_ok(pfs("find", "/t", "-name", "*.txt"), "/t/a/b/small.txt\n/t/a/note.txt\n")
    assert_ok(pfs("find", "/t", "-size", "+300"), "/t/a/b/deep.bin\n")
    assert_ok(pfs("find", "/t", "-size", "-100", "-type", "f"), "/t/top\n")
    assert_ok(pfs("find", "/t/a", "-size", "100"), "/t/a/note.txt\n")
    assert_ok(pfs("find", "/t/a/b", "-name", "b"), "/t/a/b\n")  # the root is tested too
    assert_ok(pfs("find", "/t", "-size", "-1K", "-name", "d*"), "/t/a/b/deep.bin\n")
    assert_error(pfs("find", "/t", "-size", "lots"), "find", "lots")
    usage = pfs("find", "/t", "-type", "x")
    assert usage.rc == 2 and "invalid choice: 'x'" in usage.err
    result = pfs("find", "/nothing", "/t/c")
    assert result.out == "/t/c\n"
    assert_error(result, "find", "/nothing")


def test_cp_copies_files_and_trees_inside_the_cluster(pfs: Pfs, lib: SyncClient) -> None:
    _tree(lib)
    assert_ok(pfs("cp", "/t/top", "/copy"))
    assert lib.read_file("/copy") == b"t" * 50
    assert_ok(pfs("cp", "/t/top", "/t/a/note.txt", "/t/c"))  # into a directory
    assert lib.listdir("/t/c") == ["note.txt", "top"]
    assert_ok(pfs("cp", "-r", "/t/a", "/t2"))
    assert lib.read_file("/t2/b/deep.bin") == b"d" * 700
    assert lib.lookup("/t2/b/deep.bin").replication == 2  # the source's
    assert lib.readlink("/t2/link") == "b/small.txt"
    assert sorted(lib.listdir("/t2")) == ["b", "link", "note.txt"]
    assert_ok(pfs("cp", "-r", "-rep", "1", "/t/a/b", "/t2"))  # into /t2: merged with /t2/b
    assert lib.lookup("/t2/b/deep.bin").replication == 1
    assert sorted(lib.listdir("/t2/b")) == ["deep.bin", "small.txt"]
    assert_error(pfs("cp", "/t/a", "/x"), "cp", "/t/a", "-r")
    assert_error(pfs("cp", "-r", "/t", "/t/c/inside"), "cp", "itself")
    assert_error(pfs("cp", "/t/top", "/t/top"), "cp", "being copied")
    assert lib.read_file("/t/top") == b"t" * 50
    assert_error(pfs("cp", "/t/top", "/t/top", "/copy"), "cp", "not a directory")
    assert_error(pfs("cp", "/t/top"), "cp")
    assert_error(pfs("cp", "-rep", "0", "/t/top", "/y"), "cp", "replication")
