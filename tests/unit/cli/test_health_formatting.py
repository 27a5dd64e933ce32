"""What the CLI prints about replica health, from values alone: `pfs blocks` with
replicas that are not live, `pfs fsstat`'s block counts, `pfs fsck`'s lines and totals,
the `pfs admin datanodes` table and a balancing run's line."""

from __future__ import annotations

import pytest

from plasmafs.cli import health_report as health
from plasmafs.cli.commands import parse_percent
from plasmafs.cli.formatting import fsstat_report
from plasmafs.cli.transfer import format_blocks
from plasmafs.client.admin import (
    BalanceStatus,
    DatanodeState,
    DatanodeStatus,
    FsckBlock,
    FsckFile,
    FsckReplica,
    FsckSummary,
)
from plasmafs.core.attributes import BlockList, Extent, FsStat, Replica, ReplicaState
from plasmafs.core.errors import InvalidArgumentError

LIVE, LOST, CORRUPT, SUSPECT = (
    ReplicaState.LIVE,
    ReplicaState.LOST,
    ReplicaState.CORRUPT,
    ReplicaState.SUSPECT,
)


def _replica(datanode: int, start: int, state: ReplicaState = LIVE) -> Replica:
    return Replica(datanode, f"127.0.0.1:{4000 + datanode}", start, b"", state=state)


def test_blocks_counts_only_live_replicas_and_marks_the_others() -> None:
    blocks = BlockList(
        (
            Extent(0, 128, (_replica(1, 0), _replica(2, 512, LOST))),
            Extent(128, 22, (_replica(1, 128), _replica(2, 640))),
            Extent(150, 1, (_replica(3, 7, CORRUPT), _replica(1, 150), _replica(2, 9, SUSPECT))),
        ),
        blocksize=1024,
        size=151 * 1024,
        replication=2,
    )
    assert format_blocks(blocks).splitlines() == [
        "        0 -       127:[0-127][512-639 lost]",
        "      128 -       149:[128-149][640-661]",
        "      150 -       150:[7-7 corrupt][150-150][9-9 suspect]",
        "  blocks:                303",
        "  actual replication:    1",
        "  requested replication: 2",
    ]


def test_blocks_of_a_healthy_file_keep_plasmafs_format() -> None:
    blocks = BlockList((Extent(0, 2, (_replica(1, 10), _replica(2, 20))),), 1024, 2048, 2)
    assert format_blocks(blocks).splitlines() == [
        "        0 -         1:[10-11][20-21]",
        "  blocks:                4",
        "  actual replication:    2",
        "  requested replication: 2",
    ]
    empty = BlockList((), 1024, 0, 3)
    assert "  actual replication:    0" in format_blocks(empty).splitlines()
    small = BlockList((), 1024, 5, 2, inline=b"tiny\n")
    assert format_blocks(small).splitlines()[:2] == [
        "  inline:                5 bytes in the namespace",
        "  blocks:                0",
    ]


def test_fsstat_reports_under_replicated_missing_and_corrupt_blocks() -> None:
    st = FsStat(3, 2, 1, 4 * 1024**3, 1024**3, 2, 1024**2, 0, 128, 5, 1)
    lines = fsstat_report(st).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "files",
        "directories",
        "symlinks",
        "capacity",
        "used",
        "held back",
        "live datanodes",
        "blocksize",
        "under-replicated blocks",
        "missing blocks",
        "corrupt blocks",
    ]
    assert lines[-3:] == [
        "under-replicated blocks: 128",
        "missing blocks:          5",
        "corrupt blocks:          1",
    ]
    assert lines[0] == "files:                   3"


def _fsck_file() -> FsckFile:
    return FsckFile(
        "/data/a",
        200 * 1024,
        2,
        (
            FsckBlock(
                0,
                128,
                1,
                True,
                False,
                False,
                False,
                (
                    FsckReplica(1, "127.0.0.1:4001", 0, LIVE),
                    FsckReplica(2, "127.0.0.1:4002", 512, LOST),
                ),
            ),
            FsckBlock(128, 72, 0, True, False, True, True, (FsckReplica(3, "h:1", 9, CORRUPT),)),
        ),
    )


def test_fsck_file_line_names_its_problems_by_blocks() -> None:
    f = _fsck_file()
    assert health.file_line(f) == (
        "/data/a 204800 bytes, replication 2, 200 block(s):  "
        "MISSING 72 block(s), CORRUPT 72 block(s), Under replicated 200 block(s)"
    )
    ok = FsckFile("/ok", 10, 1, (FsckBlock(0, 1, 1, False, False, False, False, ()),))
    assert health.file_line(ok) == "/ok 10 bytes, replication 1, 1 block(s):  OK"
    assert ok.healthy and not f.healthy


def test_fsck_block_lines_with_and_without_locations() -> None:
    f = _fsck_file()
    assert health.file_report(f, blocks=True, locations=False).splitlines()[1:] == [
        "        0 -       127: live 1/2  UNDER REPLICATED",
        "      128 -       199: live 0/2  MISSING, CORRUPT, UNDER REPLICATED",
    ]
    assert health.file_report(f, blocks=False, locations=True).splitlines()[1:] == [
        "        0 -       127: live 1/2  UNDER REPLICATED"
        "  [dn1 127.0.0.1:4001 [0-127], dn2 127.0.0.1:4002 [512-639] lost]",
        "      128 -       199: live 0/2  MISSING, CORRUPT, UNDER REPLICATED"
        "  [dn3 h:1 [9-80] corrupt]",
    ]
    assert health.file_report(f, blocks=False, locations=False) == health.file_line(f)
    assert health.corrupt_lines(f) == ["128-199\t/data/a\tMISSING"]


