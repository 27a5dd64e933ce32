"""Hosts under test: a plasmafs cluster whose every daemon runs on a host of its own,
each host a Linux network namespace with its own address on a bridge.

`HostNetwork` makes the namespaces, the bridge and a veth pair per host, cuts a host
off (its link down, after an `unreachable` route for the subnet inside it so that
nothing leaves through another route) and restores it. `HostCluster` runs on them a
PostgreSQL host, namenode hosts (the first active, the others standbys), datanode
hosts and a client host, with certificates naming each host's address and no
127.0.0.1 anywhere in their configuration; it kills a host's processes, and closes
everything it made (processes by pid, namespaces, links, routes), also after a failed
test. The tests (`tests/integration/test_hosts.py`) and the failover benchmark share
it; by hand:

    python -m loadtests.hosts up --namenodes 2 --datanodes 3   # until Ctrl-C
    python -m loadtests.hosts down                             # leftovers of a crash

Needs root (ip netns); every name it makes starts with "pfs" and a tag of its own
process id, so leftovers of a harness that died are recognised and removed by `down`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from plasmafs.core.errors import StorageError
from plasmafs.local.cluster import process_exited, start_daemon
from plasmafs.local.postgres import LocalPostgres, create_database, start_postgres, stop_postgres

if TYPE_CHECKING:
    from loadtests.pg_ha import PatroniCluster

SUBNET_PREFIX = "10.213"  # hosts get 10.213.<net>.<10 + k>/24; the bridge .1
PG_PORT = 5432
NAMENODE_PORT, REGISTRY_PORT, DATANODE_PORT = 7530, 7531, 7540
BLOCKSIZE = 64 * 1024


def _pfs(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "plasmafs.cli", *args], check=True, capture_output=True)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@dataclass
class Host:
    """One network namespace on the bridge."""

    name: str
    netns: str
    address: str
    veth: str  # the pair's end on the bridge, in the root namespace
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def prefix(self) -> list[str]:
        """What runs a command on this host."""
        return ["ip", "netns", "exec", self.netns]

    def run(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run `command` on this host and wait for it."""
        return subprocess.run(
            [*self.prefix, *command], capture_output=True, text=True, timeout=timeout
        )

    def kill(self) -> None:
        """SIGKILL every process running here (the host dies): those this harness
        started, and those they detached from themselves (Patroni's postmaster)."""
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        _end_processes([self.netns], grace=5.0, signals=(signal.SIGKILL,))


class HostNetwork:
    """Network namespaces on one bridge (see the module's docstring)."""

    def __init__(self, names: list[str]) -> None:
        self.tag = f"{os.getpid() % 100_000}"
        self.net = _free_net()
        self.subnet = f"{SUBNET_PREFIX}.{self.net}.0/24"
        self.bridge = f"pfsb{self.tag}"
        self.hosts: dict[str, Host] = {}
        self._names = names

    def __enter__(self) -> HostNetwork:
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _make(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{SUBNET_PREFIX}.{self.net}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        # Should the bridge ever go, nothing for these hosts leaves by the default route.
        _ip("route", "add", "unreachable", self.subnet, "metric", "4000")
        for k, name in enumerate(self._names):
            host = Host(
                name, f"pfs{self.tag}-{name}", f"{SUBNET_PREFIX}.{self.net}.{10 + k}",
                f"pfsv{self.tag}x{k}",
            )  # fmt: skip
            self.hosts[name] = host
            _ip("netns", "add", host.netns)
            _ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0",
                "netns", host.netns)  # fmt: skip
            _ip("link", "set", host.veth, "master", self.bridge, "up")
            _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _ip("-n", host.netns, "link", "set", "eth0", "up")
            _ip("-n", host.netns, "link", "set", "lo", "up")

    def host(self, name: str) -> Host:
        """The host called `name`."""
        return self.hosts[name]

    def cut(self, name: str) -> None:
        """Cut `name` off: nothing reaches it, nothing leaves it (its processes run on)."""
        host = self.hosts[name]
        _ip("-n", host.netns, "route", "replace", "unreachable", self.subnet, "metric", "4000")
        _ip("link", "set", host.veth, "down")
        _ip("-n", host.netns, "link", "set", "eth0", "down")

    def restore(self, name: str) -> None:
        """Bring `name` back on the network."""
        host = self.hosts[name]
        _ip("link", "set", host.veth, "master", self.bridge, "up")
        _ip("-n", host.netns, "link", "set", "eth0", "up")

    def close(self) -> None:
        """Kill every process started on the hosts, remove namespaces, links, routes."""
        for host in self.hosts.values():
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                host.kill()
        remove_network(self.tag, self.subnet)


def remove_network(tag: str, subnet: str | None = None) -> None:
    """Remove the namespaces, links and route of the harness tagged `tag`, after ending
    the processes still running in those namespaces (all of them the harness's)."""
    spaces = [
        line.split(" ")[0]
        for line in _ip("netns", "list", check=False).stdout.splitlines()
        if line.startswith(f"pfs{tag}-")
    ]
    _end_processes(spaces)
    for netns in spaces:
        _ip("netns", "del", netns, check=False)
    _ip("link", "del", f"pfsb{tag}", check=False)
    if subnet is not None:
        _ip("route", "del", "unreachable", subnet, "metric", "4000", check=False)


