"""Users, groups and credentials through the namenode's Accounts service.

The calls are plain gRPC calls on a connection's channel with its credential, as the
Admin service's are. What they return are small frozen values, not protobufs, and a
refused call raises the plasmafs error the namenode reported: OperationNotPermittedError
for a change by a non-superuser, ExistsError, NotFoundError, InvalidArgumentError, and
ConfigError from an insecure namenode, which keeps no accounts. A token is returned
once, by add_user and issue_credential: the namenode stores only its hash. Times are
time.time() values; None means never (or not revoked).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from plasmafs.client.unary_service import UnaryService
from plasmafs.core.errors import InvalidArgumentError, NotFoundError
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from plasmafs.client.client import Client
    from plasmafs.client.connection import Connection


@dataclass(frozen=True, slots=True)
class UserInfo:
    """A user: `gid` is its primary group, `groups` its supplementary ones;
    `act_for_callers`, the first and last local uid its connections may act for (None:
    none; a superuser acts for all)."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    superuser: bool
    act_for_callers: tuple[int, int] | None = None

    @classmethod
    def from_wire(cls, u: pb.UserInfo) -> UserInfo:
        """Build from the wire message."""
        callers = None
        if u.HasField("act_for_callers"):
            callers = (u.act_for_callers.first, u.act_for_callers.last)
        return cls(u.name, u.uid, u.gid, tuple(u.groups), u.superuser, callers)


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A group and the uids of its supplementary members."""

    name: str
    gid: int
    members: tuple[int, ...]

    @classmethod
    def from_wire(cls, g: pb.GroupInfo) -> GroupInfo:
        """Build from the wire message."""
        return cls(g.name, g.gid, tuple(g.members))


@dataclass(frozen=True, slots=True)
class CredentialInfo:
    """A credential of user `uid` (never its secret)."""

    credential_id: int
    uid: int
    label: str
    created: float | None
    expires: float | None
    revoked: float | None

    @classmethod
    def from_wire(cls, c: pb.CredentialInfo) -> CredentialInfo:
        """Build from the wire message."""
        return cls(
            c.credential_id,
            c.uid,
            c.label,
            _seconds(c.created_unix_ms),
            _seconds(c.expires_unix_ms),
            _seconds(c.revoked_unix_ms),
        )

    def live(self, now: float) -> bool:
        """Neither revoked nor expired at `now`."""
        return self.revoked is None and (self.expires is None or self.expires > now)


@dataclass(frozen=True, slots=True)
class Revoked:
    """What a revocation did: the credentials now revoked, and the open connections it
    ended at once."""

    credentials: tuple[CredentialInfo, ...]
    sessions_cut: int


@dataclass(frozen=True, slots=True)
class AccountListing:
    """Every user and group the namenode knows, in id order, the credentials when a
    superuser asked for them, and the name of the user who asked."""

    users: tuple[UserInfo, ...]
    groups: tuple[GroupInfo, ...]
    credentials: tuple[CredentialInfo, ...]
    caller: str

    def user(self, name: str) -> UserInfo:
        """The user `name`; NotFoundError if there is none."""
        for user in self.users:
            if user.name == name:
                return user
        raise NotFoundError(f"no user named {name}")

    def group(self, name: str) -> GroupInfo:
        """The group `name`; NotFoundError if there is none."""
        for group in self.groups:
            if group.name == name:
                return group
        raise NotFoundError(f"no group named {name}")

    def gid(self, group: int | str) -> int:
        """A gid given as itself or by the group's name."""
        return group if isinstance(group, int) else self.group(group).gid


