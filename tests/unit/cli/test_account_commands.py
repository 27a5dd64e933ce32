"""The pure parts of the accounts CLI: durations, ids, owners resolved through the
cluster's names, and the tables and reports, without a cluster."""

from __future__ import annotations

import time

import pytest

from plasmafs.cli.accounts import (
    group_table,
    parse_duration,
    parse_id,
    user_table,
    whoami_report,
)
from plasmafs.cli.formatting import NUMBERS, OwnerNames
from plasmafs.cli.modes import names_owner, parse_owner
from plasmafs.client.accounts import AccountListing, CredentialInfo, GroupInfo, UserInfo
from plasmafs.core.errors import InvalidArgumentError

NOW = time.time()
LISTING = AccountListing(
    users=(
        UserInfo("root", 0, 0, (), True),
        UserInfo("alice", 1001, 1001, (2000,), False),
    ),
    groups=(
        GroupInfo("root", 0, ()),
        GroupInfo("alice", 1001, ()),
        GroupInfo("staff", 2000, (1001,)),
    ),
    credentials=(
        CredentialInfo(1, 0, "root", NOW - 10, None, None),
        CredentialInfo(2, 1001, "old", NOW - 10, NOW - 1, None),  # expired
        CredentialInfo(3, 1001, "laptop", NOW - 10, None, None),
        CredentialInfo(4, 1001, "gone", NOW - 10, None, NOW - 5),  # revoked
    ),
    caller="alice",
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("12h", 43200), ("30d", 2592000), ("2w", 1209600)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["30", "d", "0d", "-1d", "1.5d", "30 d", "\u0663d", "1y"])
def test_bad_durations(bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="invalid duration"):
        parse_duration(bad)


def test_ids() -> None:
    assert parse_id("0", "uid") == 0
    assert parse_id("4294967295", "uid") == 2**32 - 1
    for bad in ("4294967296", "-1", "+1", "\u0663", "a"):
        with pytest.raises(InvalidArgumentError, match="uid must be a number"):
            parse_id(bad, "uid")


def test_owners_by_the_cluster_s_names() -> None:
    names = OwnerNames({1001: "alice"}, {2000: "staff"})
    assert (names.user(1001), names.user(7), names.group(2000), names.group(8)) == (
        "alice",
        "7",
        "staff",
        "8",
    )
    assert parse_owner("alice:staff", names.uids(), names.gids()) == (1001, 2000)
    assert parse_owner("12:34") == (12, 34)
    assert (names_owner("12:34"), names_owner(":staff"), names_owner("alice")) == (
        False,
        True,
        True,
    )
    with pytest.raises(InvalidArgumentError, match="unknown user 'bob'"):
        parse_owner("bob", names.uids(), names.gids())
    with pytest.raises(InvalidArgumentError, match="invalid owner"):
        names_owner("alice:")
    assert NUMBERS.user(0) == "0"  # no names known: numbers


def test_user_table_lists_live_credentials() -> None:
    assert user_table(LISTING, with_credentials=True).splitlines() == [
        "NAME    UID   GID  GROUPS  SUPERUSER  CALLERS  CREDENTIALS",
        "root      0     0  -       yes        all      1",
        "alice  1001  1001  staff   no         -        3",
    ]
    assert user_table(LISTING, with_credentials=False).splitlines()[0] == (
        "NAME    UID   GID  GROUPS  SUPERUSER  CALLERS"
    )


def test_group_table_and_whoami() -> None:
    assert group_table(LISTING).splitlines() == [
        "NAME    GID  MEMBERS",
        "root      0  -",
        "alice  1001  -",
        "staff  2000  alice",
    ]
    assert whoami_report(LISTING).splitlines() == [
        "user:      alice",
        "uid:       1001",
        "gid:       1001 (alice)",
        "groups:    1001 (alice), 2000 (staff)",
        "superuser: no",
    ]
