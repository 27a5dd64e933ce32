"""This datanode's side of the conversation with the namenode: registration, the
heartbeat loop, and the used-block listing the scrub walks.

Each heartbeat says which copy tasks run (and wait) here and carries what happened
since: copy results, bad blocks, verifications done. Those reports stay in the
outbox until a heartbeat that carried them was answered, so each reaches the namenode
at least once (it ignores repeats). The reply hands out work: copy tasks, tasks to
cancel, ranges to verify at once. A heartbeat goes out every period and at once when
a copy task ends or a verification is done, so that the next work comes without
waiting a period. A namenode that forgot this datanode (NOT_FOUND: it restarted, or
declared it dead and removed it) is registered with again, and the registration
(datanode id, ticket secret) is updated in place; a namenode that does not answer is
logged and tried again every period. With standby namenodes the datanode knows every
registry address: a call the namenode it talks to refuses as a standby, or that finds
nobody there, goes on to the next address, and the datanode stays with whichever
answers (after a failover: the new active namenode).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

from plasmafs.core import channel_options as channels
from plasmafs.core.errors import ConfigError, NotFoundError, PlasmaError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import error_from_rpc
from plasmafs.core.tls import ChannelTLS, open_channel
from plasmafs.datanode.copier import Copier
from plasmafs.datanode.registration import Registration
from plasmafs.datanode.scrubber import Scrubber, UsedCursor, UsedRange
from plasmafs.datanode.settings import DatanodeSettings
from plasmafs.datanode.volume import Owner, Volume

log = logging.getLogger(__name__)

USED_BLOCKS_PAGE = 4096  # ranges asked for per UsedBlocks call (the namenode may cap it)
RETRY_PAUSE = 0.5  # seconds between registration attempts
# gRPC's reconnect backoff grows to 2 minutes; a namenode back from a restart must hear
# from its datanodes well before it declares them dead.
LINK_CHANNEL = [
    *channels.NAMENODE_CHANNEL,
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
# A standby refuses (UNAVAILABLE), a dead or cut-off namenode does not answer: the
# call goes to the next namenode.
_ELSEWHERE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class NamenodeLink:
    """The DatanodeRegistry calls, over a channel to each namenode, to the active one."""

    def __init__(
        self,
        settings: DatanodeSettings,
        volume: Volume,
        registration: Registration,
        address: str,
        local_socket: Path | None,
        tls: ChannelTLS | None = None,
    ) -> None:
        self.settings = settings
        self.volume = volume
        self.registration = registration
        self.address = address
        self.local_socket = local_socket
        self.period = 1.0  # seconds between heartbeats, as the namenode says at registration
        self.addresses = settings.registry_addresses()
        self._channels = [open_channel(a, LINK_CHANNEL, tls) for a in self.addresses]
        self._stubs = [pb_grpc.DatanodeRegistryStub(c) for c in self._channels]
        self._current = 0  # the namenode that answered last
        self.registered: Callable[[], None] = lambda: None  # called after each registration

    @property
    def namenode(self) -> str:
        """The registry address calls go to now."""
        return self.addresses[self._current]

    async def close(self) -> None:
        """Close the channels."""
        for channel in self._channels:
            await channel.close()

    async def _call(self, method: str, request: Message, timeout: float) -> Any:
        """`method` of the namenode that answered last, else of the next ones in turn
        (each once) while they stand by or cannot be reached."""
        for attempt in range(len(self._stubs)):
            stub = self._stubs[self._current]
            try:
                return await getattr(stub, method)(request, timeout=timeout)
            except grpc.RpcError as exc:
                if exc.code() not in _ELSEWHERE or attempt == len(self._stubs) - 1:
                    raise
                self._current = (self._current + 1) % len(self._stubs)
        raise AssertionError("unreachable")

    async def register(self, timeout: float | None = None) -> None:
        """Register (retrying while the namenode does not answer, up to `timeout`
        seconds, default the register_timeout setting) and update the registration."""
        request = pb.RegisterRequest(
            local_socket=str(self.local_socket) if self.local_socket else "",
            identity=self.volume.info.identity,
            host=self.settings.host_identity,
            address=self.address,
            blocksize=self.volume.info.blocksize,
            capacity_blocks=self.volume.info.capacity_blocks,
            plaintext=self.settings.tls_cert is None or not self.settings.data_tls,
            newest_term=self.registration.term,
            newest_term_holder=self.registration.holder,
            location=self.settings.location,
        )
        loop = asyncio.get_running_loop()
        limit = self.settings.register_timeout if timeout is None else timeout
        deadline = loop.time() + limit
        while True:
            try:
                reply = await self._call("Register", request, timeout=10)
                break
            except grpc.RpcError as exc:
                if exc.code() not in _ELSEWHERE:
                    raise error_from_rpc(exc) from exc
                if loop.time() > deadline:
                    raise ConfigError(
                        f"no namenode at {self.settings.namenode} took the registration "
                        f"within {limit:g}s: {exc.details()}"
                    ) from exc
                await asyncio.sleep(RETRY_PAUSE)
        previous = self.registration.datanode_id
        self.registration.datanode_id = reply.datanode_id
        self.registration.secret = reply.ticket_secret
        self.registration.heard_term(reply.term, reply.term_holder)
        self.period = reply.heartbeat_ms / 1000
        if previous and previous != reply.datanode_id:
            log.warning("registered again as datanode %d (was %d)", reply.datanode_id, previous)
        log.info(
            "registered as datanode %d (volume %s) at %s",
            reply.datanode_id,
            self.volume.info.identity,
            self.namenode,
        )
        self.registered()

    async def heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatReply:
        """One heartbeat; a failure raises the plasmafs error it stands for."""
        try:
            reply: pb.HeartbeatReply = await self._call(
                "Heartbeat", request, timeout=max(5.0, 2 * self.period)
            )
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc
        return reply

    async def peer(self, peer_id: int) -> tuple[str, bool]:
        """The address datanode `peer_id` registered with, and whether its data port is
        plaintext."""
        request = pb.PeerRequest(
            datanode_id=self.registration.datanode_id,
            identity=self.volume.info.identity,
            peer_id=peer_id,
        )
        try:
            reply = await self._call("Peer", request, timeout=10)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc
        return reply.address, reply.plaintext

    async def used_blocks(self, cursor: UsedCursor) -> tuple[list[UsedRange], UsedCursor | None]:
        """A page of this datanode's committed block ranges after `cursor` (scrubber.py),
        and the cursor of the next page (None: no more)."""
        after, after_ino, after_index = cursor
        request = pb.UsedBlocksRequest(
            datanode_id=self.registration.datanode_id,
            identity=self.volume.info.identity,
            after=after,
            limit=USED_BLOCKS_PAGE,
            after_ino=after_ino,
            after_file_index=after_index,
        )
        try:
            reply = await self._call("UsedBlocks", request, timeout=30)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc
        owners = reply.owners if len(reply.owners) == len(reply.ranges) else None
        page = [
            UsedRange(
                r.block_start,
                r.block_count,
                None if owners is None else _owner(owners[k]),
            )
            for k, r in enumerate(reply.ranges)
        ]
        if not reply.more or not page:
            return page, None
        if reply.next_ino:
            return page, (reply.next_after, reply.next_ino, reply.next_file_index)
        # A namenode that gives no cursor pages by start only: past the last range.
        return page, (max(after + 1, page[-1].start + page[-1].blocks), 0, 0)


def _owner(owner: pb.BlockOwner) -> Owner:
    return (owner.ino, owner.generation, owner.file_index)


class Outbox:
    """Reports for the namenode, kept until a heartbeat that carried them was answered."""

    def __init__(self) -> None:
        self.finished: dict[int, pb.CopyResult] = {}
        self.corrupt: dict[tuple[int, int], pb.BadBlocks] = {}
        self.verified: list[pb.BlockRange] = []
        self.urgent = asyncio.Event()  # set: send a heartbeat now

    def copy_ended(self, result: pb.CopyResult) -> None:
        """A copy task ended: report it at once."""
        self.finished[result.task_id] = result
        self.urgent.set()

    def bad_blocks(self, bad: pb.BadBlocks) -> None:
        """Bad blocks found by the scrub: report them with the next heartbeat."""
        self.corrupt.setdefault((bad.block_start, bad.block_count), bad)

    def range_verified(self, block_start: int, block_count: int, bad: list[pb.BadBlocks]) -> None:
        """A verification the namenode asked for is done: report it and its bad blocks at
        once."""
        for b in bad:
            self.bad_blocks(b)
        self.verified.append(pb.BlockRange(block_start=block_start, block_count=block_count))
        self.urgent.set()

    def fill(self, request: pb.HeartbeatRequest) -> tuple[list[int], list[tuple[int, int]], int]:
        """Put every pending report into `request`; returns what to `acknowledge`."""
        request.finished.extend(self.finished.values())
        request.corrupt.extend(self.corrupt.values())
        request.verified.extend(self.verified)
        return list(self.finished), list(self.corrupt), len(self.verified)

    def acknowledge(self, sent: tuple[list[int], list[tuple[int, int]], int]) -> None:
        """The heartbeat that carried `sent` was answered: drop those reports."""
        finished, corrupt, verified = sent
        for task_id in finished:
            self.finished.pop(task_id, None)
        for key in corrupt:
            self.corrupt.pop(key, None)
        del self.verified[:verified]


class Heartbeats:
    """The heartbeat loop: reports out, work in."""

    def __init__(
        self, link: NamenodeLink, outbox: Outbox, copier: Copier, scrubber: Scrubber
    ) -> None:
        self.link = link
        self.outbox = outbox
        self.copier = copier
        self.scrubber = scrubber
        self.sent = 0  # heartbeats answered
        self.failed = 0  # heartbeats in a row that got no answer
        self.pause = 0.0  # until the next beat, as the last reply said (0: the period)
        self._verifying: dict[tuple[int, int], asyncio.Task[None]] = {}

    async def run(self) -> None:
        """Beat every period, and at once when a report is urgent, until cancelled."""
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    running = bool(self.copier.active_ids())
                    pause = self.link.period if running or not self.pause else self.pause
                    async with asyncio.timeout(pause):
                        await self.outbox.urgent.wait()
                self.outbox.urgent.clear()
                try:
                    await self.beat()
                except Exception:  # the loop must outlive anything one beat runs into
                    log.exception("heartbeat failed")
        finally:
            for task in self._verifying.values():
                task.cancel()

    async def beat(self) -> None:
        """Send one heartbeat and act on its reply; never raises a plasmafs error."""
        registration = self.link.registration
        request = pb.HeartbeatRequest(
            datanode_id=registration.datanode_id,
            identity=self.link.volume.info.identity,
            running=self.copier.active_ids(),
        )
        sent = self.outbox.fill(request)
        try:
            reply = await self.link.heartbeat(request)
        except NotFoundError as exc:
            log.warning("heartbeat refused (%s): registering again", exc)
            await self._register_again()
            return
        except PlasmaError as exc:
            self.failed += 1
            if self.failed & (self.failed - 1) == 0:  # the 1st, 2nd, 4th...: a trend, no flood
                log.warning("heartbeat failed (%d in a row): %s", self.failed, exc)
            return
        if self.failed:
            log.info("the namenode answers again after %d failed heartbeats", self.failed)
            self.failed = 0
        self.sent += 1
        self.outbox.acknowledge(sent)
        self._act(reply)

    def _act(self, reply: pb.HeartbeatReply) -> None:
        registration = self.link.registration
        self.pause = reply.next_heartbeat_ms / 1000
        revoked = frozenset(reply.revoked_credentials)
        registration.heard_term(reply.term, reply.term_holder)
        if revoked != registration.revoked:
            log.info("tickets of %d revoked credentials are refused", len(revoked))
            registration.revoked = revoked
        if reply.cancel:
            log.info("the namenode cancels copy tasks %s", ", ".join(map(str, reply.cancel)))
            self.copier.cancel(list(reply.cancel))
        for task in reply.copies:
            self.copier.submit(task)
        for r in reply.verify:
            key = (r.block_start, r.block_count)
            if key in self._verifying:
                continue  # asked again before the answer went out
            log.info("verifying blocks %d+%d as the namenode asks", *key)
            verifying = asyncio.create_task(self._verify(*key))
            self._verifying[key] = verifying
            verifying.add_done_callback(functools.partial(self._verified, key))

    def _verified(self, key: tuple[int, int], _: asyncio.Task[None]) -> None:
        self._verifying.pop(key, None)

    async def _verify(self, block_start: int, block_count: int) -> None:
        try:
            bad = await self.scrubber.verify(block_start, block_count)
        except Exception:
            log.exception("verifying blocks %d+%d failed", block_start, block_count)
            return  # not reported as verified: the namenode asks again or decides alone
        self.outbox.range_verified(block_start, block_count, bad)

    async def _register_again(self) -> None:
        try:
            await self.link.register(timeout=self.link.period)
        except PlasmaError as exc:
            log.warning("registering again failed: %s", exc)
            return
        self.outbox.urgent.set()  # tell the new registration at once what runs here
