"""Run a module as `python -m MODULE ARGS` would, then write the process's peak resident
memory (VmHWM, in KiB) to a file.

    python -m loadtests.peak OUT_FILE MODULE [ARGS...]

A child's ru_maxrss as wait4 reports it starts from its parent's peak (vfork shares the
parent's memory map until exec), so a benchmark holding a large buffer would see it in
every command it times. VmHWM belongs to the memory map exec made: only the command's own.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def peak_kib(pid: int | str = "self") -> int:
    """The peak resident memory (VmHWM) of a running process, this one by default, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    """Run the module; record the peak however it ends."""
    out, module, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        out.write_text(f"{peak_kib()}\n")


if __name__ == "__main__":
    main()
