"""How the CLI shows replica health: `pfs fsck` reports in the shape of `hdfs fsck`, the
`pfs admin datanodes` and `pfs admin namenodes` tables, and a balancing run's line. Pure
functions of the values the client library returns, so they are tested without a
cluster."""

from __future__ import annotations

import time

from plasmafs.cli.formatting import aligned, human_bytes, table
from plasmafs.client.admin import (
    BalanceStatus,
    DatanodeState,
    DatanodeStatus,
    FsckBlock,
    FsckFile,
    FsckSummary,
)
from plasmafs.client.failover import NamenodeRole
from plasmafs.core.attributes import ReplicaState

# What a block group can be, most serious first, with how fsck names it.
_PROBLEMS = (
    ("missing", "MISSING"),
    ("corrupt", "CORRUPT"),
    ("under_replicated", "Under replicated"),
    ("mis_replicated", "Mis-replicated"),
)


def file_line(f: FsckFile) -> str:
    """`PATH SIZE bytes, replication N, B block(s):  OK` or the problems found."""
    problems = [f"{name} {f.count(flag)} block(s)" for flag, name in _PROBLEMS if f.count(flag)]
    status = ", ".join(problems) if problems else "OK"
    return (
        f"{f.path} {f.size} bytes, replication {f.replication}, {f.block_count} block(s):  {status}"
    )


def block_line(b: FsckBlock, replication: int, *, locations: bool) -> str:
    """One block group: file blocks, live replicas of the requested, its problems and,
    with `locations`, every replica (datanode id, address, its blocks, its state)."""
    line = f"{b.file_index:>9} - {b.file_end - 1:>9}: live {b.live}/{replication}"
    flags = [name.upper() for flag, name in _PROBLEMS if getattr(b, flag)]
    if flags:
        line += "  " + ", ".join(flags)
    if locations:
        replicas = ", ".join(
            f"dn{r.datanode_id} {r.address} [{r.block_start}-{r.block_start + b.block_count - 1}]"
            + ("" if r.state is ReplicaState.LIVE else f" {r.state.label}")
            for r in b.replicas
        )
        line += f"  [{replicas}]"
    return line


def file_report(f: FsckFile, *, blocks: bool, locations: bool) -> str:
    """A file's line, with a line per block group when asked for."""
    lines = [file_line(f)]
    if blocks or locations:
        lines += [block_line(b, f.replication, locations=locations) for b in f.blocks]
    return "\n".join(lines)


def corrupt_lines(f: FsckFile) -> list[str]:
    """`-list-corrupt`: one `first-last<TAB>PATH<TAB>MISSING|CORRUPT` line per bad group."""
    return [
        f"{b.file_index}-{b.file_end - 1}\t{f.path}\t{'MISSING' if b.missing else 'CORRUPT'}"
        for b in f.blocks
        if b.missing or b.corrupt
    ]


def _share(count: int, total: int) -> str:
    return f"{count} ({100.0 * count / total if total else 0.0:.1f} %)"


def summary_report(s: FsckSummary) -> str:
    """The totals of a check, then each disagreement of the namenode's records."""
    average = f" (avg. block size {s.bytes // s.blocks} B)" if s.blocks else ""
    rows = [
        ("Total size", f"{s.bytes} B ({human_bytes(s.bytes)})"),
        ("Total files", str(s.files)),
        ("Total directories", str(s.directories)),
        ("Total symlinks", str(s.symlinks)),
        ("Total blocks (validated)", f"{s.blocks}{average}"),
        ("Live replica blocks", str(s.replica_blocks)),
        ("Average block replication", f"{s.average_replication:.2f}"),
        ("Under-replicated blocks", _share(s.under_replicated_blocks, s.blocks)),
        ("Mis-replicated blocks", _share(s.mis_replicated_blocks, s.blocks)),
        ("Missing blocks", _share(s.missing_blocks, s.blocks)),
        ("Corrupt blocks", _share(s.corrupt_blocks, s.blocks)),
        ("Corrupt files", str(s.corrupt_files)),
        ("Number of datanodes", f"{s.datanodes} ({s.live_datanodes} live)"),
        ("Copies queued/running", f"{s.queued_copies}/{s.running_copies}"),
        ("Record errors", str(len(s.record_errors))),
    ]
    lines = [aligned(rows, indent=" ")]
    lines += [f"  {error}" for error in s.record_errors]
    return "\n".join(lines)


