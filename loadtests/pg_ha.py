"""PostgreSQL on three hosts under Patroni, with an etcd member on each: the
replicated database the high-availability tests and benchmark run plasmafs on.

    cluster = PatroniCluster(network, ["pg1", "pg2", "pg3"], workdir).start()
    cluster.dsn("plasmafs")   # every host, target_session_attrs=read-write
    cluster.leader()          # the host whose PostgreSQL is the primary now

Synchronous replication (`synchronous_mode`): a commit is acknowledged once a standby
has it, and only the last primary or that standby may be promoted, so no acknowledged
durable commit is lost when the primary's host dies. Patroni's ttl is 20 s (its
minimum): a primary that vanishes is replaced after about that long; one stopped
cleanly hands over in a few seconds. Patroni runs as the system user PostgreSQL runs
as (initdb refuses root), from `ha_tools`; a host's death kills everything in its
network namespace, the postmaster Patroni detached included.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from loadtests import ha_tools
from loadtests.hosts import HostNetwork
from plasmafs.core.errors import StorageError
from plasmafs.local.postgres import SYSTEM_USER, prepare_datadir, program_path

PG_PORT, REST_PORT, ETCD_CLIENT, ETCD_PEER = 5432, 8008, 2379, 2380
SUPERUSER_PASSWORD = "pfs-super"  # the test network's own; never reaches another host
REPLICATION_PASSWORD = "pfs-repl"


@dataclass
class PatroniCluster:
    """Patroni and etcd on `names` hosts of `network` (see the module's docstring)."""

    network: HostNetwork
    names: list[str]
    workdir: Path
    ttl: int = 20

    def start(self, timeout: float = 120) -> PatroniCluster:
        """etcd on every host, then Patroni; returns once a primary and a synchronous
        standby serve."""
        for name in self.names:
            self._start_etcd(name)
        for name in self.names:
            self.start_patroni(name)
        deadline = time.monotonic() + timeout
        while not (self.leader() and self.sync_standby()):
            if time.monotonic() > deadline:
                raise StorageError(f"no primary with a synchronous standby: {self.states()}")
            time.sleep(0.5)
        return self

    def dsn(self, database: str = "postgres") -> str:
        """Every host, the primary wherever it is (read-write), short connect timeouts."""
        hosts = ",".join(f"{self.network.host(n).address}:{PG_PORT}" for n in self.names)
        return (
            f"postgresql://postgres:{SUPERUSER_PASSWORD}@{hosts}/{database}"
            "?target_session_attrs=read-write"
        )

    def leader(self) -> str | None:
        """The host whose PostgreSQL is the primary, as its Patroni says."""
        return next((n for n in self.names if self._rest(n, "primary") == 200), None)

    def sync_standby(self) -> str | None:
        """A host whose PostgreSQL is a synchronous standby."""
        return next((n for n in self.names if self._rest(n, "sync") == 200), None)

    def states(self) -> dict[str, str]:
        """Each host's role and state as its Patroni reports them."""
        states = {}
        for name in self.names:
            try:
                with urllib.request.urlopen(self._url(name, "patroni"), timeout=2) as reply:
                    body = json.load(reply)
                states[name] = f"{body.get('role')}/{body.get('state')}"
            except (OSError, ValueError):
                states[name] = "unreachable"
        return states

    def _url(self, name: str, path: str) -> str:
        return f"http://{self.network.host(name).address}:{REST_PORT}/{path}"

    def _rest(self, name: str, path: str) -> int:
        try:
            with urllib.request.urlopen(self._url(name, path), timeout=2) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    def _start_etcd(self, name: str, *, first: bool = True) -> None:
        """Start host `name`'s etcd member: the first time as one of a new cluster,
        later (after its host died) on the data it kept."""
        host = self.network.host(name)
        data = self.workdir / name / "etcd"
        data.mkdir(parents=True, exist_ok=True)
        command = [
            str(ha_tools.etcd()), "--name", name, "--data-dir", str(data),
            "--listen-client-urls", f"http://{host.address}:{ETCD_CLIENT}",
            "--advertise-client-urls", f"http://{host.address}:{ETCD_CLIENT}",
            "--listen-peer-urls", f"http://{host.address}:{ETCD_PEER}",
            "--initial-advertise-peer-urls", f"http://{host.address}:{ETCD_PEER}",
        ]  # fmt: skip
        if first:
            peers = ",".join(
                f"{n}=http://{self.network.host(n).address}:{ETCD_PEER}" for n in self.names
            )
            command += [
                "--initial-cluster", peers, "--initial-cluster-token", "pfs",
                "--initial-cluster-state", "new",
            ]  # fmt: skip
        self._spawn(name, "etcd", command)

    def start_patroni(self, name: str) -> None:
        """Start (again) Patroni on host `name`; it starts its PostgreSQL."""
        home = self.workdir / name / "pg"
        prepare_datadir(home)
        config = home / "patroni.yml"
        config.write_text(json.dumps(self._config(name, home)))  # YAML is a superset
        config.chmod(0o644)
        command = [
            "setpriv", f"--reuid={SYSTEM_USER}", f"--regid={SYSTEM_USER}", "--init-groups",
            str(ha_tools.patroni()), str(config),
        ]  # fmt: skip
        self._spawn(name, "patroni", command)

    def _config(self, name: str, home: Path) -> dict[str, object]:
        address = self.network.host(name).address
        subnet = self.network.subnet
        etcd_hosts = [f"{self.network.host(n).address}:{ETCD_CLIENT}" for n in self.names]
        return {
            "scope": "pfs",
            "name": name,
            "restapi": {
                "listen": f"{address}:{REST_PORT}",
                "connect_address": f"{address}:{REST_PORT}",
            },
            "etcd3": {"hosts": etcd_hosts},
            "bootstrap": {
                "dcs": {
                    "ttl": self.ttl,
                    "loop_wait": 2,
                    "retry_timeout": 5,
                    "maximum_lag_on_failover": 1 << 20,
                    "synchronous_mode": True,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "max_connections": 200,
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                            "wal_log_hints": "on",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, {"auth-local": "trust"}],
            },
            "postgresql": {
                "listen": f"{address}:{PG_PORT}",
                "connect_address": f"{address}:{PG_PORT}",
                "data_dir": str(home / "data"),
                "bin_dir": str(program_path("pg_ctl").parent),
                "pgpass": str(home / "pgpass"),
                "parameters": {"unix_socket_directories": str(home)},
                "authentication": {
                    "superuser": {"username": "postgres", "password": SUPERUSER_PASSWORD},
                    "replication": {"username": "replicator", "password": REPLICATION_PASSWORD},
                },
                "pg_hba": [
                    "local all all trust",
                    f"host replication replicator {subnet} scram-sha-256",
                    f"host all all {subnet} scram-sha-256",
                ],
            },
        }

    def _spawn(self, name: str, what: str, command: list[str]) -> None:
        host = self.network.host(name)
        log = (self.workdir / name / f"{what}.log").open("ab")
        proc = subprocess.Popen(
            [*host.prefix, *command], stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        log.close()
        host.processes.append(proc)

    def restart(self, name: str) -> None:
        """Bring host `name`'s etcd member and Patroni back (after a kill)."""
        self._start_etcd(name, first=False)
        self.start_patroni(name)
