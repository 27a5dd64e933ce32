"""What every plasmafs locust file shares: command-line options, the per-process clients,
and `PlasmaUser`, whose `call` and `timed` turn plasmafs operations into locust rows.

Each locust process runs one asyncio loop (see gevent_bridge) and `--pfs-connections`
client connections (default 1); its users take turns on them, so their requests are
multiplexed over few connections as an application embedding the library would do.
Users run closed loops (no wait between tasks): the figures are capacity, not a pacing.

Run a locust file directly (from the project root) with
    LOCUST_SKIP_MONKEY_PATCH=1 python -m locust -f loadtests/locust_lookup.py --headless \
        --users 16 --run-time 30s --pfs-namenode HOST:PORT
or let `python -m loadtests.locust_run` start the cluster, the processes and the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gevent.lock
from gevent import monkey
from locust import User, constant, events
from locust.exception import RescheduleTask

from loadtests import locust_window
from loadtests.gevent_bridge import GeventBridge, require_unpatched
from plasmafs.client import Client, ConflictError, ExistsError
from plasmafs.client.config import namenode_address

require_unpatched()
# Locust's master sleeps with time.sleep while it waits for its workers; unpatched, that
# would block the gevent hub and so the very messages it waits for. time.sleep is all we
# patch: threads, sockets and select stay real for grpc.aio.
monkey.patch_time()

REQUEST_TYPE = "pfs"


@events.init_command_line_parser.add_listener
def _add_options(parser: Any) -> None:
    group = parser.add_argument_group("plasmafs")
    group.add_argument(
        "--pfs-namenode",
        default="",
        help="namenode host:port (default: PFS_CLIENT_NAMENODE or the `pfs local up` cluster)",
    )
    group.add_argument(
        "--pfs-connections", type=int, default=1, help="client connections per locust process"
    )
    group.add_argument("--pfs-root", default="/locust", help="directory the users work in")
    group.add_argument(
        "--pfs-replication", type=int, default=1, help="replication of files the data user puts"
    )
    group.add_argument(
        "--pfs-warmup",
        type=float,
        default=0.0,
        help="seconds after spawning (users make their files) before the stats are reset",
    )


_environment: Any = None
_window_opened = False


@events.init.add_listener
def _remember(environment: Any, **_: Any) -> None:
    global _environment
    _environment = environment


# locust_run samples CPU and the namenode's metrics over exactly the measured window,
# which opens when the warm-up after spawning ends (every runner resets its own stats).
@events.spawning_complete.add_listener
def _window_opens(**_: Any) -> None:
    global _window_opened
    if _window_opened:  # fired again when locust rebalances users
        return
    _window_opened = True
    warmup = _environment.parsed_options.pfs_warmup
    if warmup > 0:
        gevent.spawn_later(warmup, _reset_and_mark)
    else:
        locust_window.mark("start")


def _reset_and_mark() -> None:
    _environment.runner.stats.reset_all()
    locust_window.mark("start")


@events.test_stopping.add_listener
def _window_closes(**_: Any) -> None:
    locust_window.mark("stop")


class _Process:
    """The loop thread and client connections of this locust process, made on first use."""

    bridge: GeventBridge | None = None
    clients: list[Client] = []
    turns: Iterator[int] = itertools.count()
    making = gevent.lock.Semaphore()

    @classmethod
    def client(cls, options: Any) -> tuple[GeventBridge, Client]:
        with cls.making:  # users start concurrently; the first one connects
            if cls.bridge is None:
                if options.pfs_connections < 1:
                    raise ValueError("--pfs-connections must be at least 1")
                bridge = GeventBridge()
                clients: list[Client] = []
                try:
                    address = namenode_address(options.pfs_namenode or None)
                    for _ in range(options.pfs_connections):
                        clients.append(Client(address))
                        bridge.call(clients[-1].connection)
                except BaseException:
                    _close(bridge, clients)
                    raise
                cls.bridge, cls.clients = bridge, clients
        return cls.bridge, cls.clients[next(cls.turns) % len(cls.clients)]


@events.quitting.add_listener
def _disconnect(**_: Any) -> None:
    if _Process.bridge is not None:
        _close(_Process.bridge, _Process.clients)
        _Process.bridge, _Process.clients = None, []


def _close(bridge: GeventBridge, clients: list[Client]) -> None:
    """Close the connections (the namenode aborts what they left open) and the loop."""
    for client in clients:
        with contextlib.suppress(Exception):
            bridge.call(client.close)
    bridge.stop()


_user_numbers = itertools.count()


class PlasmaUser(User):
    """A locust user driving one plasmafs client connection (shared with other users)."""

    abstract = True
    wait_time = constant(0)

    def on_start(self) -> None:
        """Connect (once per process) and make this user's own directory."""
        options = self.environment.parsed_options
        self.bridge, self.fs = _Process.client(options)
        self.root = options.pfs_root.rstrip("/") or "/"
        self.name = f"{socket.gethostname()}-{os.getpid()}-{next(_user_numbers)}"
        self.home = f"{self.root}/{type(self).__name__.lower()}/{self.name}"
        self.call("mkdirs", self.fs.mkdir, self.home, parents=True)

    def call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one operation on the loop thread and report it as locust row `name`.

        A failed operation is reported as that row's failure and ends the task quietly
        (RescheduleTask); the user goes on with its next task.
        """
        start = time.perf_counter()
        try:
            result = self.bridge.call(fn, *args, **kwargs)
        except Exception as exc:
            self._report(name, start, exc)
            raise RescheduleTask() from exc
        self._report(name, start, None)
        return result

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Report the enclosed operations together as one row `name` (e.g. a whole
        transaction), failed if any of them failed; each `call` has its own row too."""
        start = time.perf_counter()
        try:
            yield
        except RescheduleTask as failed:
            self._report(name, start, failed.__cause__ or failed)
            raise
        except Exception as exc:
            self._report(name, start, exc)
            raise RescheduleTask() from exc
        self._report(name, start, None)

    def _report(self, name: str, start: float, error: BaseException | None) -> None:
        self.environment.events.request.fire(
            request_type=REQUEST_TYPE,
            name=name,
            response_time=(time.perf_counter() - start) * 1000,
            response_length=0,
            exception=error,
            context={},
        )


def ensure_files(user: PlasmaUser, directory: str, count: int) -> list[int]:
    """Make `count` empty files f0..f{count-1} in `directory` unless they exist (many
    processes may race to make them), and return their inode numbers in order."""
    fs = user.fs

    async def make() -> list[int]:
        await fs.mkdir(directory, parents=True)
        async with fs.transaction(lock_wait=5.0) as t:
            present = {entry.name async for entry in t.scandir(directory)}
            missing = [f"{directory}/f{k}" for k in range(count) if f"f{k}" not in present]
            await asyncio.gather(*(t.create(path) for path in missing))
        inodes = []
        for k in range(count):
            inodes.append((await fs.lookup(f"{directory}/f{k}")).ino)
        return inodes

    for attempt in range(5):
        try:
            return list(user.bridge.call(make))
        except (ExistsError, ConflictError):
            if attempt == 4:
                raise
    raise AssertionError("unreachable")