def verdict_lines(s: FsckSummary, path: str) -> str:
    """HDFS's verdict on the path, then the last line: `Status: HEALTHY` or `Status:
    CORRUPT` (something missing or corrupt, or the namenode's records disagree)."""
    verdict = "HEALTHY" if s.healthy else "CORRUPT"
    return f"The filesystem under path '{path}' is {verdict}\nStatus: {verdict}"


def heartbeat_age(age: float | None) -> str:
    """`0.4s ago`, `12m ago`, or `never` (none since the namenode started)."""
    if age is None:
        return "never"
    if age < 120:
        return f"{age:.1f}s ago"
    if age < 7200:
        return f"{age / 60:.0f}m ago"
    return f"{age / 3600:.0f}h ago"


def datanode_state(d: DatanodeStatus) -> str:
    """The state's label; a decommission state of a datanode not heard from says so."""
    if not d.alive and d.state is not DatanodeState.DEAD:
        return f"{d.state.label} (dead)"
    return d.state.label


DATANODE_HEADER = (
    "ID", "ADDRESS", "LOCATION", "STATE", "CAPACITY", "USED", "USE%", "BLOCKS", "HEARTBEAT",
    "COPIES",
)  # fmt: skip


NAMENODE_HEADER = ("ADDRESS", "ROLE", "TERM", "ACTIVE SINCE")


def namenode_table(roles: list[NamenodeRole]) -> str:
    """The `pfs admin namenodes` table (why a namenode does not answer, below it)."""
    rows = [NAMENODE_HEADER] + [
        (
            r.address,
            r.role,
            str(r.term) if r.role == "active" else "-",
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.since))
            if r.role == "active"
            else "-",
        )
        for r in roles
    ]
    notes = [f"{r.address}: {r.detail}" for r in roles if r.role == "not answering"]
    return "\n".join([table(rows), *notes])


def datanode_table(datanodes: list[DatanodeStatus]) -> str:
    """The `pfs admin datanodes` table; COPIES is queued/running copy tasks."""
    rows = [DATANODE_HEADER] + [
        (
            str(d.datanode_id),
            d.address,
            d.location,
            datanode_state(d),
            human_bytes(d.capacity_bytes),
            human_bytes(d.used_bytes),
            f"{100 * d.used_fraction:.1f}%",
            str(d.replica_blocks),
            heartbeat_age(d.last_heartbeat_age),
            f"{d.queued_copies}/{d.running_copies}",
        )
        for d in datanodes
    ]
    return table(rows, right=frozenset({0, 4, 5, 6, 7, 9}))


def datanode_line(d: DatanodeStatus) -> str:
    """One datanode in a sentence, for decommission and recommission."""
    return (
        f"datanode {d.datanode_id} at {d.address}: {datanode_state(d)}, "
        f"{d.replica_blocks} replica block(s), copies queued/running "
        f"{d.queued_copies}/{d.running_copies}"
    )


def balance_line(s: BalanceStatus) -> str:
    """One line on a balancing run: where it stands, what it moved."""
    if s.running:
        state = "balancing"
    elif s.balanced:
        state = "balanced"
    else:
        state = "not balanced (no run)"
    spread = (
        f"used {100 * s.least_used:.1f}%..{100 * s.most_used:.1f}% "
        f"(mean {100 * s.mean_used:.1f}%, threshold {100 * s.threshold:.1f} points)"
    )
    moved = (
        f"moved {human_bytes(s.bytes_moved)} in {s.moves_done} move(s), "
        f"{s.moves_running} running, {s.moves_failed} failed, {s.seconds:.0f} s"
    )
    note = f"; {s.note}" if s.note and s.running else ""
    return f"{state}: {spread}; {moved}{note}"
