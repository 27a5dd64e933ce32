"""Writers and readers of self-checking files in one directory, run as processes.

    python -m loadtests.churn write DIR SECONDS SEED
    python -m loadtests.churn read DIR SECONDS SEED

A writer publishes files as programs that care do: it writes `.tmp-*`, then renames it
over a name, new or existing (atomic replacement). Each file ends with the SHA-256 of
what comes before it. A reader opens published names at random and checks that every
file it reads is whole. Each prints one JSON line: files done and errors seen.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NAMES = 40  # published names the writers share


def _content(rng: random.Random) -> bytes:
    body = rng.randbytes(rng.choice((100, 4096, 70_000, 300_000)))
    return body + hashlib.sha256(body).digest()


def whole(data: bytes) -> bool:
    """True if `data` is a complete file: its last 32 bytes are the hash of the rest."""
    return len(data) >= 32 and hashlib.sha256(data[:-32]).digest() == data[-32:]


def write(directory: Path, seconds: float, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    done, errors = 0, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        temp = directory / f".tmp-{seed}-{done}"
        try:
            temp.write_bytes(_content(rng))
            os.rename(temp, directory / f"f{rng.randrange(NAMES)}")
            done += 1
        except OSError as exc:
            errors.append(f"write {temp.name}: {exc}")
    return {"role": "write", "done": done, "errors": errors}


def read(directory: Path, seconds: float, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    done, errors = 0, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        name = f"f{rng.randrange(NAMES)}"
        try:
            data = (directory / name).read_bytes()
        except FileNotFoundError:
            continue  # not published yet
        except OSError as exc:
            if exc.errno == errno.ESTALE:
                # The name was replaced again while the kernel retried its open of the
                # replaced file (the mount answers ESTALE for a removed one): a miss.
                continue
            errors.append(f"read {name}: {exc}")
            continue
        done += 1
        if not whole(data):
            errors.append(f"read {name}: {len(data)} bytes, not a whole file")
    return {"role": "read", "done": done, "errors": errors}


def run_churn(
    directory: Path, seconds: float, writers: int = 3, readers: int = 10
) -> dict[str, Any]:
    """Writers and readers as processes on `directory` for `seconds`; files written and
    read, and every error they saw, and whether every file left is whole."""
    roles = ["write"] * writers + ["read"] * readers
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "loadtests.churn", role, str(directory), str(seconds), str(k)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        for k, role in enumerate(roles)
    ]
    results: list[dict[str, Any]] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 120)
        if proc.returncode != 0:
            results.append({"role": "?", "done": 0, "errors": [f"exit {proc.returncode}"]})
        else:
            results.append(json.loads(out))
    left = [n for n in os.listdir(directory) if not n.startswith(".tmp-")]
    broken = [n for n in left if not whole((directory / n).read_bytes())]
    return {
        "written": sum(r["done"] for r in results if r["role"] == "write"),
        "read": sum(r["done"] for r in results if r["role"] == "read"),
        "errors": [e for r in results for e in r["errors"]],
        "idle": [k for k, r in enumerate(results) if not r["done"]],
        "broken": broken,
        "temporaries": [n for n in os.listdir(directory) if n.startswith(".tmp-")],
    }


if __name__ == "__main__":
    role, where, seconds, seed = (
        sys.argv[1],
        Path(sys.argv[2]),
        float(sys.argv[3]),
        int(sys.argv[4]),
    )
    print(json.dumps((write if role == "write" else read)(where, seconds, seed)))
