"""The `pfs` commands of accounts (`pfs admin user ...`, `pfs admin group ...`, `pfs
whoami`), and the cluster's names of owners for `ls -l`, `stat` and `chown`.

Imported only once a command is about to run, as commands.py. Changes are a
superuser's; the namenode refuses others, and every refusal is one line. A token goes
only to a new file with mode 0600: an existing file is never overwritten, and that is
checked before anything is changed. Should the file fail to be written afterwards, the
credential is revoked, so no token is left that nobody holds.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from plasmafs.cli.formatting import NUMBERS, OwnerNames, aligned, table
from plasmafs.client.accounts import AccountListing, Accounts, UserInfo, accounts
from plasmafs.client.client import Client
from plasmafs.core.credentials import MAX_CREDENTIAL_ID, parse_token, write_token_file
from plasmafs.core.errors import (
    ConfigError,
    InvalidArgumentError,
    OperationNotPermittedError,
    PlasmaError,
)

if TYPE_CHECKING:
    from plasmafs.cli.exits import Reporter

MAX_ID = 0xFFFFFFFF
_DURATION = re.compile(r"([0-9]{1,9})([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DECIMAL = re.compile(r"[0-9]+")


class KnownNames:
    """The cluster's names of users and groups for one command: asked for when first
    needed, and only once. An insecure namenode keeps none: ids show as numbers."""

    def __init__(self, fs: Client) -> None:
        self._fs = fs
        self._names: OwnerNames | None = None

    async def get(self) -> OwnerNames:
        """The names, fetched on the first call."""
        if self._names is None:
            try:
                listing = await (await accounts(self._fs)).principals()
            except ConfigError:
                self._names = NUMBERS
            else:
                self._names = OwnerNames(
                    {u.uid: u.name for u in listing.users},
                    {g.gid: g.name for g in listing.groups},
                )
        return self._names


# --- arguments ----------------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """Seconds from 90s, 30m, 12h, 30d or 2w."""
    match = _DURATION.fullmatch(text)
    if match is None or int(match[1]) == 0:
        raise InvalidArgumentError(
            f"invalid duration {text!r}: give a positive number and a unit, "
            "s, m, h, d or w (e.g. 30d)"
        )
    return int(match[1]) * _UNIT_SECONDS[match[2]]


def parse_id(text: str, what: str) -> int:
    """A uid or gid: ASCII decimal digits, 0 to 2^32-1."""
    if not _DECIMAL.fullmatch(text) or int(text) > MAX_ID:
        raise InvalidArgumentError(f"{what} must be a number from 0 to {MAX_ID}, not {text!r}")
    return int(text)


def parse_uid_range(text: str) -> tuple[int, int]:
    """FIRST-LAST (both included) or one uid."""
    first, sep, last = text.partition("-")
    low = parse_id(first, "uid")
    high = parse_id(last, "uid") if sep else low
    if low > high:
        raise InvalidArgumentError(f"uid range {text}: the first is past the last")
    return low, high


def _group_ref(text: str) -> int | str:
    """A group given by gid or by name."""
    return parse_id(text, "gid") if _DECIMAL.fullmatch(text) else text


def _names(text: str | None) -> list[str]:
    """A comma-separated list (empty items dropped)."""
    return [part for part in (text or "").split(",") if part]


def _credential_id(text: str) -> int:
    if not _DECIMAL.fullmatch(text) or not 1 <= int(text) <= MAX_CREDENTIAL_ID:
        raise InvalidArgumentError(f"credential id must be a positive integer, not {text!r}")
    return int(text)


def _expires(args: argparse.Namespace) -> float | None:
    return None if args.expires is None else time.time() + parse_duration(args.expires)


def _new_token_file(path: Path) -> Path:
    if os.path.lexists(path):
        raise ConfigError(f"{path} exists: a token file is never overwritten; give a new path")
    return path


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse bad ids, durations and an existing token file before connecting."""
    if args.command != "admin" or args.admin_command not in ("user", "group"):
        return
    if args.admin_command == "group":
        if args.group_command == "add" and args.gid is not None:
            parse_id(args.gid, "gid")
        return
    action = args.user_command
    if action == "set" and args.act_for_callers is not None:
        parse_uid_range(args.act_for_callers)
    if action == "add":
        if args.uid is not None:
            parse_id(args.uid, "uid")
        for group in [*([] if args.gid is None else [args.gid]), *_names(args.groups)]:
            _group_ref(group)
    if action in ("add", "token"):
        if args.expires is not None:
            parse_duration(args.expires)
        _new_token_file(args.new_token_file)
    elif action == "revoke":
        if (args.name is None) == (args.credential is None):
            raise InvalidArgumentError("user revoke: give a user NAME or --credential ID")
        if args.credential is not None:
            _credential_id(args.credential)


