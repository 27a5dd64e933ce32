"""Migrations apply once, refuse edited history, and one namenode serves a database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from plasmafs.client import ConfigError
from plasmafs.namenode.migrator import load_migrations, migrate
from tests.support.cluster import INSECURE, NamenodeProcess

ROOT = Path(__file__).resolve().parents[2]


async def test_applying_twice_is_a_no_op(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        assert await migrate(conn) == []  # the template had them all
        versions = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
        assert [r["version"] for r in versions] == [m.version for m in load_migrations()]
    finally:
        await conn.close()


async def test_an_edited_migration_is_refused(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
        with pytest.raises(ConfigError, match="differs"):
            await migrate(conn)
    finally:
        await conn.close()


async def test_a_newer_schema_is_refused(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'future', 'x')"
        )
        with pytest.raises(ConfigError, match="does not know"):
            await migrate(conn)
    finally:
        await conn.close()


def test_a_second_namenode_on_the_same_database_stands_by(
    namenode: NamenodeProcess, tmp_path: Path
) -> None:
    second = subprocess.Popen(
        [
            sys.executable, "-m", "plasmafs.namenode", "--dsn", namenode.dsn,
            "--listen", "127.0.0.1:0", "--registry-listen", "127.0.0.1:0",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **INSECURE["namenode"]),
    )  # fmt: skip
    try:
        assert second.stderr is not None
        stood_by = any("standing by" in line for line in second.stderr)  # it logs, waits
        assert stood_by
        second.terminate()
        assert second.wait(timeout=30) == 0
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()


def test_bad_settings_are_one_line_errors() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "plasmafs.namenode", "--listen", "nonsense"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("pfs-namenode: bad configuration:")
    assert len(result.stderr.strip().splitlines()) == 1


def test_unreachable_postgresql_is_a_one_line_error() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "plasmafs.namenode",
            "--listen",
            "127.0.0.1:0",
            "--dsn",
            "postgresql://postgres@127.0.0.1:1/none",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, **INSECURE["namenode"]),
    )
    assert result.returncode == 1
    assert "cannot connect to PostgreSQL" in result.stderr
    assert "Traceback" not in result.stderr


def test_schema_sql_is_what_the_migrations_add_up_to(dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_schema.py"), "--check", "--dsn", dsn],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
