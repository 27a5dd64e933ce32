"""Turn locust_run's results (locust's CSVs and the `_pfs.json` beside each) into tables,
one PNG plot per locust file (rate and p50/p99 latency against users), and the
BENCHMARKS.md section, side by side with PlasmaFS's figures and nn_bench's.

    python -m loadtests.locust_report [RESULTS_DIR] [--update BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtests.harness import update_benchmarks_md

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = ROOT / "loadtests" / "results"
NN_BENCH_JSON = "nn_bench.json"
STATS = re.compile(r"^(?P<file>[a-z]+)-u(?P<users>\d+)_stats\.csv$")
# The row compared with PlasmaFS's ps_lookup and ps_create.
LOOKUP_ROW, COMMIT_ROW = "getattr", "txn:create+commit"
TXN_PREFIX = "txn:"


@dataclass
class Row:
    """One locust row (one operation) at one point."""

    name: str
    requests: int
    failures: int
    per_second: float
    mean_ms: float
    p50_ms: float
    p99_ms: float


@dataclass
class Point:
    """One locust run: a locust file at a user count."""

    file: str
    users: int
    rows: dict[str, Row]
    pfs: dict[str, Any] = field(default_factory=dict)

    def _operations(self) -> list[Row]:
        # A `txn:` row times operations that have rows of their own: not counted twice.
        return [r for name, r in self.rows.items() if not name.startswith(TXN_PREFIX)]

    @property
    def per_second(self) -> float:
        """Operations per second, all rows together."""
        return sum(r.per_second for r in self._operations())

    @property
    def failures(self) -> int:
        """Failed operations."""
        return sum(r.failures for r in self._operations())


@dataclass
class Report:
    """Every point found, the plots made, and nn_bench's figures if present."""

    out: Path
    points: list[Point]
    plots: dict[str, Path]
    nn_bench: dict[str, Any] | None

    @property
    def failures(self) -> int:
        """Failed requests over every point."""
        return sum(p.failures for p in self.points)

    def of(self, file: str) -> list[Point]:
        """The points of one locust file, by user count."""
        return sorted((p for p in self.points if p.file == file), key=lambda p: p.users)


def read_stats(path: Path) -> dict[str, Row]:
    """The rows of a locust `_stats.csv` (without its Aggregated row)."""
    rows: dict[str, Row] = {}
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            row = Row(
                r["Name"],
                int(r["Request Count"]),
                int(r["Failure Count"]),
                float(r["Requests/s"]),
                _number(r["Average Response Time"]),
                _number(r["50%"]),
                _number(r["99%"]),
            )
            if r["Name"] != "Aggregated" and (row.requests or row.failures):
                rows[row.name] = row  # (setup rows are emptied by the reset after warm-up)
    return rows


def _number(text: str) -> float:
    return float(text) if text not in ("", "N/A") else 0.0


def build(out: Path) -> Report:
    """Read every point in `out` and draw one plot per locust file."""
    points = []
    for path in sorted(out.glob("*_stats.csv")):
        m = STATS.match(path.name)
        if not m:
            continue
        rows = read_stats(path)
        side = path.with_name(path.name.replace("_stats.csv", "_pfs.json"))
        pfs = json.loads(side.read_text()) if side.exists() else {}
        points.append(Point(m["file"], int(m["users"]), rows, pfs))
    nn = out / NN_BENCH_JSON
    report = Report(out, points, {}, json.loads(nn.read_text()) if nn.exists() else None)
    for file in sorted({p.file for p in points}):
        report.plots[file] = plot(file, report.of(file), out / f"locust-{file}.png")
    return report