# --- commands -----------------------------------------------------------------------------


async def cmd_user(fs: Client, args: argparse.Namespace) -> None:
    """`pfs admin user add|set|del|list|token|revoke|s3-key|s3-keys|s3-revoke`."""
    service = await accounts(fs)
    action = args.user_command
    if action == "add":
        await _add_user(service, args)
    elif action == "set":
        uids = None if args.no_act_for_callers else parse_uid_range(args.act_for_callers)
        user = await service.set_callers(args.name, uids)
        shown = "none" if uids is None else f"uids {uids[0]}-{uids[1]}"
        print(f"{user.name} may act for local callers: {shown}")
    elif action == "del":
        await service.remove_user(args.name)
        print(f"removed user {args.name}")
    elif action == "list":
        await _list_users(service, args.credentials)
    elif action in ("s3-key", "s3-keys", "s3-revoke"):
        await _s3_keys(fs, args)
    elif action == "token":
        path = _new_token_file(args.new_token_file)
        credential, token = await service.issue_credential(args.name, args.label, _expires(args))
        await _save_token(service, credential.credential_id, path, token)
        print(f"credential {credential.credential_id} of {args.name} written to {path}")
    else:
        if args.credential is not None:
            revoked = await service.revoke(credential_id=_credential_id(args.credential))
        else:
            revoked = await service.revoke(user=args.name)
        ids = ", ".join(str(c.credential_id) for c in revoked.credentials)
        if not ids:
            print(f"{args.name} has no live credential")
        else:
            print(f"revoked credential(s) {ids}; {revoked.sessions_cut} connection(s) cut")


async def _s3_keys(fs: Client, args: argparse.Namespace) -> None:
    """`pfs admin user s3-key NAME`, `s3-keys [NAME]`, `s3-revoke ACCESS_KEY_ID`."""
    service = await fs.s3_keys()
    action = args.user_command
    if action == "s3-key":
        key, secret = await service.create(args.name)
        print(f"access_key_id: {key.access_key_id}")
        print(f"secret_access_key: {secret}")
    elif action == "s3-keys":
        keys = await service.list(args.name)
        rows = [["ACCESS KEY ID", "USER", "CREATED", "REVOKED"]]
        rows += [
            [k.access_key_id, k.user, _when(k.created, "-"), _when(k.revoked, "-")] for k in keys
        ]
        print(table(rows))
    else:
        key = await service.revoke(args.access_key_id)
        print(f"revoked S3 key {key.access_key_id} of {key.user}")


async def _add_user(service: Accounts, args: argparse.Namespace) -> None:
    path = _new_token_file(args.new_token_file)
    user, token = await service.add_user(
        args.name,
        uid=None if args.uid is None else parse_id(args.uid, "uid"),
        gid=None if args.gid is None else _group_ref(args.gid),
        groups=[_group_ref(g) for g in _names(args.groups)],
        superuser=args.superuser,
        label=args.label,
        expires=_expires(args),
    )
    issued = parse_token(token)
    assert issued is not None  # the namenode's token has the shared format
    await _save_token(service, issued.credential_id, path, token)
    role = ", superuser" if user.superuser else ""
    print(f"added user {user.name} (uid {user.uid}, gid {user.gid}{role}); token in {path}")


async def _save_token(service: Accounts, credential_id: int, path: Path, token: str) -> None:
    """Write `token` to the new file `path`; if that fails, revoke the credential."""
    try:
        write_token_file(path, token, replace=False)
    except OSError as exc:
        reason = "it exists now" if isinstance(exc, FileExistsError) else exc.strerror
        try:
            await service.revoke(credential_id=credential_id)
            done = f"credential {credential_id} was revoked"
        except PlasmaError as again:
            done = f"revoke credential {credential_id} by hand ({again})"
        raise ConfigError(f"cannot write the token to {path} ({reason}): {done}") from None