def _end_processes(
    spaces: list[str],
    grace: float = 10.0,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGKILL),
) -> None:
    """SIGTERM what runs in `spaces`, SIGKILL what is left after `grace` seconds."""
    pids = {
        int(pid)
        for netns in spaces
        for pid in _ip("netns", "pids", netns, check=False).stdout.split()
        if pid.isdigit()
    }
    for sig in signals:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            pids = {p for p in pids if not process_exited(p)}
            if not pids:
                return
            time.sleep(0.05)


def _free_net() -> int:
    """A /24 under SUBNET_PREFIX that no route of this machine uses yet."""
    routes = _ip("route", "show", "table", "all", check=False).stdout
    for net in range(1, 255):
        if f"{SUBNET_PREFIX}.{net}." not in routes:
            return net
    raise StorageError(f"no free {SUBNET_PREFIX}.N.0/24 network for test hosts")


@dataclass
class HostCluster:
    """A cluster on `HostNetwork` hosts: "pg" (or "pg1".. under Patroni), "nn1"..,
    "dn1".., "client"."""

    network: HostNetwork
    workdir: Path
    namenodes: list[str]
    datanodes: list[str]
    lease_ttl: float = 3.0
    databases: list[str] = field(default_factory=lambda: ["pg"])
    pg: LocalPostgres | None = None
    patroni: PatroniCluster | None = None
    namenode_env: dict[str, str] = field(default_factory=dict)
    token_file: Path | None = None

    @property
    def ca(self) -> Path:
        """The cluster CA's certificate."""
        return self.workdir / "tls" / "ca.pem"

    def address(self, namenode: str) -> str:
        """The client address of namenode host `namenode`."""
        return f"{self.network.host(namenode).address}:{NAMENODE_PORT}"

    @property
    def addresses(self) -> str:
        """Every namenode's client address, as clients list them."""
        return ",".join(self.address(n) for n in self.namenodes)

    @property
    def registries(self) -> str:
        """Every namenode's registry address, as datanodes list them."""
        return ",".join(f"{self.network.host(n).address}:{REGISTRY_PORT}" for n in self.namenodes)

    def client_env(self) -> dict[str, str]:
        """The environment of a `pfs` command or client process of this cluster."""
        assert self.token_file is not None
        return {
            "PFS_CLIENT_NAMENODE": self.addresses,
            "PFS_CLIENT_CA": str(self.ca),
            "PFS_TOKEN_FILE": str(self.token_file),
        }

    def start(self) -> HostCluster:
        """Certificates, PostgreSQL, the superuser, then every namenode and datanode."""
        # As deploy/SEVERAL_HOSTS.md tells an operator to.
        tls = self.workdir / "tls"
        _pfs("admin", "ca", "init", str(tls))
        for name in [*self.namenodes, *self.datanodes]:
            address = self.network.host(name).address
            _pfs("admin", "cert", "issue", name, "--ca", str(tls), "--out", str(tls),
                 "--host", address, "--client")  # fmt: skip
        if len(self.databases) > 1:
            from loadtests.pg_ha import PatroniCluster  # (it builds on HostNetwork)

            self.patroni = PatroniCluster(self.network, self.databases, self.workdir).start()
            asyncio.run(create_database(self.patroni.dsn(), "plasmafs"))
        else:
            pg_host = self.network.host("pg")
            self.pg = start_postgres(
                self.workdir / "pg", PG_PORT, listen=pg_host.address,
                trusted=self.network.subnet, prefix=pg_host.prefix,
            )  # fmt: skip
            asyncio.run(create_database(self.pg.dsn(), "plasmafs"))
        self.token_file = self.workdir / "token"
        subprocess.run(
            [sys.executable, "-m", "plasmafs.namenode.bootstrap", "--dsn", self.dsn,
             "--name", "admin", "--token-file", str(self.token_file)],
            check=True, capture_output=True,
        )  # fmt: skip
        self.namenode_env = {
            "PFS_NAMENODE_LEASE_TTL": str(self.lease_ttl),
            "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(BLOCKSIZE),
            "PFS_NAMENODE_HEARTBEAT_MS": "250",
        }
        for name in self.namenodes:
            self.start_namenode(name)
        for name in self.datanodes:
            self.start_datanode(name)
        return self

    @property
    def dsn(self) -> str:
        """The cluster's database (every PostgreSQL host under Patroni)."""
        if self.patroni is not None:
            return self.patroni.dsn("plasmafs")
        assert self.pg is not None
        return self.pg.dsn("plasmafs")

    def _tls_env(self, role: str, name: str) -> dict[str, str]:
        tls = self.workdir / "tls"
        prefix = f"PFS_{role.upper()}_TLS_"
        return {
            prefix + "CERT": str(tls / f"{name}.pem"),
            prefix + "KEY": str(tls / f"{name}.key"),
            prefix + "CA": str(tls / "ca.pem"),
        }

    def start_namenode(self, name: str) -> None:
        """Start (again) the namenode of host `name`."""
        host = self.network.host(name)
        workdir = self.workdir / name
        workdir.mkdir(exist_ok=True)
        args = [
            "plasmafs.namenode", "--dsn", self.dsn,
            "--listen", f"{host.address}:{NAMENODE_PORT}",
            "--registry-listen", f"{host.address}:{REGISTRY_PORT}",
        ]  # fmt: skip
        env = {**self.namenode_env, **self._tls_env("namenode", name)}
        proc, _ = start_daemon("namenode", workdir, args, 60, env, host.prefix)
        host.processes.append(proc)

    def start_datanode(self, name: str) -> None:
        """Start (again) the datanode of host `name`."""
        host = self.network.host(name)
        workdir = self.workdir / name
        workdir.mkdir(exist_ok=True)
        args = [
            "plasmafs.datanode", "--volume", str(workdir / "volume"),
            "--capacity", str(1024 * BLOCKSIZE), "--blocksize", str(BLOCKSIZE),
            "--namenode", self.registries,
            "--listen", f"{host.address}:{DATANODE_PORT}",
        ]  # fmt: skip
        env = {**self._tls_env("datanode", name), "PFS_DATANODE_HOST_IDENTITY": name}
        proc, _ = start_daemon("datanode", workdir, args, 60, env, host.prefix)
        host.processes.append(proc)

    def log_tail(self, name: str, role: str = "namenode", lines: int = 400) -> str:
        """The end of the log of host `name`'s daemon."""
        path = self.workdir / name / f"{role}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the daemons (the network's close kills what is left) and PostgreSQL."""
        for name in [*self.datanodes, *reversed(self.namenodes)]:
            for proc in self.network.host(name).processes:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGCONT)
                    proc.terminate()
        for name in [*self.datanodes, *self.namenodes]:
            for proc in self.network.host(name).processes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=20)
        if self.pg is not None:
            with contextlib.suppress(StorageError):
                stop_postgres(self.pg.datadir, prefix=self.network.host("pg").prefix)