def plot(file: str, points: list[Point], path: Path) -> Path:
    """Rate, and p50 (solid) / p99 (dashed) latency, of every row against users."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    users = [p.users for p in points]
    names = sorted({name for p in points for name in p.rows})
    fig, (rate_ax, latency_ax) = pyplot.subplots(1, 2, figsize=(11, 4.2))
    for k, name in enumerate(names):
        color = f"C{k % 10}"
        rate = [p.rows[name].per_second if name in p.rows else None for p in points]
        rate_ax.plot(users, rate, marker="o", color=color, label=name)
        for quantile, style in (("p50_ms", "-"), ("p99_ms", "--")):
            values = [getattr(p.rows[name], quantile) if name in p.rows else None for p in points]
            latency_ax.plot(users, values, style, marker=".", color=color)
    for ax in (rate_ax, latency_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(users, [str(u) for u in users])
        ax.set_xlabel("locust users")
        ax.grid(True, alpha=0.3)
    rate_ax.set_ylabel("requests/s")
    rate_ax.set_ylim(bottom=0)
    rate_ax.legend(fontsize="small")
    latency_ax.set_ylabel("latency, ms (p50 solid, p99 dashed)")
    latency_ax.set_yscale("log")
    fig.suptitle(f"plasmafs locust: {file}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    pyplot.close(fig)
    return path


def markdown(report: Report) -> str:
    """The BENCHMARKS.md section."""
    first = report.points[0].pfs if report.points else {}
    commands = sorted({p.pfs["command"] for p in report.points if p.pfs.get("command")})
    processes = first.get("processes", 1)
    lines = [
        "## Load tests with locust (`loadtests/locust_run.py`)",
        "",
        "Command: " + ", ".join(f"`{c}`" for c in commands or ["python -m loadtests.locust_run"]),
        "",
        f"{os.cpu_count()} cores shared by PostgreSQL, the namenode and {processes} locust",
        f"process{'es (plus a master)' if processes > 1 else ''}, each with "
        f"{first.get('connections_per_process', 1)} client connection(s).",
        "Users run closed loops (no wait between requests), so the figures are capacity.",
        "Latency is what the locust user saw; locust keeps whole milliseconds below 100 ms, so",
        "the mean is the finer figure and the namenode's own histograms show sub-millisecond",
        "latency. `cores` is CPU seconds per second of the measured window, after a warm-up.",
        "",
    ]
    lines += _comparison(report)
    for file in sorted({p.file for p in report.points}):
        lines += _file_section(report, file)
    return "\n".join(lines)


def _comparison(report: Report) -> list[str]:
    lookups, commits = report.of("lookup"), report.of("commit")
    nn = report.nn_bench or {}

    def nn_figure(key: str, conc: str, label: str) -> str:
        value = nn.get(conc, {}).get(key) if conc else nn.get(key)
        return f"{value:,}/s ({label})" if value else "—"

    def locust_figure(points: list[Point], row: str, which: int) -> str:
        if not points or row not in points[which].rows:
            return "—"
        p = points[which]
        return f"{p.rows[row].per_second:,.0f}/s ({p.users} user{'s' * (p.users > 1)})"

    return [
        "| | PlasmaFS (2011, 4 cores, SSD) | nn_bench, this machine | locust, this machine |",
        "|---|---:|---:|---:|",
        "| Lookups, one synchronous client | 878/s | "
        f"{nn_figure('sync_lookup_1', '', 'SyncClient')} | "
        f"{locust_figure(lookups, LOOKUP_ROW, 0)} |",
        "| Lookups, many clients | 3,949/s (8 processes) | "
        f"{nn_figure('lookup', 'c64', '64 in flight')} | "
        f"{locust_figure(lookups, LOOKUP_ROW, -1)} |",
        "| Commits (one create each), one client | 119/s | "
        f"{nn_figure('create_commit', 'c1', '1 in flight')} | "
        f"{locust_figure(commits, COMMIT_ROW, 0)} |",
        "| Commits, many clients | 224/s (4 processes) | "
        f"{nn_figure('create_commit', 'c64', '64 in flight')} | "
        f"{locust_figure(commits, COMMIT_ROW, -1)} |",
        "",
        "PlasmaFS ran with synchronous_commit off; here every commit is durable when",
        "acknowledged (PostgreSQL defaults)."
        + (f" nn_bench figures from its run of {nn['date']}." if nn.get("date") else ""),
        "",
    ]


def _file_section(report: Report, file: str) -> list[str]:
    points = report.of(file)
    plot = report.plots.get(file)
    lines = [f"### {file}", ""]
    if plot is not None:
        lines += [f"![locust {file}]({_relative(plot)})", ""]
    lines += [
        "| users | operation | requests/s | mean ms | p50 ms | p99 ms | failed |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        for name in sorted(p.rows):
            r = p.rows[name]
            lines.append(
                f"| {p.users} | {name} | {r.per_second:,.0f} | {r.mean_ms:.2f} | {r.p50_ms:g} | "
                f"{r.p99_ms:g} | "
                f"{r.failures} |"
            )
    lines += [
        "",
        "| users | locust requests/s | namenode requests/s (its own view) | namenode µs CPU "
        "per request | mean commit group | cores: locust / namenode / PostgreSQL |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for p in points:
        view = p.pfs.get("namenode") or {}
        seconds = p.pfs.get("window_seconds") or 0
        nn_rate = view.get("requests", 0) / seconds if seconds and view else None
        cpu = (p.pfs.get("cpu_seconds") or {}).get("namenode")
        per_request = (
            cpu / view["requests"] * 1e6 if cpu is not None and view.get("requests") else None
        )
        cores = p.pfs.get("cores") or {}
        lines.append(
            f"| {p.users} | {p.per_second:,.0f} | {_fmt(nn_rate, ',.0f')} "
            f"{_top_ops(view, seconds)} | {_fmt(per_request, '.0f')} | "
            f"{_fmt(view.get('mean_group_size'), 'g')} | "
            + " / ".join(_fmt(cores.get(k), "g") for k in ("locust", "namenode", "postgres"))
            + " |"
        )
    lines.append("")
    return lines


def _top_ops(view: dict[str, Any], seconds: float) -> str:
    ops = sorted((view.get("ops") or {}).items(), key=lambda kv: -kv[1]["requests"])[:3]
    if not ops or not seconds:
        return ""
    parts = [
        f"{op} {v['requests'] / seconds:,.0f}/s p50 {_fmt(v['p50_ms'], 'g')} "
        f"p99 {_fmt(v['p99_ms'], 'g')} ms"
        for op, v in ops
    ]
    return "(" + "; ".join(parts) + ")"


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def update(path: Path, text: str) -> None:
    """Rewrite the locust section of BENCHMARKS.md."""
    update_benchmarks_md(path, "locust", text)


def main() -> int:
    """Rebuild the report from results already on disk."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="?", default=DEFAULT_RESULTS)
    parser.add_argument("--update", type=Path, help="rewrite this BENCHMARKS.md section")
    args = parser.parse_args()
    report = build(args.results)
    if not report.points:
        parser.error(f"no locust results (*-u<N>_stats.csv) in {args.results}")
    text = markdown(report)
    print(text)
    if args.update:
        update(args.update, text)
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
