"""The locust load tests keep working: every locust file runs (briefly, bounded) under the
documented runner with a master and workers, and the report comes out of its CSVs."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import gevent
import pytest

from loadtests.gevent_bridge import BridgeStoppedError, GeventBridge
from loadtests.locust_run import _quantile_ms

pytestmark = pytest.mark.benchmark_smoke  # benchmarks run briefly, on a small scale

ROOT = Path(__file__).resolve().parents[2]
EXPECTED_ROWS = {
    "lookup": {"getattr"},
    "commit": {"create", "commit", "txn:create+commit"},
    "namespace": {"open", "fileStatus", "listStatus", "create", "rename", "delete", "mkdirs"},
    "data": {"put 4KiB", "get 4KiB", "put 1MiB", "get 1MiB"},
}


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="") as f:
        return {r["Name"]: r for r in csv.DictReader(f)}


def test_every_locust_file_runs_with_workers_and_is_reported(tmp_path: Path) -> None:
    out, benchmarks = tmp_path / "results", tmp_path / "BENCHMARKS.md"
    command = [
        sys.executable, "-m", "loadtests.locust_run", "--seconds", "2", "--warmup", "1.5",
        "--users", "2", "--processes", "2", "--out", str(out), "--update", str(benchmarks),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name, expected in EXPECTED_ROWS.items():
        rows = _rows(out / f"{name}-u2_stats.csv")
        for row in expected:
            # namespace's rarest operations may not come up in two seconds
            if name == "namespace" and row in {"mkdirs", "rename", "delete"}:
                continue
            assert int(rows[row]["Request Count"]) > 0, (name, row)
        assert int(rows["Aggregated"]["Failure Count"]) == 0, name
        point = json.loads((out / f"{name}-u2_pfs.json").read_text())
        assert point["processes"] == 2
        assert set(point["cores"]) == {"locust", "namenode", "postgres"}
        assert point["cores"]["namenode"] > 0
        assert point["namenode"]["requests"] > 0  # the namenode's own view, from its metrics
        assert (out / f"locust-{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = benchmarks.read_text()
    assert "<!-- locust:begin -->" in text and "| Lookups, many clients | 3,949/s" in text
    assert json.loads(done.stdout.strip().splitlines()[-1])["failures"] == 0


def test_a_point_whose_users_cannot_start_fails_with_the_reason(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.locust_run", "--namenode", "127.0.0.1:1",
         "--files", "lookup", "--users", "1", "--seconds", "1", "--warmup", "1",
         "--processes", "1", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    # the user either died of it, or was still trying to connect when the window closed
    assert "cannot reach the namenode" in done.stderr or "no request was made" in done.stderr
    assert "Traceback" not in done.stderr


def test_locust_files_refuse_gevent_monkey_patching(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOCUST_SKIP_MONKEY_PATCH"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", "loadtests/locust_lookup.py", "--headless",
         "--users", "1", "--run-time", "1s", "--pfs-namenode", "127.0.0.1:1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "LOCUST_SKIP_MONKEY_PATCH=1" in done.stderr


@pytest.mark.parametrize(
    "argument",
    ["--users=0", "--users=a,b", "--files=lookup,bogus", "--seconds=0", "--processes=0"],
)
def test_runner_rejects_bad_arguments(argument: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loadtests.locust_run", argument],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "error:" in done.stderr.splitlines()[-1]


def test_bridge_runs_calls_concurrently_and_hands_back_errors() -> None:
    bridge = GeventBridge()
    try:
        # 100 greenlets each wait 0.2 s on the loop: together, not one after another
        greenlets = [gevent.spawn(bridge.call, asyncio.sleep, 0.2, k) for k in range(100)]
        started = gevent.get_hub().loop.now()
        gevent.joinall(greenlets, timeout=10)
        assert [g.value for g in greenlets] == list(range(100))
        assert gevent.get_hub().loop.now() - started < 2.0

        async def fails() -> None:
            raise FileNotFoundError("gone")

        with pytest.raises(FileNotFoundError, match="gone"):
            bridge.call(fails)
        with pytest.raises(ZeroDivisionError):
            bridge.call(lambda: 1 / 0)
    finally:
        bridge.stop()


def test_bridge_cancels_calls_of_killed_greenlets_and_fails_waiters_on_stop() -> None:
    bridge = GeventBridge()
    cancelled = threading.Event()  # set on the loop thread

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    killed = gevent.spawn(bridge.call, slow)
    gevent.sleep(0.1)
    killed.kill()  # as locust stops a user
    assert cancelled.wait(5)
    waiter = gevent.spawn(bridge.call, asyncio.sleep, 30)
    gevent.sleep(0.1)
    bridge.stop()
    waiter.join(timeout=5)
    assert isinstance(waiter.exception, BridgeStoppedError)
    with pytest.raises(BridgeStoppedError):
        bridge.call(lambda: 1)


def test_histogram_quantiles_follow_prometheus() -> None:
    buckets = [(0.001, 50.0), (0.002, 90.0), (0.005, 100.0), (float("inf"), 100.0)]
    assert _quantile_ms(buckets, 0.5) == 1.0
    assert _quantile_ms(buckets, 0.7) == 1.5  # halfway into the second bucket
    assert _quantile_ms(buckets, 0.99) == 4.7
    assert _quantile_ms([], 0.5) is None