@contextlib.contextmanager
def host_cluster(
    namenodes: int = 2, datanodes: int = 3, lease_ttl: float = 3.0, databases: int = 1
) -> Iterator[HostCluster]:
    """A `HostCluster` on hosts of its own (`databases` PostgreSQL hosts: one alone,
    or several under Patroni), removed whole afterwards."""
    nn = [f"nn{k}" for k in range(1, namenodes + 1)]
    dn = [f"dn{k}" for k in range(1, datanodes + 1)]
    pg = ["pg"] if databases == 1 else [f"pg{k}" for k in range(1, databases + 1)]
    workdir = Path(tempfile.mkdtemp(prefix="pfs-hosts-"))
    os.chmod(workdir, 0o755)  # PostgreSQL's system user reaches its data directory below
    with HostNetwork([*pg, *nn, *dn, "client"]) as network:
        cluster = HostCluster(network, workdir, nn, dn, lease_ttl, pg)
        try:
            yield cluster.start()
        finally:
            cluster.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def _leftovers() -> list[str]:
    """Tags of harnesses whose process is gone but whose namespaces remain."""
    tags = set()
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split(" ")[0]
        tag = name[3:].split("-")[0] if name.startswith("pfs") and "-" in name else ""
        if tag.isdigit() and not Path(f"/proc/{int(tag)}").exists():
            tags.add(tag)
    return sorted(tags)


def _orphan_routes() -> list[str]:
    """The harness's unreachable routes for subnets no bridge serves any more."""
    routes = _ip("route", "show", check=False).stdout.splitlines()
    served = {r.split()[0] for r in routes if " dev pfsb" in r}
    return [
        r.split()[1]
        for r in routes
        if r.startswith(f"unreachable {SUBNET_PREFIX}.") and r.split()[1] not in served
    ]


def main(argv: list[str] | None = None) -> int:
    """`up`: a cluster on hosts until Ctrl-C; `down`: remove leftovers of a crash."""
    parser = argparse.ArgumentParser(prog="python -m loadtests.hosts")
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--namenodes", type=int, default=2)
    parser.add_argument("--datanodes", type=int, default=3)
    args = parser.parse_args(argv)
    if args.action == "down":
        for tag in _leftovers():
            remove_network(tag)
            print(f"removed the hosts of harness {tag}")
        for subnet in _orphan_routes():
            _ip("route", "del", "unreachable", subnet, "metric", "4000", check=False)
            print(f"removed the route for {subnet}")
        return 0
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # cleaned up as on Ctrl-C
    with host_cluster(args.namenodes, args.datanodes) as cluster:
        for name, host in cluster.network.hosts.items():
            print(f"{name:<7} {host.address:<15} ip netns exec {host.netns} ...")
        print("client environment:")
        for key, value in cluster.client_env().items():
            print(f"  export {key}={value}")
        print("Ctrl-C removes it all")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
