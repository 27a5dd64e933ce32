"""One active namenode per database: the lease, the term, and what happens when the
lease is in doubt or lost.

A namenode becomes active by taking the next term together with a lease of
`lease_ttl` seconds (`lease_store.py`); until it can, it is a standby and tries again
every `lease_ttl / 10`. The active one renews the lease every `lease_ttl / 3`. It
serves (reads too) only while it can prove the lease: until `VALID_SHARE` of the lease
after the moment it sent its last successful renewal, which is before PostgreSQL's
expiry, so a standby can take over only after this namenode stopped answering — a
namenode cut off from PostgreSQL gives no stale reads to the clients it still
reaches. While the lease is in doubt it answers NotActiveError and keeps renewing;
a renewal that finds a newer term deposes it. Every group commit carries the term and
PostgreSQL refuses it once a newer one was taken (sql/0004), so a deposed namenode
never commits. A deposed namenode's cache and allocator may be stale: the daemon
drops them and starts again as a standby (`server.py`). So does one that finds
PostgreSQL restarted while relaxed commits awaited their WAL flush (they may be gone).

A namenode restarted where the active one ran (same boot of the same host, same
network namespace, same listen address) takes over at once instead of after the
lease: it has bound that address already, exclusively (no SO_REUSEPORT), which the
one before could not allow if it were alive. That is the `place` the lease records.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from plasmafs.core.errors import NotActiveError, StorageError
from plasmafs.namenode.lease_store import LeaseStore

log = logging.getLogger(__name__)

VALID_SHARE = 0.9  # of the lease this namenode serves for after a renewal is sent


def place_of(listen: str) -> str:
    """Where a namenode serves, as only one process at a time can: this boot of this
    host, this network namespace, the listen address."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    netns = os.stat("/proc/self/ns/net").st_ino
    return f"{boot}/{netns}/{listen}"