def _summary(**changes: object) -> FsckSummary:
    values: dict[str, object] = dict(
        files=3,
        directories=2,
        symlinks=1,
        blocks=200,
        replica_blocks=328,
        bytes=200 * 1024,
        under_replicated_blocks=128,
        mis_replicated_blocks=0,
        missing_blocks=0,
        corrupt_blocks=0,
        corrupt_files=0,
        live_datanodes=2,
        datanodes=3,
        record_errors=(),
        queued_copies=4,
        running_copies=1,
    )
    values.update(changes)
    return FsckSummary(**values)  # type: ignore[arg-type]


def test_fsck_summary_and_verdict() -> None:
    s = _summary()
    assert health.summary_report(s).splitlines() == [
        " Total size:                204800 B (200.0 KiB)",
        " Total files:               3",
        " Total directories:         2",
        " Total symlinks:            1",
        " Total blocks (validated):  200 (avg. block size 1024 B)",
        " Live replica blocks:       328",
        " Average block replication: 1.64",
        " Under-replicated blocks:   128 (64.0 %)",
        " Mis-replicated blocks:     0 (0.0 %)",
        " Missing blocks:            0 (0.0 %)",
        " Corrupt blocks:            0 (0.0 %)",
        " Corrupt files:             0",
        " Number of datanodes:       3 (2 live)",
        " Copies queued/running:     4/1",
        " Record errors:             0",
    ]
    # Under-replicated alone is healthy, as in HDFS.
    assert health.verdict_lines(s, "/data").splitlines() == [
        "The filesystem under path '/data' is HEALTHY",
        "Status: HEALTHY",
    ]
    for bad in (
        _summary(missing_blocks=1),
        _summary(corrupt_blocks=1),
        _summary(record_errors=("datanode 2 blocks 5-9 claimed by inodes 7 and 9",)),
    ):
        assert not bad.healthy
        assert health.verdict_lines(bad, "/").splitlines()[-1] == "Status: CORRUPT"
    errors = health.summary_report(_summary(record_errors=("a", "b"))).splitlines()
    assert errors[-3:] == [" Record errors:             2", "  a", "  b"]
    empty = _summary(blocks=0, replica_blocks=0, under_replicated_blocks=0, bytes=0)
    assert " Total blocks (validated):  0" in health.summary_report(empty).splitlines()


def test_datanode_table() -> None:
    def node(k: int, state: DatanodeState, alive: bool, age: float | None) -> DatanodeStatus:
        return DatanodeStatus(
            k, f"127.0.0.1:{4000 + k}", "h", state, alive, 2 * 1024**3, 1024**2 * k, 10 * k,
            age, k, 0, f"/rack{k % 2}",
        )  # fmt: skip

    table = health.datanode_table(
        [
            node(1, DatanodeState.LIVE, True, 0.25),
            node(2, DatanodeState.DEAD, False, 700.0),
            node(3, DatanodeState.DECOMMISSIONED, False, None),
            node(12, DatanodeState.DECOMMISSIONING, True, 9000.0),
        ]
    )
    assert table.splitlines() == [
        "ID  ADDRESS         LOCATION  STATE                  CAPACITY      USED  USE%  BLOCKS  "
        "HEARTBEAT  COPIES",
        " 1  127.0.0.1:4001  /rack1    live                    2.0 GiB   1.0 MiB  0.0%      10  "
        "0.2s ago      1/0",
        " 2  127.0.0.1:4002  /rack0    dead                    2.0 GiB   2.0 MiB  0.1%      20  "
        "12m ago       2/0",
        " 3  127.0.0.1:4003  /rack1    decommissioned (dead)   2.0 GiB   3.0 MiB  0.1%      30  "
        "never         3/0",
        "12  127.0.0.1:4012  /rack0    decommissioning         2.0 GiB  12.0 MiB  0.6%     120  "
        "2h ago       12/0",
    ]
    assert health.datanode_line(node(2, DatanodeState.DECOMMISSIONING, True, 1.0)) == (
        "datanode 2 at 127.0.0.1:4002: decommissioning, 20 replica block(s), "
        "copies queued/running 2/0"
    )


def test_balance_line() -> None:
    def status(running: bool, balanced: bool, note: str = "") -> BalanceStatus:
        return BalanceStatus(
            running, balanced, 0.1, 0, 0.45, 0.2, 0.7, 3 * 1024**2, 6, 1, 2, 12.4, note
        )

    assert health.balance_line(status(True, False, "no group can move")) == (
        "balancing: used 20.0%..70.0% (mean 45.0%, threshold 10.0 points); moved 3.0 MiB "
        "in 6 move(s), 2 running, 1 failed, 12 s; no group can move"
    )
    assert health.balance_line(status(False, True)).startswith("balanced: used 20.0%")
    assert health.balance_line(status(False, False)).startswith("not balanced (no run): ")


def test_percentages() -> None:
    assert parse_percent("10", "--threshold") == 0.1
    assert parse_percent("2.5%", "--threshold") == 0.025
    for bad in ("0", "100", "-3", "ten", ""):
        with pytest.raises(InvalidArgumentError, match="--threshold"):
            parse_percent(bad, "--threshold")