async def _list_users(service: Accounts, credentials: bool) -> None:
    try:
        listing = await service.principals(credentials=True)
        superuser = True
    except OperationNotPermittedError:
        if credentials:
            raise
        listing = await service.principals()  # users may see names, not credentials
        superuser = False
    if credentials:
        print(_credential_table(listing))
    else:
        print(user_table(listing, with_credentials=superuser))


async def cmd_group(fs: Client, args: argparse.Namespace) -> None:
    """`pfs admin group add|del|list`."""
    service = await accounts(fs)
    action = args.group_command
    if action == "add":
        group = await service.add_group(
            args.name,
            gid=None if args.gid is None else parse_id(args.gid, "gid"),
            members=_names(args.members),
        )
        print(f"added group {group.name} (gid {group.gid})")
    elif action == "del":
        await service.remove_group(args.name)
        print(f"removed group {args.name}")
    else:
        print(group_table(await service.principals()))


async def cmd_whoami(fs: Client, args: argparse.Namespace, out: Reporter) -> None:
    """`pfs whoami`: the user this credential acts as."""
    listing = await (await accounts(fs)).principals()
    print(whoami_report(listing))


# --- output -------------------------------------------------------------------------------


def user_table(listing: AccountListing, *, with_credentials: bool) -> str:
    """The `pfs admin user list` table; CREDENTIALS holds the ids of live credentials."""
    groups = {g.gid: g.name for g in listing.groups}
    live: dict[int, list[str]] = {}
    now = time.time()
    for c in listing.credentials:
        if c.live(now):
            live.setdefault(c.uid, []).append(str(c.credential_id))
    header = ["NAME", "UID", "GID", "GROUPS", "SUPERUSER", "CALLERS"]
    rows = [header + (["CREDENTIALS"] if with_credentials else [])]
    for u in listing.users:
        row = [
            u.name,
            str(u.uid),
            str(u.gid),
            ",".join(groups.get(g, str(g)) for g in u.groups) or "-",
            "yes" if u.superuser else "no",
            _acts_for(u),
        ]
        rows.append(row + ([",".join(live.get(u.uid, [])) or "-"] if with_credentials else []))
    return table(rows, right=frozenset({1, 2}))


def _acts_for(user: UserInfo) -> str:
    """The local uids a user's mounts may act for."""
    if user.superuser:
        return "all"
    if user.act_for_callers is None:
        return "-"
    first, last = user.act_for_callers
    return str(first) if first == last else f"{first}-{last}"


def _credential_table(listing: AccountListing) -> str:
    """`pfs admin user list --credentials`: every credential, revoked ones too."""
    users = {u.uid: u.name for u in listing.users}
    rows = [["ID", "USER", "LABEL", "CREATED", "EXPIRES", "REVOKED"]]
    rows += [
        [
            str(c.credential_id),
            users.get(c.uid, str(c.uid)),
            c.label or "-",
            _when(c.created, "-"),
            _when(c.expires, "never"),
            _when(c.revoked, "-"),
        ]
        for c in sorted(listing.credentials, key=lambda c: c.credential_id)
    ]
    return table(rows, right=frozenset({0}))


def _when(when: float | None, none: str) -> str:
    return none if when is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(when))


def group_table(listing: AccountListing) -> str:
    """The `pfs admin group list` table; MEMBERS are the supplementary members (users
    whose primary group it is are members too, as in /etc/group)."""
    users = {u.uid: u.name for u in listing.users}
    rows = [["NAME", "GID", "MEMBERS"]]
    rows += [
        [g.name, str(g.gid), ",".join(users.get(m, str(m)) for m in g.members) or "-"]
        for g in listing.groups
    ]
    return table(rows, right=frozenset({1}))


def whoami_report(listing: AccountListing) -> str:
    """`pfs whoami`: the caller's name, uid, groups (the primary first) and role."""
    me = listing.user(listing.caller)
    names = {g.gid: g.name for g in listing.groups}

    def named(gid: int) -> str:
        return f"{gid} ({names[gid]})" if gid in names else str(gid)

    return aligned(
        [
            ("user", me.name),
            ("uid", str(me.uid)),
            ("gid", named(me.gid)),
            ("groups", ", ".join(named(g) for g in (me.gid, *me.groups))),
            ("superuser", "yes" if me.superuser else "no"),
        ]
    )
