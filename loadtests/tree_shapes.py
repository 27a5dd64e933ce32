"""The file-tree workloads of the mount benchmark: empty files, trees of small files
built breadth- and depth-first. Standard library only: a benchmark may run them with
any Python, as another local user (loadtests/as_user.py)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path


def empty_files(root: Path, processes: int, count: int) -> float:
    """Files/s of `count` empty files created with O_EXCL by `processes` processes."""
    code = (
        "import os, sys\n"
        "d, n = sys.argv[1], int(sys.argv[2])\n"
        "for i in range(n):\n"
        "    os.close(os.open(f'{d}/e{i}', os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))\n"
    )
    dirs = [root / f"empty{processes}-{k}" for k in range(processes)]
    for d in dirs:
        d.mkdir()
    started = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(d), str(count // processes)])
        for d in dirs
    ]
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError("an empty-file creator failed")
    return (count // processes) * processes / (time.perf_counter() - started)


def tree_build(root: Path, dirs: int, files: int) -> float:
    """Seconds for one process to build `dirs` directories holding `files` files of
    100-700 bytes, about 15 per directory in a two-level tree."""
    rng = random.Random(7)
    tops = max(1, int(dirs**0.5))
    started = time.perf_counter()
    made: list[Path] = []
    for k in range(dirs):
        d = root / "tree" / f"top{k % tops}" / f"d{k}" if k >= tops else root / "tree" / f"top{k}"
        d.mkdir(parents=True)
        made.append(d)
    for k in range(files):
        (made[k % len(made)] / f"file{k}").write_bytes(rng.randbytes(rng.randint(100, 700)))
    return time.perf_counter() - started


def tree_build_depth_first(root: Path, dirs: int, files: int, fanout: int = 12) -> float:
    """Seconds for one process to build `dirs` directories three levels deep, `fanout`
    per directory, each directory's share of `files` files of 100-700 bytes written
    right after the directory is made, before the directories under it."""
    rng = random.Random(7)
    made = [0, 0]  # directories, files

    def build(parent: Path, level: int) -> None:
        for b in range(fanout):
            if made[0] >= dirs:
                return
            d = parent / f"d{b}"
            d.mkdir()
            made[0] += 1
            for _ in range(made[0] * files // dirs - made[1]):
                (d / f"file{made[1]}").write_bytes(rng.randbytes(rng.randint(100, 700)))
                made[1] += 1
            if level < 3:
                build(d, level + 1)

    started = time.perf_counter()
    (root / "dtree").mkdir()
    build(root / "dtree", 1)
    return time.perf_counter() - started
