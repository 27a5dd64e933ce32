"""The gRPC face of accounts (the Accounts service): users, groups and credentials.

It translates between the wire and the account store, and hands each committed change
to the in-memory registry that authenticates callers (Principals), so the next call
sees it. Changes are a superuser's; any authenticated user may list names (ls -l shows
them), credentials only a superuser. Revoking a credential or removing a user ends the
open sessions it authenticated at once, through the callable the namenode gives
(NamenodeServicer.cut_sessions). Every change is logged with who made it.

An insecure namenode (no TLS) authenticates nobody and holds no registry: there
InsecureAccounts answers every call FAILED_PRECONDITION (a ConfigError) saying why,
rather than UNIMPLEMENTED, which would read as an older namenode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import NoReturn

import grpc

from plasmafs.core.errors import (
    ConfigError,
    InvalidArgumentError,
    OperationNotPermittedError,
)
from plasmafs.core.proto import namenode_pb2 as pb
from plasmafs.core.proto import namenode_pb2_grpc as pb_grpc
from plasmafs.core.rpc_status import answered
from plasmafs.namenode.account_store import (
    AccountStore,
    CredentialRow,
    GroupRow,
    UserRow,
    check_expires,
    check_label,
    check_name,
    check_uid_range,
)
from plasmafs.namenode.caller_identity import Gate
from plasmafs.namenode.principals import Principals

log = logging.getLogger(__name__)

CutSessions = Callable[[set[int], str], int]  # credential ids, reason -> sessions ended
NO_ACCOUNTS = (
    "accounts need a secure namenode (TLS): this one runs insecure, with every caller the superuser"
)


class AccountsServicer(pb_grpc.AccountsServicer):
    """Users, groups and credentials of a secure namenode."""

    def __init__(
        self,
        store: AccountStore,
        principals: Principals,
        gate: Gate,
        cut_sessions: CutSessions,
    ) -> None:
        self.store = store
        self.principals = principals
        self.gate = gate
        self.cut_sessions = cut_sessions

    # --- users ----------------------------------------------------------------------------

    async def AddUser(
        self, request: pb.AddUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddUserReply:
        """A new user and its first credential, whose token is in the reply only."""
        return await answered(context, self._add_user(request, context))

    async def _add_user(
        self, request: pb.AddUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddUserReply:
        caller = self.gate.superuser(context, "add user")
        check_name(request.name, "user")
        # Checked before the user is written: the credential is a second transaction,
        # and once the user exists nothing but the database can make it fail.
        label = check_label(request.label)
        expires = _expiry(request.expires_unix_ms)
        new = await self.store.add_user(
            request.name,
            request.uid if request.HasField("uid") else None,
            request.gid if request.HasField("gid") else None,
            list(request.groups),
            request.superuser,
        )
        self.principals.add_user(new.user, new.group, new.groups)
        issued = await self.store.issue_credential(new.user.uid, label, expires)
        self.principals.put_credentials([issued.row])
        log.info(
            "%s added user %s (uid %d, gid %d%s), credential %d",
            caller.name,
            new.user.name,
            new.user.uid,
            new.user.gid,
            ", superuser" if new.user.superuser else "",
            issued.credential_id,
        )
        return pb.AddUserReply(
            user=_user_info(new.user, new.groups),
            token=issued.token,
            credential_id=issued.credential_id,
        )

    async def SetUser(
        self, request: pb.SetUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.UserInfo:
        """Change what a user may do: the local callers its connections may act for
        (sql/0014; open connections see the change at their next request)."""
        return await answered(context, self._set_user(request, context))

    async def _set_user(
        self, request: pb.SetUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.UserInfo:
        caller = self.gate.superuser(context, "set user")
        uid = self.principals.uid_of(check_name(request.name, "user"))
        granting = request.HasField("act_for_callers")
        if granting == request.no_act_for_callers:
            raise InvalidArgumentError(
                "set user: give the uids it may act for, or that it may act for none"
            )
        callers = None
        if granting:
            callers = check_uid_range((request.act_for_callers.first, request.act_for_callers.last))
        user = await self.store.set_callers(uid, callers)
        self.principals.put_user(user)
        shown = "none" if callers is None else f"uids {callers[0]}-{callers[1]}"
        log.info("%s let user %s act for local callers: %s", caller.name, user.name, shown)
        groups = [g for g, u in self.principals.rows().members if u == uid]
        return _user_info(user, groups)

    async def RemoveUser(
        self, request: pb.RemoveUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.AccountsEmpty:
        """Remove a user with its memberships and credentials; its open sessions end."""
        return await answered(context, self._remove_user(request, context))

    async def _remove_user(
        self, request: pb.RemoveUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.AccountsEmpty:
        caller = self.gate.superuser(context, "remove user")
        uid = self.principals.uid_of(check_name(request.name, "user"))
        superusers = [u.uid for u in self.principals.rows().users if u.superuser]
        if superusers == [uid]:
            # Nobody could manage accounts any more (only the bootstrap tool could).
            raise OperationNotPermittedError(
                f"remove user: {request.name} is the last superuser; make another first"
            )
        live = await self.store.remove_user(uid)
        self.principals.remove_user(uid)
        cut = self.cut_sessions(set(live), "not authenticated: user removed")
        log.info(
            "%s removed user %s (uid %d); %d session(s) cut", caller.name, request.name, uid, cut
        )
        return pb.AccountsEmpty()

    # --- groups ---------------------------------------------------------------------------

    async def AddGroup(
        self, request: pb.AddGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.GroupInfo:
        """A new group, with its members (user names)."""
        return await answered(context, self._add_group(request, context))

    async def _add_group(
        self, request: pb.AddGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.GroupInfo:
        caller = self.gate.superuser(context, "add group")
        check_name(request.name, "group")
        uids = sorted({self.principals.uid_of(check_name(m, "user")) for m in request.members})
        gid = request.gid if request.HasField("gid") else None
        group = await self.store.add_group(request.name, gid, uids)
        self.principals.add_group(group)
        self.principals.add_members(group.gid, uids)
        log.info("%s added group %s (gid %d), members %s", caller.name, group.name, group.gid, uids)
        return _group_info(group, uids)

    async def RemoveGroup(
        self, request: pb.RemoveGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.AccountsEmpty:
        """Remove a group and its memberships (not while it is a user's primary group)."""
        return await answered(context, self._remove_group(request, context))

    async def _remove_group(
        self, request: pb.RemoveGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.AccountsEmpty:
        caller = self.gate.superuser(context, "remove group")
        gid = self.principals.gid_of(check_name(request.name, "group"))
        await self.store.remove_group(gid)
        self.principals.remove_group(gid)
        log.info("%s removed group %s (gid %d)", caller.name, request.name, gid)
        return pb.AccountsEmpty()

    # --- credentials ----------------------------------------------------------------------

    async def IssueCredential(
        self, request: pb.IssueCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.IssueCredentialReply:
        """A new credential of a user, whose token is in the reply only."""
        return await answered(context, self._issue(request, context))

    async def _issue(
        self, request: pb.IssueCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.IssueCredentialReply:
        caller = self.gate.superuser(context, "issue credential")
        uid = self.principals.uid_of(check_name(request.user, "user"))
        expires = _expiry(request.expires_unix_ms)
        issued = await self.store.issue_credential(uid, check_label(request.label), expires)
        self.principals.put_credentials([issued.row])
        log.info("%s issued credential %d of %s", caller.name, issued.credential_id, request.user)
        return pb.IssueCredentialReply(credential=_credential_info(issued.row), token=issued.token)

    async def RevokeCredential(
        self, request: pb.RevokeCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeCredentialReply:
        """Revoke one credential, or every credential of a user; their open sessions end."""
        return await answered(context, self._revoke(request, context))

    async def _revoke(
        self, request: pb.RevokeCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeCredentialReply:
        caller = self.gate.superuser(context, "revoke credential")
        if bool(request.credential_id) == bool(request.user):
            raise InvalidArgumentError("revoke: give either a credential id or a user")
        if request.credential_id:
            rows: tuple[CredentialRow, ...] = (
                await self.store.revoke_credential(request.credential_id),
            )
        else:
            uid = self.principals.uid_of(check_name(request.user, "user"))
            rows = await self.store.revoke_user_credentials(uid)
        self.principals.put_credentials(rows)
        ids = {r.credential_id for r in rows}
        cut = self.cut_sessions(ids, "not authenticated: credential revoked")
        log.info("%s revoked credentials %s; %d session(s) cut", caller.name, sorted(ids), cut)
        return pb.RevokeCredentialReply(
            revoked=[_credential_info(r) for r in rows], sessions_cut=cut
        )

    # --- listing --------------------------------------------------------------------------

    async def ListPrincipals(
        self, request: pb.ListPrincipalsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPrincipalsReply:
        """Every user and group (any user may ask), and credentials (a superuser only)."""
        return await answered(context, self._list(request, context))

    async def _list(
        self, request: pb.ListPrincipalsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPrincipalsReply:
        caller = self.gate.user(context)
        if request.credentials and not caller.superuser:
            raise OperationNotPermittedError("list credentials: only a superuser may do this")
        rows = self.principals.rows()
        groups_of: dict[int, list[int]] = {}
        members_of: dict[int, list[int]] = {}
        for gid, uid in rows.members:
            groups_of.setdefault(uid, []).append(gid)
            members_of.setdefault(gid, []).append(uid)
        reply = pb.ListPrincipalsReply(
            users=[_user_info(u, groups_of.get(u.uid, ())) for u in rows.users],
            groups=[_group_info(g, members_of.get(g.gid, ())) for g in rows.groups],
            caller=caller.name,
        )
        if request.credentials:
            reply.credentials.extend(_credential_info(c) for c in rows.credentials)
        return reply


class InsecureAccounts(pb_grpc.AccountsServicer):
    """The Accounts service of an insecure namenode: every call is refused."""

    async def AddUser(
        self, request: pb.AddUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddUserReply:
        """Refused: no accounts without TLS."""
        return await answered(context, _insecure())

    async def RemoveUser(
        self, request: pb.RemoveUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.AccountsEmpty:
        """Refused: no accounts without TLS."""
        return await answered(context, _insecure())

    async def SetUser(
        self, request: pb.SetUserRequest, context: grpc.aio.ServicerContext
    ) -> pb.UserInfo:
        """Refused: no accounts without TLS."""
        return await answered(context, _insecure())

    async def AddGroup(
        self, request: pb.AddGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.GroupInfo:
        """Refused: no accounts without TLS."""
        return await answered(context, _insecure())

    async def RemoveGroup(
        self, request: pb.RemoveGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.AccountsEmpty:
        """Refused: no accounts without TLS."""
        return await answered(context, _insecure())

    async def IssueCredential(
        self, request: pb.IssueCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.IssueCredentialReply:
        """Refused: no accounts without TLS."""
        return await answered(context, _insecure())

    async def RevokeCredential(
        self, request: pb.RevokeCredentialRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeCredentialReply:
        """Refused: no accounts without TLS."""
        return await answered(context, _insecure())

    async def ListPrincipals(
        self, request: pb.ListPrincipalsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPrincipalsReply:
        """Refused: no accounts without TLS."""
        return await answered(context, _insecure())


def accounts_servicer(
    store: AccountStore,
    principals: Principals | None,
    gate: Gate,
    cut_sessions: CutSessions,
) -> pb_grpc.AccountsServicer:
    """The Accounts service of a namenode: InsecureAccounts when it has no registry
    (`principals` None: insecure)."""
    if principals is None:
        return InsecureAccounts()
    return AccountsServicer(store, principals, gate, cut_sessions)


async def _insecure() -> NoReturn:
    raise ConfigError(NO_ACCOUNTS)


def _expiry(unix_ms: int) -> float | None:
    """The expiry a request gives (0: never) as a time.time() value in the future."""
    if unix_ms < 0:
        raise InvalidArgumentError(f"bad expiry {unix_ms}: milliseconds since 1970, 0 for never")
    return check_expires(unix_ms / 1000) if unix_ms else None


def _ms(when: float | None) -> int:
    return 0 if when is None else round(when * 1000)


def _user_info(user: UserRow, groups: Iterable[int]) -> pb.UserInfo:
    return pb.UserInfo(
        name=user.name,
        uid=user.uid,
        gid=user.gid,
        groups=sorted(groups),
        superuser=user.superuser,
        act_for_callers=None
        if user.callers is None
        else pb.UidRange(first=user.callers[0], last=user.callers[1]),
    )


def _group_info(group: GroupRow, members: Iterable[int]) -> pb.GroupInfo:
    return pb.GroupInfo(name=group.name, gid=group.gid, members=sorted(members))


def _credential_info(c: CredentialRow) -> pb.CredentialInfo:
    return pb.CredentialInfo(
        credential_id=c.credential_id,
        uid=c.uid,
        label=c.label,
        created_unix_ms=_ms(c.created),
        expires_unix_ms=_ms(c.expires),
        revoked_unix_ms=_ms(c.revoked),
    )
