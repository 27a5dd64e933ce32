"""Fair use: per-user limits on the namenode, and turns between users' requests.

The unit is the user a connection authenticated as (a mount acting for its host's
callers is its credential's user). Over all its connections a user may have at most
`max_inflight_per_user` requests in flight (more wait: the namenode stops reading its
streams, so HTTP/2 flow control blocks the client), `max_transactions_per_user` open
transactions and `max_writing_per_user` files being written in open transactions (more
are refused: BusyError).

Requests start in turns between users: when requests of several users are waiting,
each user in turn starts a few, so one user's backlog does not sit in front of
another's request. And while a user with few requests in flight (at most
FEW_IN_FLIGHT: a program making one request after another, a few threads) is active
(a request in the last ACTIVE_SECONDS), a user flooding the namenode (more in flight)
may take at most `user_share` of the namenode's time: past it, its requests stay
queued until its share has grown back, so a flood is held back rather than only
ordered, and leaves the machine room for the others (its client, waiting for answers,
uses less too). A user with few requests in flight is never held back; floods among
themselves only take turns, and alone a user may take all of the namenode.

A user's time is what its requests cost the namenode: each step of handling them
(between two suspensions; a cached lookup is one step) plus what every frame costs
besides (reading it off the wire, writing the answers back, TLS), measured as the
process's CPU time not spent handling, per frame, over the last moments (a frame
carries one request or many: a client with many requests in flight batches them);
and for each commit, its part of its group commit's time in PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from plasmafs.core.errors import BusyError

# Requests one user starts in a turn before the next user's turn.
QUANTUM = 8
# A user with a request in this many seconds is active (a program between two requests).
ACTIVE_SECONDS = 0.02
# A user with at most this many requests in flight is never held back, and floods are
# held back while such a user is active.
FEW_IN_FLIGHT = 8
# The namenode time a user may take at once before its share applies, in seconds.
BURST_SECONDS = 0.002
# How often the cost of a frame besides its handling is measured again, in seconds.
SAMPLE_SECONDS = 0.1

T = TypeVar("T")
log = logging.getLogger(__name__)
# A request waiting for its turn: how to start it, the request, and the context of the
# connection that read it (a request runs in its own connection's context, whoever
# starts it).
Queued = tuple[Callable[[Any], None], Any, contextvars.Context]
# How often whether a flood must keep to its share is decided again, in seconds.
WATCH_SECONDS = 0.001


@dataclass(eq=False)
class UserLoad:
    """What one user has on this namenode now, over all its connections."""

    name: str
    sessions: int = 0
    inflight: int = 0
    transactions: int = 0
    writing: int = 0
    queued: deque[Queued] = field(default_factory=deque)
    # It floods while a light user is active: its share applies, its time is measured.
    watched: bool = False
    watched_at: float = 0.0
    credit: float = BURST_SECONDS  # namenode seconds it may take before waiting
    credited_at: float = 0.0
    last_request: float = 0.0
    room: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.room.set()


class FairUse:
    """Limits and turns for every user of one namenode."""

    def __init__(
        self,
        max_inflight: int,
        max_transactions: int,
        max_writing: int,
        share: float,
    ) -> None:
        self.max_inflight = max_inflight
        self.max_transactions = max_transactions
        self.max_writing = max_writing
        self.share = share
        self.users: dict[str, UserLoad] = {}
        self._light: dict[UserLoad, float] = {}  # users with few in flight: last request
        self._metering_until = 0.0  # every user's handling is metered until then
        self._turns: deque[UserLoad] = deque()  # users with queued requests
        self._queued = 0
        self._pump: asyncio.Task[None] | None = None
        self._holding = False  # every user with queued requests is past its share
        self.held_seconds = 0.0  # time users past their share waited, for metrics
        self.held_by_user: dict[str, float] = {}  # the same per user (floods are few)
        self.refusals = 0
        self.overhead = 0.0  # CPU seconds a frame costs besides the handling of requests
        self._handling = 0.0  # seconds spent handling since the last sample
        self._frames = 0  # frames read or written since then
        self._sampled_at = 0.0
        self._cpu_at = time.process_time()

    # --- connections -----------------------------------------------------------------------

    def join(self, user: str) -> UserLoad:
        """The load of `user`, for one more of its connections."""
        load = self.users.get(user)
        if load is None:
            load = self.users[user] = UserLoad(user, credited_at=time.perf_counter())
        load.sessions += 1
        return load

    def leave(self, load: UserLoad, starter: object) -> None:
        """One connection of `load`'s user ended (its requests are answered or cancelled,
        its transactions ended); its requests still waiting for a turn (those started
        by methods of `starter`) are dropped."""
        load.sessions -= 1
        kept = deque(
            item for item in load.queued if getattr(item[0], "__self__", None) is not starter
        )
        self._queued -= len(load.queued) - len(kept)
        load.queued = kept
        if not kept and load in self._turns:
            self._turns.remove(load)
        if load.sessions == 0 and not load.queued:
            self._forget(load)

    def _forget(self, load: UserLoad) -> None:
        if self.users.get(load.name) is load:
            del self.users[load.name]
        self._light.pop(load, None)

    # --- requests --------------------------------------------------------------------------

    def admitted(self, load: UserLoad) -> bool:
        """Count one more request of `load`'s user in flight, if it may have one more
        now (else call `room`)."""
        if load.inflight >= self.max_inflight:
            return False
        load.inflight += 1
        return True

    async def room(self, load: UserLoad) -> None:
        """Wait until `load`'s user may have one more request in flight, and count it."""
        while load.inflight >= self.max_inflight:
            load.room.clear()
            await load.room.wait()
        load.inflight += 1

    def answered(self, load: UserLoad, count: int) -> None:
        """`count` requests of `load`'s user were answered (or dropped)."""
        load.inflight -= count
        if load.inflight < self.max_inflight and not load.room.is_set():
            load.room.set()

    def start(self, load: UserLoad, start: Callable[[T], None], request: T) -> None:
        """Start one request of `load`'s user (`start(request)`) now, or queue it for
        the user's turn."""
        now = time.perf_counter()
        load.last_request = now
        if load.inflight <= FEW_IN_FLIGHT:
            self._light[load] = now
            load.watched = False
        elif now - load.watched_at > WATCH_SECONDS:
            self._watch(load, now)
        # Only a user with nothing queued may go first (its requests keep their order),
        # and only when nobody waits for a turn, everyone who does is held back, or it
        # is a light user (few requests: they go before any flood's backlog).
        first = not self._queued or self._holding or load.inflight <= FEW_IN_FLIGHT
        if not load.queued and first and self._may_run(load, now):
            start(request)
            return
        if not load.queued:
            self._turns.append(load)
        load.queued.append((start, request, contextvars.copy_context()))
        self._queued += 1
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._take_turns())
            self._pump.add_done_callback(_log_failure)

    def _watch(self, load: UserLoad, now: float) -> None:
        """Decide again whether `load`'s user (a flood) must keep to its share."""
        watched = self._light_user_active(load, now)
        if watched and not load.watched:
            load.credit, load.credited_at = BURST_SECONDS, now  # its share starts now
        if watched:
            self._metering_until = now + ACTIVE_SECONDS
        load.watched, load.watched_at = watched, now

    def _may_run(self, load: UserLoad, now: float) -> bool:
        """True unless `load`'s user floods past its share while a light user is active."""
        if not load.watched or self.share >= 1.0:
            load.credit, load.credited_at = BURST_SECONDS, now  # no share to keep to
            return True
        load.credit = min(BURST_SECONDS, load.credit + (now - load.credited_at) * self.share)
        load.credited_at = now
        return load.credit > 0

    def _light_user_active(self, load: UserLoad, now: float) -> bool:
        return any(
            other is not load and other.inflight <= FEW_IN_FLIGHT and now - at < ACTIVE_SECONDS
            for other, at in self._light.items()
        )

    def charge(self, load: UserLoad, seconds: float) -> None:
        """Charge `load`'s user for `seconds` of work done for it elsewhere (its part
        of a group commit in PostgreSQL)."""
        if load.watched:
            load.credit -= seconds

    def frame(self, load: UserLoad) -> None:
        """Charge `load`'s user for one frame of its connection read or written."""
        if load.watched:
            load.credit -= self.overhead
        self._frames += 1
        now = time.perf_counter()
        if now - self._sampled_at > SAMPLE_SECONDS:
            self._sample(now)

    def _sample(self, now: float) -> None:
        """Measure again what a frame costs besides the handling of its requests."""
        cpu = time.process_time()
        if self._frames and any(u.watched for u in self.users.values()):  # handling metered
            besides = max(0.0, cpu - self._cpu_at - self._handling) / self._frames
            self.overhead = besides if not self.overhead else (self.overhead + besides) / 2
        self._cpu_at, self._sampled_at = cpu, now
        self._handling, self._frames = 0.0, 0

    def metered(self, load: UserLoad, work: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """`work` (a request's handling), each of its steps charged to `load`'s user
        while some user must keep to its share (everyone's handling is measured then,
        so that what is not handling is known); else `work` itself."""
        if not load.watched and time.perf_counter() > self._metering_until:
            return work
        return _Metered(work, load, self)

    async def _take_turns(self) -> None:
        """Start queued requests, a few of each user in turn, until none is queued;
        users past their share wait for it to grow back."""
        while self._queued:
            now = time.perf_counter()
            held: list[UserLoad] = []
            for _ in range(len(self._turns)):
                load = self._turns.popleft()
                if load.watched and now - load.watched_at > WATCH_SECONDS:
                    self._watch(load, now)  # the light users may have gone meanwhile
                if not self._may_run(load, now):
                    held.append(load)
                    continue
                try:
                    for _ in range(min(QUANTUM, len(load.queued))):
                        self._queued -= 1
                        start, request, context = load.queued.popleft()
                        try:
                            context.run(start, request)
                        except Exception:  # one request's failure must not stop the turns
                            log.exception("starting a request failed")
                finally:
                    if load.queued:
                        self._turns.append(load)
                    elif load.sessions == 0:
                        self._forget(load)  # its last connection ended meanwhile
            self._turns.extend(held)
            if held and len(held) == len(self._turns):
                # Everyone waiting is past its share: sleep until the first has credit,
                # or until whether it must keep to it is decided again.
                pause = min(-h.credit for h in held) / self.share
                pause = min(max(pause, 0.0001), ACTIVE_SECONDS)
                self.held_seconds += pause
                for load in held:
                    self.held_by_user[load.name] = self.held_by_user.get(load.name, 0.0) + pause
                self._holding = True
                try:
                    await asyncio.sleep(pause)
                finally:
                    self._holding = False
            else:
                await asyncio.sleep(0)  # let other users' requests be read meanwhile

    # --- transactions and writes -----------------------------------------------------------

    def begin(self, load: UserLoad) -> None:
        """Count one more open transaction of `load`'s user (BusyError past the limit)."""
        if load.transactions >= self.max_transactions:
            self.refusals += 1
            raise BusyError(
                f"user {load.name} has {load.transactions} open transactions, "
                f"the most one user may have (max_transactions_per_user)"
            )
        load.transactions += 1

    def check_writing(self, load: UserLoad) -> None:
        """BusyError if `load`'s user may not start writing one more file."""
        if load.writing >= self.max_writing:
            self.refusals += 1
            raise BusyError(
                f"user {load.name} is writing {load.writing} files in open transactions, "
                f"the most one user may (max_writing_per_user)"
            )

    def ended(self, load: UserLoad, writing: int) -> None:
        """One transaction of `load`'s user ended; it was writing `writing` files."""
        load.transactions -= 1
        load.writing -= writing


class _Metered(Awaitable[T]):
    """Awaits a coroutine, timing each of its steps (the time between two suspensions
    is the namenode's own) and charging it to a user."""

    __slots__ = ("_fair", "_load", "_work")

    def __init__(self, work: Coroutine[Any, Any, T], load: UserLoad, fair: FairUse) -> None:
        self._work, self._load, self._fair = work, load, fair

    def __await__(self) -> Generator[Any, Any, T]:
        return self

    def __iter__(self) -> _Metered[T]:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        """One step of the work, timed."""
        began = time.perf_counter()
        try:
            return self._work.send(value)
        finally:
            self._charge(time.perf_counter() - began)

    def throw(self, *exc: Any) -> Any:
        """One step of the work, resumed with an exception (a cancellation), timed."""
        began = time.perf_counter()
        try:
            return self._work.throw(*exc)
        finally:
            self._charge(time.perf_counter() - began)

    def close(self) -> None:
        """Close the work (it was abandoned)."""
        self._work.close()

    def _charge(self, seconds: float) -> None:
        self._load.credit -= seconds
        self._fair._handling += seconds


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fair use turns stopped", exc_info=task.exception())
