"""Keep freed large buffers in the process's heap for reuse, instead of handing them back
to the kernel.

Data messages are megabytes each. glibc's malloc starts by serving blocks above 128 KiB
with their own mmap and unmapping them when freed, and trims the top of its heap once
128 KiB there are free; so each message can land in fresh pages, which the kernel must
zero and, on a VM that returns freed memory to its host (free page reporting), fault in
from the host again. BENCHMARKS.md's io_bench rows put a bare gRPC stream with these
settings beside one with glibc's defaults.

Both thresholds must be set: fixing the trim threshold alone also freezes the mmap
threshold at 128 KiB, and every message is mapped afresh.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's ceiling for it on 64-bit
TRIM_THRESHOLD = 64 * 1024 * 1024


def reuse_freed_buffers() -> bool:
    """Tune glibc's malloc so that buffers of up to 32 MiB come from the heap and up to
    64 MiB of freed heap stay mapped for the next ones. For processes that move bulk
    data (the `pfs` CLI, datanodes; applications embedding the client may call it too).
    Returns False where there is nothing to tune (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