class Accounts(UnaryService):
    """The Accounts service of the namenode behind one connection, called with its
    credential."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn, pb_grpc.AccountsStub, "Accounts")

    # --- users ----------------------------------------------------------------------------

    async def add_user(
        self,
        name: str,
        *,
        uid: int | None = None,
        gid: int | str | None = None,
        groups: Iterable[int | str] = (),
        superuser: bool = False,
        label: str = "",
        expires: float | None = None,
    ) -> tuple[UserInfo, str]:
        """A new user and the token of its first credential (`label`, `expires`).
        Without `uid`: the next free from 1000; without `gid`: the group named as the
        user (made when there is none). Groups are gids or names."""
        wanted = list(groups)
        if isinstance(gid, str) or any(isinstance(g, str) for g in wanted):
            listing = await self.principals()
            gid = None if gid is None else listing.gid(gid)
            wanted = [listing.gid(g) for g in wanted]
        request = pb.AddUserRequest(
            name=name,
            groups=[int(g) for g in wanted],
            superuser=superuser,
            label=label,
            expires_unix_ms=_unix_ms(expires),
        )
        if uid is not None:
            request.uid = _id(uid, "uid")
        if gid is not None:
            request.gid = _id(int(gid), "gid")
        reply = await self._call(self._stub.AddUser, request)
        return UserInfo.from_wire(reply.user), reply.token

    async def set_callers(self, name: str, uids: tuple[int, int] | None) -> UserInfo:
        """Let user `name`'s connections act for the local uids `uids` (first, last,
        both included), or for none (None): a mount of its with -o callers then makes
        each request as the process that caused it. Open connections see the change
        at their next request."""
        request = pb.SetUserRequest(name=name)
        if uids is None:
            request.no_act_for_callers = True
        else:
            request.act_for_callers.first = _id(uids[0], "uid")
            request.act_for_callers.last = _id(uids[1], "uid")
        return UserInfo.from_wire(await self._call(self._stub.SetUser, request))

    async def remove_user(self, name: str) -> None:
        """Remove a user with its memberships and credentials; the connections its
        credentials opened end at once. Its files keep their uid."""
        await self._call(self._stub.RemoveUser, pb.RemoveUserRequest(name=name))

    # --- groups ---------------------------------------------------------------------------

    async def add_group(
        self, name: str, *, gid: int | None = None, members: Iterable[str] = ()
    ) -> GroupInfo:
        """A new group (without `gid`: the first free from 1000) with the users named
        in `members`."""
        request = pb.AddGroupRequest(name=name, members=list(members))
        if gid is not None:
            request.gid = _id(gid, "gid")
        return GroupInfo.from_wire(await self._call(self._stub.AddGroup, request))

    async def remove_group(self, name: str) -> None:
        """Remove a group and its memberships (refused while it is a user's primary
        group: BusyError)."""
        await self._call(self._stub.RemoveGroup, pb.RemoveGroupRequest(name=name))

    # --- credentials ----------------------------------------------------------------------

    async def issue_credential(
        self, user: str, label: str = "", expires: float | None = None
    ) -> tuple[CredentialInfo, str]:
        """A new credential of `user` and its token."""
        request = pb.IssueCredentialRequest(
            user=user, label=label, expires_unix_ms=_unix_ms(expires)
        )
        reply = await self._call(self._stub.IssueCredential, request)
        return CredentialInfo.from_wire(reply.credential), reply.token

    async def revoke(self, credential_id: int | None = None, user: str | None = None) -> Revoked:
        """Revoke one credential, or every credential of `user`; the connections they
        opened end at once (AuthenticationError on their next call)."""
        if (credential_id is None) == (user is None):
            raise InvalidArgumentError("revoke: give either a credential id or a user")
        if credential_id is not None and credential_id < 1:
            raise InvalidArgumentError(f"credential id must be positive, not {credential_id}")
        request = pb.RevokeCredentialRequest(credential_id=credential_id or 0, user=user or "")
        reply = await self._call(self._stub.RevokeCredential, request)
        return Revoked(
            tuple(CredentialInfo.from_wire(c) for c in reply.revoked), reply.sessions_cut
        )

    # --- listing --------------------------------------------------------------------------

    async def principals(self, credentials: bool = False) -> AccountListing:
        """Every user and group; with `credentials`, every credential too (a
        superuser's call: OperationNotPermittedError for others)."""
        reply = await self._call(
            self._stub.ListPrincipals, pb.ListPrincipalsRequest(credentials=credentials)
        )
        return AccountListing(
            tuple(UserInfo.from_wire(u) for u in reply.users),
            tuple(GroupInfo.from_wire(g) for g in reply.groups),
            tuple(CredentialInfo.from_wire(c) for c in reply.credentials),
            reply.caller,
        )

    async def whoami(self) -> UserInfo:
        """The user this connection acts as."""
        listing = await self.principals()
        return listing.user(listing.caller)


async def accounts(client: Client) -> Accounts:
    """The Accounts service of `client`'s namenode, called as `client`'s user (the same
    as `await client.accounts()`)."""
    return await client.accounts()


def _id(value: int, what: str) -> int:
    if not 0 <= value <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"{what} {value} is outside 0..{0xFFFFFFFF}")
    return value


def _unix_ms(when: float | None) -> int:
    # At least 1: 0 means "never" on the wire, and a past expiry must be refused.
    return 0 if when is None else max(1, round(when * 1000))


def _seconds(unix_ms: int) -> float | None:
    return unix_ms / 1000 if unix_ms else None