class Leadership:
    """This namenode's claim to be the active one."""

    def __init__(
        self,
        leases: LeaseStore,
        lease_ttl: float,
        on_deposed: Callable[[str], None],
        *,
        address: str = "",
        place: str = "",
        unflushed: Callable[[], int] = lambda: 0,
    ) -> None:
        self._leases = leases
        self.lease_ttl = lease_ttl
        self._on_deposed = on_deposed
        self._unflushed = unflushed  # relaxed groups not known to be durable
        self.address = address  # where this namenode serves clients, for the others
        self._process = uuid.uuid4().hex
        # Where it serves (`place_of`, bound before it takes the lease; by default a
        # place nobody else has: nothing proven).
        self.place = place or f"unproven-{self._process}"
        self.term = 0
        self.leading = False
        self.deposed = ""
        self.since = 0.0  # when this namenode became active (time.time())
        self._valid_until = 0.0  # time.monotonic() until which the lease is proven
        self._server_started = 0.0
        self._renewals: asyncio.Task[None] | None = None
        self.active_elsewhere = ""  # the active namenode as a standby last saw it

    @property
    def holder(self) -> str:
        """This process in the lease row: its place, then its own id."""
        return f"{self.place} {self._process}"

    @property
    def renew_interval(self) -> float:
        """Seconds between renewals of the lease."""
        return self.lease_ttl / 3

    @property
    def poll_interval(self) -> float:
        """Seconds between a standby's tries to take the lease."""
        return max(self.lease_ttl / 10, 0.05)

    async def try_take(self) -> bool:
        """Take the lease and the next term if the lease has expired; True if taken."""
        sent = time.monotonic()
        taken = await self._leases.take(self.place, self.holder, self.address, self.lease_ttl)
        if taken is None:
            return False
        self.term, self._server_started = taken
        self._valid_until = sent + self.lease_ttl * VALID_SHARE
        self.leading = True
        self.since = time.time()
        log.info("active namenode, term %d", self.term)
        return True

    async def take(self) -> None:
        """Wait as a standby until the lease is taken (logging who is active)."""
        shown = ""
        while True:
            try:
                if await self.try_take():
                    return
                state = await self._leases.state()
                active = f"{state.holder_address or state.holder} (term {state.term})"
                self.active_elsewhere = active if state.remaining > 0 else ""
                if active != shown:
                    log.info("standby: the active namenode is %s", active)
                    shown = active
            except StorageError as exc:
                log.warning("standby: cannot reach PostgreSQL: %s", exc)
            except Exception:  # a standby must outlive whatever one try runs into
                log.exception("standby: taking the lease failed")
            await asyncio.sleep(self.poll_interval)

    def refusal(self) -> str:
        """What a standby answers callers."""
        if self.active_elsewhere:
            return f"this namenode is a standby; the active one is {self.active_elsewhere}"
        return "this namenode is a standby; no namenode is active at the moment"

    async def close(self) -> None:
        """Drop the lease's connection (after `stop`)."""
        await self._leases.close()

    def start(self) -> None:
        """Renew the lease from now on."""
        self._renewals = asyncio.create_task(self._renew(), name="pfs-lease")

    async def stop(self, *, release: bool = True) -> None:
        """Stop renewing; with `release`, end the lease now so that a standby takes over
        at once instead of after it expires."""
        if self._renewals is not None:
            self._renewals.cancel()
            await asyncio.gather(self._renewals, return_exceptions=True)
            self._renewals = None
        was_leading, self.leading = self.leading, False
        if release and was_leading and not self.deposed:
            try:
                await self._leases.release(self.term)
                log.info("lease of term %d released", self.term)
            except StorageError as exc:
                log.warning("cannot release the lease (a standby waits for it to expire): %s",
                            exc)  # fmt: skip

    def current_term(self) -> int:
        """The term to serve and commit with; NotActiveError while this namenode may not
        (deposed, or its lease not proven lately)."""
        if not self.leading:
            raise NotActiveError(self.deposed or "this namenode is not the active one")
        if time.monotonic() >= self._valid_until:
            raise NotActiveError("this namenode cannot renew its lease now; retry")
        return self.term

    async def step_past(self, newer: int, who: str) -> None:
        """`who` has heard of term `newer` — past this namenode's, or this term from
        another namenode: PostgreSQL lost history (restored from a backup, or commits
        lost in a failover); that one refuses tickets of older terms, and owner stamps
        of a term taken twice would not be unique. Move the term past it and stand down;
        the daemon takes the lease again at once (it is expired), in a term after."""
        if await self._leases.step_past(self.term, newer):
            log.error(
                "%s has seen namenode term %d from another namenode (this one's is %d): "
                "PostgreSQL's records are older than the cluster's (restored, or commits "
                "lost); taking a term after it",
                who, newer, self.term,
            )  # fmt: skip
            self.depose(f"{who} has seen term {newer}; taking a newer term")
        else:
            self.depose("another namenode took a newer term")

    def depose(self, reason: str) -> None:
        """Stop serving for good (another namenode took a newer term, or state may be
        lost)."""
        if self.deposed:
            return
        self.leading = False
        self.deposed = f"this namenode is no longer the active one: {reason}"
        log.error("%s", self.deposed)
        self._on_deposed(self.deposed)

    async def _renew(self) -> None:
        failing = False
        while not self.deposed:
            due = time.monotonic() + self.renew_interval
            await asyncio.sleep(self.renew_interval)
            sent = time.monotonic()
            if sent - due > self.renew_interval:
                log.warning("a lease renewal started %.2f s late: this process was busy",
                            sent - due)  # fmt: skip
            try:
                renewal = await self._leases.renew(self.term, self.lease_ttl)
            except Exception as exc:  # renewals go on whatever one runs into
                if not failing:
                    log.error("cannot renew the lease: %s (serving stops in %.1f s)", exc,
                              max(self._valid_until - time.monotonic(), 0))  # fmt: skip
                failing = True
                continue
            if not renewal.held:
                self.depose("another namenode took a newer term")
                return
            if renewal.server_started != self._server_started and self._unflushed():
                # PostgreSQL restarted: commits acknowledged before their WAL flush may
                # be gone, and the cache and allocator would still hold them.
                self.depose("PostgreSQL restarted before relaxed commits were flushed")
                return
            self._server_started = renewal.server_started
            self._valid_until = sent + self.lease_ttl * VALID_SHARE
            took = time.monotonic() - sent
            if took > self.renew_interval:
                log.warning(
                    "a lease renewal took %.2f s (PostgreSQL slow to commit, or this "
                    "process busy); serving stops when one takes %.1f s",
                    took, self.lease_ttl * VALID_SHARE - self.renew_interval,
                )  # fmt: skip
            if failing:
                log.info("lease renewed again, term %d", self.term)
                failing = False
