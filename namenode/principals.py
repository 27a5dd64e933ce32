"""Who a caller is: the namenode's in-memory registry of users, groups and credentials.

Loaded from the account store at start (and by a standby when it takes over). The
namenode is the only writer of accounts, so each admin operation applies its committed
rows here afterwards, and checking a token needs no database: a dict lookup by
credential id and a constant-time comparison of the secret's SHA-256.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from plasmafs.core.credentials import parse_token, secret_digest
from plasmafs.core.errors import AuthenticationError, NotFoundError
from plasmafs.namenode.account_store import AccountRows, CredentialRow, GroupRow, UserRow


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. `groups` holds the primary gid too; `expires` is when
    the credential stops being valid (time.time()), None: never."""

    name: str
    uid: int
    gid: int
    groups: frozenset[int]
    superuser: bool
    credential_id: int
    expires: float | None


# The namenode's own work (replication, fsck) and every caller of an insecure cluster.
SUPERUSER = Principal("root", 0, 0, frozenset({0}), True, 0, None)


@dataclass(frozen=True, slots=True)
class Names:
    """Names of ids, for listings: uid -> user name, gid -> group name."""

    users: Mapping[int, str]
    groups: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class _Entry:
    digest: bytes
    principal: Principal
    revoked: bool


class Principals:
    """The registry: verify tokens, name ids, and take in committed account changes."""

    def __init__(self, rows: AccountRows | None = None) -> None:
        self._groups: dict[int, GroupRow] = {}
        self._users: dict[int, UserRow] = {}
        self._member_of: dict[int, set[int]] = {}  # uid -> supplementary gids
        self._credentials: dict[int, CredentialRow] = {}
        self._entries: dict[int, _Entry] = {}
        self._removed: dict[int, float] = {}  # credential id -> when its user was removed
        if rows is not None:
            self.replace(rows)

    def replace(self, rows: AccountRows) -> None:
        """Forget everything and hold `rows` (a fresh load)."""
        self._groups = {g.gid: g for g in rows.groups}
        self._users = {u.uid: u for u in rows.users}
        self._member_of = {}
        for gid, uid in rows.members:
            self._member_of.setdefault(uid, set()).add(gid)
        self._credentials = {c.credential_id: c for c in rows.credentials}
        self._index()

    # --- authentication -------------------------------------------------------------------

    def verify(self, token: str, now: float | None = None) -> Principal:
        """The principal `token` authenticates, or AuthenticationError with a one-line
        reason. Revocation and expiry are told only to a caller holding the secret."""
        parsed = parse_token(token)
        if parsed is None:
            raise AuthenticationError("malformed token")
        entry = self._entries.get(parsed.credential_id)
        # Unknown ids and wrong secrets get the same answer.
        if entry is None or not hmac.compare_digest(entry.digest, secret_digest(parsed.secret)):
            raise AuthenticationError("unknown credential")
        if entry.revoked:
            raise AuthenticationError("credential revoked")
        expires = entry.principal.expires
        if expires is not None and (time.time() if now is None else now) >= expires:
            raise AuthenticationError("credential expired")
        return entry.principal

    # --- names ----------------------------------------------------------------------------

    def names(self) -> Names:
        """The names of every uid and gid known now."""
        return Names(
            {u.uid: u.name for u in self._users.values()},
            {g.gid: g.name for g in self._groups.values()},
        )

    def uid_of(self, name: str) -> int:
        """The uid of the user `name`."""
        for user in self._users.values():
            if user.name == name:
                return user.uid
        raise NotFoundError(f"no user named {name}")

    def user(self, uid: int) -> UserRow:
        """The user `uid`; NotFoundError if there is none."""
        user = self._users.get(uid)
        if user is None:
            raise NotFoundError(f"no user with uid {uid}")
        return user

    def groups_of(self, uid: int) -> frozenset[int]:
        """The supplementary groups of user `uid`."""
        return frozenset(self._member_of.get(uid, ()))

    def gid_of(self, name: str) -> int:
        """The gid of the group `name`."""
        for group in self._groups.values():
            if group.name == name:
                return group.gid
        raise NotFoundError(f"no group named {name}")

    def rows(self) -> AccountRows:
        """Everything held now, as the store's records (for listings)."""
        return AccountRows(
            tuple(sorted(self._groups.values(), key=lambda g: g.gid)),
            tuple(sorted(self._users.values(), key=lambda u: u.uid)),
            tuple(sorted((g, u) for u, gids in self._member_of.items() for g in gids)),
            tuple(sorted(self._credentials.values(), key=lambda c: c.credential_id)),
        )

    # --- committed changes ----------------------------------------------------------------

    def add_group(self, group: GroupRow) -> None:
        """A group was added."""
        self._groups[group.gid] = group

    def remove_group(self, gid: int) -> None:
        """A group was removed, and with it its memberships."""
        self._groups.pop(gid, None)
        for gids in self._member_of.values():
            gids.discard(gid)
        self._index()

    def add_members(self, gid: int, uids: Iterable[int]) -> None:
        """Users joined a group."""
        for uid in uids:
            self._member_of.setdefault(uid, set()).add(gid)
        self._index()

    def add_user(self, user: UserRow, group: GroupRow | None, groups: Iterable[int]) -> None:
        """A user was added, with the group made for it (if any) and its supplementary
        groups (the fields of account_store.NewUser)."""
        if group is not None:
            self._groups[group.gid] = group
        self._users[user.uid] = user
        self._member_of[user.uid] = set(groups)
        self._index()

    def put_user(self, user: UserRow) -> None:
        """A user's own record changed (the callers it may act for)."""
        if user.uid in self._users:
            self._users[user.uid] = user

    def callers(self, uid: int) -> tuple[int, int] | None:
        """The first and last local uid user `uid` may act for, None: none (a
        superuser acts for all without it)."""
        user = self._users.get(uid)
        return None if user is None else user.callers

    def remove_user(self, uid: int, now: float | None = None) -> None:
        """A user was removed, and with it its memberships and credentials (their
        tickets are refused as those of revoked credentials are)."""
        when = time.time() if now is None else now
        self._users.pop(uid, None)
        self._member_of.pop(uid, None)
        for c in self._credentials.values():
            if c.uid == uid and c.revoked is None:
                self._removed[c.credential_id] = when
        self._credentials = {k: c for k, c in self._credentials.items() if c.uid != uid}
        self._index()

    def revoked_since(self, cutoff: float) -> list[int]:
        """Credentials revoked (or whose user was removed) at or after `cutoff`, in id
        order: tickets issued to them before may still be presented until they expire.
        A user removed before this namenode started is not among them (its credentials
        are gone from the database): its tickets live out their lifetime."""
        self._removed = {k: t for k, t in self._removed.items() if t >= cutoff}
        revoked = {
            c.credential_id
            for c in self._credentials.values()
            if c.revoked is not None and c.revoked >= cutoff
        }
        return sorted(revoked | self._removed.keys())

    def put_credentials(self, rows: Iterable[CredentialRow]) -> None:
        """Credentials were issued or revoked: hold them as stored now."""
        for row in rows:
            self._credentials[row.credential_id] = row
        self._index()

    def _index(self) -> None:
        # Principals are built once per change, not per verify: changes are rare.
        groups = {
            uid: frozenset({user.gid, *self._member_of.get(uid, ())})
            for uid, user in self._users.items()
        }
        entries: dict[int, _Entry] = {}
        for c in self._credentials.values():
            user = self._users.get(c.uid)
            if user is None:
                continue
            principal = Principal(
                user.name,
                user.uid,
                user.gid,
                groups[user.uid],
                user.superuser,
                c.credential_id,
                c.expires,
            )
            entries[c.credential_id] = _Entry(c.secret_sha256, principal, c.revoked is not None)
        self._entries = entries
