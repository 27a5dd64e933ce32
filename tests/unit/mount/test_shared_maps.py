"""maps_shared against this process's own mappings."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from plasmafs.mount.shared_maps import maps_shared


def test_a_shared_mapping_is_found_and_a_private_one_is_not(tmp_path: Path) -> None:
    path = tmp_path / "mapped"
    path.write_bytes(bytes(4096))
    st = os.stat(path)
    device = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    with open(path, "r+b") as f:
        assert not maps_shared(os.getpid(), device, st.st_ino)
        private = mmap.mmap(f.fileno(), 4096, flags=mmap.MAP_PRIVATE)
        assert not maps_shared(os.getpid(), device, st.st_ino)
        shared = mmap.mmap(f.fileno(), 4096, flags=mmap.MAP_SHARED)
        assert maps_shared(os.getpid(), device, st.st_ino)
        assert not maps_shared(os.getpid(), device, st.st_ino + 1)
        assert not maps_shared(2**22 + 1, device, st.st_ino)  # no such process
        shared.close()
        private.close()
        assert not maps_shared(os.getpid(), device, st.st_ino)
