"""`pfs fsck`, `pfs admin`, `pfs blocks`, `pfs fsstat` and `pfs setrep -w`, and the
library's admin calls, on a cluster that heals: datanodes listed, fsck of a healthy and
of a damaged tree, a killed datanode counted, marked and replaced, setrep 1 -> 3 -> 1,
and a datanode decommissioned, recommissioned and removed."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from plasmafs.client import (
    Client,
    DatanodeState,
    FsckFile,
    FsckSummary,
    NotFoundError,
    PlasmaError,
    ReplicaState,
    SyncClient,
)
from tests.conftest import connected_client
from tests.support.cli_runner import Result, assert_error, assert_ok, clean_env, run_pfs
from tests.support.cluster import DatanodeProcess, NamenodeProcess
from tests.support.waiting import eventually

BS = 64 * 1024
CAPACITY = 256 * BS


class Healing:
    """A namenode that declares replicas lost after 8 s, and three datanodes."""

    def __init__(self, namenode: NamenodeProcess, datanodes: list[DatanodeProcess], home: Path):
        self.namenode = namenode
        self.datanodes = datanodes
        self.env = clean_env(home, namenode.address)

    def pfs(self, *args: str, timeout: float = 120.0) -> Result:
        return run_pfs(self.env, *args, timeout=timeout)


@pytest.fixture
def healing(dsn: str, tmp_path: Path) -> Iterator[Healing]:
    namenode = NamenodeProcess(
        dsn,
        tmp_path,
        env={
            "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BS),
            "PFS_NAMENODE_DATANODE_DEAD_AFTER": "2",
            "PFS_NAMENODE_HEARTBEAT_MS": "200",
            # Suspect for 6 s before lost and copied anew: long enough for the tests to
            # see the under-replicated state however busy the machine is.
            "PFS_NAMENODE_REPLICA_LOST_AFTER": "8",
        },
    ).start()
    datanodes: list[DatanodeProcess] = []
    try:
        for k in range(3):
            datanodes.append(
                DatanodeProcess(
                    tmp_path / f"dn{k + 1}", namenode.registry_address, CAPACITY, BS
                ).start()
            )
        yield Healing(namenode, datanodes, tmp_path / "home")
    finally:
        for d in datanodes:
            d.stop()
        namenode.stop()


@pytest.fixture
async def hfs(healing: Healing) -> AsyncIterator[Client]:
    async with connected_client(healing.namenode.address) as client:
        yield client


async def _fsck(fs: Client, path: str = "/", **flags: bool) -> tuple[list[FsckFile], FsckSummary]:
    items = [item async for item in fs.fsck(path, **flags)]
    *files, summary = items
    assert isinstance(summary, FsckSummary)
    assert all(isinstance(f, FsckFile) for f in files)
    return files, summary  # type: ignore[return-value]


# --- admin datanodes ------------------------------------------------------------------------


async def test_datanodes_are_listed_by_the_library_and_the_cli(
    healing: Healing, hfs: Client
) -> None:
    ids = sorted(d.datanode_id for d in healing.datanodes)
    await eventually(lambda: _all_live(hfs, 3), "three live datanodes", timeout=90, interval=0.2)
    listed = await hfs.datanodes()
    assert [d.datanode_id for d in listed] == ids
    assert {d.address for d in listed} == {d.address for d in healing.datanodes}
    for d in listed:
        assert d.state is DatanodeState.LIVE and d.alive
        assert d.capacity_bytes == CAPACITY
        assert d.last_heartbeat_age is not None and d.last_heartbeat_age < 5
    table = healing.pfs("admin", "datanodes")
    assert_ok(table, None)
    assert table.lines[0].split() == [
        "ID", "ADDRESS", "LOCATION", "STATE", "CAPACITY", "USED", "USE%", "BLOCKS", "HEARTBEAT",
        "COPIES",
    ]  # fmt: skip
    rows = [line.split() for line in table.lines[1:]]
    assert [int(r[0]) for r in rows] == ids
    assert all(r[2] == "/default-rack" and r[3] == "live" and r[-1] == "0/0" for r in rows)


async def _all_live(fs: Client, count: int) -> bool:
    nodes = await fs.datanodes()
    return len(nodes) == count and all(d.state is DatanodeState.LIVE for d in nodes)


def test_admin_errors_are_one_line(healing: Healing) -> None:
    assert_error(healing.pfs("admin", "decommission", "999"), "admin", "999")
    assert_error(healing.pfs("admin", "recommission", "999"), "admin", "999")
    assert_error(healing.pfs("admin", "remove", "999"), "admin", "999")
    live = str(healing.datanodes[0].datanode_id)
    # A live datanode that was not decommissioned cannot be forgotten.
    assert_error(healing.pfs("admin", "remove", live), "admin")
    with SyncClient(healing.namenode.address) as lib:
        with pytest.raises(NotFoundError):
            lib.decommission(999)
        assert len(lib.datanodes()) == 3


# --- fsck -----------------------------------------------------------------------------------


async def test_fsck_of_a_healthy_tree(healing: Healing, hfs: Client) -> None:
    await hfs.mkdir("/data")
    await hfs.write_file("/data/a", os.urandom(150 * BS + 7), replication=2)
    await hfs.write_file("/data/b", b"small", replication=3)  # inline: no blocks
    await hfs.create("/data/empty")
    await hfs.symlink("/data/link", "a")

    files, summary = await _fsck(hfs, "/")
    assert files == []  # only files with problems by default
    assert summary.healthy
    assert (summary.files, summary.directories, summary.symlinks) == (3, 2, 1)
    assert summary.blocks == 151
    assert summary.replica_blocks == 151 * 2
    assert summary.bytes == 150 * BS + 7 + 5
    assert summary.under_replicated_blocks == summary.missing_blocks == 0
    assert summary.corrupt_blocks == summary.corrupt_files == 0
    assert (summary.live_datanodes, summary.datanodes) == (3, 3)
    assert summary.record_errors == ()

    every, _ = await _fsck(hfs, "/data", all_files=True)
    assert sorted(f.path for f in every) == ["/data/a", "/data/b", "/data/empty"]
    a = next(f for f in every if f.path == "/data/a")
    assert a.replication == 2 and a.block_count == 151 and a.healthy
    for block in a.blocks:
        assert block.live == 2 and len({r.datanode_id for r in block.replicas}) == 2
        assert all(r.state is ReplicaState.LIVE for r in block.replicas)

    report = healing.pfs("fsck", "/data")
    assert_ok(report, None)
    assert report.lines[0].startswith("FSCK started for path '/data' at ")
    assert report.lines[-2:] == ["The filesystem under path '/data' is HEALTHY", "Status: HEALTHY"]
    assert " Total files:               3" in report.lines
    assert not any(line.startswith("/data/") for line in report.lines)

    detailed = healing.pfs("fsck", "/data", "-files", "-blocks", "-locations")
    assert_ok(detailed, None)
    assert "/data/b 5 bytes, replication 3, 0 block(s):  OK" in detailed.lines  # inline
    block_lines = [line for line in detailed.lines if ": live " in line]
    assert len(block_lines) == len(a.blocks)
    assert all(line.count("dn") >= 2 for line in block_lines)  # "[dn1 ..., dn2 ...]"

    assert_error(healing.pfs("fsck", "/nope"), "fsck", "/nope")
    with SyncClient(healing.namenode.address) as lib:  # an iterator without await
        items = list(lib.fsck("/data"))
        assert isinstance(items[-1], FsckSummary) and items[-1].files == 3


@pytest.mark.slow
async def test_a_killed_datanode_is_counted_marked_and_healed(
    healing: Healing, hfs: Client
) -> None:
    data = os.urandom(120 * BS)
    await hfs.write_file("/two", data, replication=2)
    victim = healing.datanodes[0]
    victim_id = victim.datanode_id
    victim.kill9()

    async def under_replicated() -> bool:
        return (await hfs.fsstat()).under_replicated_blocks > 0

    blocks_before = await hfs.blocks("/two")
    if any(r.datanode_id == victim_id for e in blocks_before.extents for r in e.replicas):
        await eventually(
            under_replicated,
            "under-replicated blocks after a datanode died",
            timeout=90,
            interval=0.2,
        )
        report = healing.pfs("blocks", "/two")
        assert "  actual replication:    1" in report.lines
        assert any(" suspect]" in line or " lost]" in line for line in report.lines)
        fsck = healing.pfs("fsck", "/")
        assert fsck.rc == 0 and fsck.lines[-1] == "Status: HEALTHY"  # under-replicated only

    # Re-replication restores two live copies of every block, on the two living datanodes.
    await asyncio.wait_for(hfs.wait_replication(["/two"], 2, poll=0.2), 120)
    healed = await hfs.blocks("/two")
    for e in healed.extents:
        live = [r for r in e.replicas if r.state is ReplicaState.LIVE]
        assert len(live) == 2 and victim_id not in {r.datanode_id for r in live}
    assert await hfs.read_file("/two") == data
    st = await hfs.fsstat()
    assert st.under_replicated_blocks == st.missing_blocks == st.corrupt_blocks == 0
    assert "  actual replication:    2" in healing.pfs("blocks", "/two").lines
    assert_ok(healing.pfs("fsck", "/"), None)


async def test_a_lost_only_replica_makes_fsck_corrupt(healing: Healing, hfs: Client) -> None:
    await hfs.write_file("/one", os.urandom(10 * BS), replication=1)
    holder = (await hfs.blocks("/one")).extents[0].replicas[0].datanode_id
    next(d for d in healing.datanodes if d.datanode_id == holder).kill9()

    async def missing() -> bool:
        return (await hfs.fsstat()).missing_blocks == 10

    await eventually(missing, "the only replica's blocks missing", timeout=90, interval=0.2)
    fsck = healing.pfs("fsck", "/")
    assert fsck.rc == 1 and "pfs:" not in fsck.err
    assert fsck.lines[-2:] == ["The filesystem under path '/' is CORRUPT", "Status: CORRUPT"]
    assert any(
        line.startswith("/one 655360 bytes, replication 1, 10 block(s):  MISSING")
        for line in fsck.lines
    )
    listed = healing.pfs("fsck", "-list-corrupt", "/")
    assert listed.rc == 1
    assert "0-9\t/one\tMISSING" in listed.lines
    assert "The filesystem under path '/' has 1 CORRUPT files" in listed.lines
    fsstat = healing.pfs("fsstat")
    assert "missing blocks:          10" in fsstat.lines


# --- setrep ---------------------------------------------------------------------------------


async def test_setrep_wait_1_to_3_to_1(healing: Healing, hfs: Client) -> None:
    data = os.urandom(40 * BS + 3)
    await hfs.write_file("/f", data, replication=1)
    up = healing.pfs("setrep", "-w", "3", "/f")
    assert_ok(up, "Replication 3 set: /f\nWaiting for /f ... done\n")
    blocks = await hfs.blocks("/f")
    assert blocks.replication == 3
    assert all(e.live_replicas == 3 == len(e.replicas) for e in blocks.extents)
    assert await hfs.read_file("/f") == data

    assert await hfs.setrep("/f", 1, wait=True, poll=0.2) == ["/f"]
    blocks = await hfs.blocks("/f")
    assert all(e.live_replicas == 1 == len(e.replicas) for e in blocks.extents)
    assert await hfs.read_file("/f") == data
    assert_ok(healing.pfs("fsck", "/"), None)


async def test_setrep_beyond_live_datanodes_is_refused(healing: Healing, hfs: Client) -> None:
    await hfs.write_file("/f", b"x" * 5000, replication=1)  # past the inline limit: blocks
    assert_error(healing.pfs("setrep", "4", "/f"), "setrep")
    assert (await hfs.stat("/f")).replication == 1
    with pytest.raises(PlasmaError):
        await hfs.setrep("/f", 4)


# --- decommission ---------------------------------------------------------------------------


async def test_decommission_drains_then_recommission_and_remove(
    healing: Healing, hfs: Client
) -> None:
    data = os.urandom(60 * BS)
    await hfs.write_file("/d", data, replication=2)
    target = healing.datanodes[0]
    ident = target.datanode_id

    out = healing.pfs("admin", "decommission", str(ident))
    assert_ok(out, None)
    assert out.out.startswith(f"datanode {ident} at {target.address}: decommissioning, ")

    async def decommissioned() -> bool:
        node = next(d for d in await hfs.datanodes() if d.datanode_id == ident)
        return node.state is DatanodeState.DECOMMISSIONED

    await eventually(decommissioned, "the datanode decommissioned", timeout=120, interval=0.2)
    for e in (await hfs.blocks("/d")).extents:
        live = {r.datanode_id for r in e.replicas if r.state is ReplicaState.LIVE}
        assert len(live) == 2 and ident not in live
    assert await hfs.read_file("/d") == data

    back = healing.pfs("admin", "recommission", str(ident))
    assert_ok(back, None)
    assert back.out.startswith(f"datanode {ident} at {target.address}: live, ")

    # Decommissioned again and stopped, it can be forgotten.
    assert_ok(healing.pfs("admin", "decommission", str(ident)), None)
    await eventually(decommissioned, "the datanode decommissioned again", timeout=120, interval=0.2)
    target.stop()
    removed = healing.pfs("admin", "remove", str(ident))
    assert_ok(removed, f"removed datanode {ident}; 2 datanode(s) left\n")
    assert ident not in {d.datanode_id for d in await hfs.datanodes()}
    assert_ok(healing.pfs("fsck", "/"), None)
