"""Barman (loadtests/ha_tools.py installs it) backing up one PostgreSQL server the way
deploy/BACKUP.md tells operators to: base backups with pg_basebackup and the WAL
streamed continuously with pg_receivewal through a replication slot, and restores to
any point in time into a new data directory."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from loadtests import ha_tools
from plasmafs.local.postgres import SYSTEM_USER, LocalPostgres, program_path

SERVER = "pg"  # the server's name in Barman's configuration


class BarmanFailed(RuntimeError):
    """A barman command failed; the message holds what it printed."""


@dataclass
class Barman:
    """A Barman home for one server; `start()` before use, `stop()` after."""

    home: Path
    postgres: LocalPostgres
    receiver: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def config(self) -> Path:
        """Barman's configuration file."""
        return self.home / "barman.conf"

    def start(self) -> None:
        """Write the configuration, make the replication slot and stream the WAL."""
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "conf.d").mkdir(exist_ok=True)
        (self.home / "backups").mkdir(exist_ok=True)
        pg = self.postgres
        self.config.write_text(
            "[barman]\n"
            f"barman_home = {self.home / 'backups'}\n"
            f"barman_user = {pwd.getpwuid(os.getuid()).pw_name}\n"
            f"log_file = {self.home / 'barman.log'}\n"
            f"configuration_files_directory = {self.home / 'conf.d'}\n"
            f"\n[{SERVER}]\n"
            "description = plasmafs metadata\n"
            f"conninfo = host={pg.host} port={pg.port} user=postgres dbname=postgres\n"
            f"streaming_conninfo = host={pg.host} port={pg.port} user=postgres\n"
            "backup_method = postgres\n"
            "immediate_checkpoint = true\n"
            "streaming_archiver = on\n"
            "slot_name = barman\n"
            f"path_prefix = {program_path('pg_basebackup').parent}\n"
        )
        self.run("receive-wal", "--create-slot", SERVER)
        # What `barman cron` would keep running: the WAL streamed as it is written.
        self.receiver = subprocess.Popen(
            [str(ha_tools.barman()), "-c", str(self.config), "receive-wal", SERVER],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        # A backup first checks that WAL is archived, giving a switched segment only
        # 10 s to arrive: on a loaded host the receiver may not stream by then.
        self.archive_now()

    def backup(self) -> str:
        """Take a base backup and wait for its WAL; its id."""
        self.run("backup", "--wait", SERVER)
        return self.run("list-backups", "--minimal", SERVER).split()[0]

    def archive_now(self) -> None:
        """Close the current WAL segment and wait until Barman has it."""
        self.run("switch-wal", "--force", "--archive", "--archive-timeout", "60", SERVER)

    def recover(self, backup: str, target: Path, target_time: str) -> None:
        """Restore `backup` into `target` to replay up to `target_time` and promote."""
        self.run(
            "recover", SERVER, backup, str(target),
            "--target-time", target_time, "--target-action", "promote",
        )  # fmt: skip
        if os.geteuid() == 0:  # the restored files are ours; the server runs as its user
            subprocess.run(["chown", "-R", f"{SYSTEM_USER}:", str(target)], check=True)

    def run(self, *args: str) -> str:
        """A barman command's output; BarmanFailed with its output on failure."""
        done = subprocess.run(
            [str(ha_tools.barman()), "-c", str(self.config), *args],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode != 0:
            raise BarmanFailed(
                f"barman {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
            )
        return done.stdout

    def stop(self) -> None:
        """Stop streaming the WAL."""
        if self.receiver is not None and self.receiver.poll() is None:
            os.killpg(self.receiver.pid, signal.SIGTERM)
            try:
                self.receiver.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.receiver.pid, signal.SIGKILL)
                self.receiver.wait(timeout=10)
