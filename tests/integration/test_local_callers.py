"""Requests made for a local caller (what a mount with -o callers sends) on a real
namenode: each acts as the caller's uid, gid and groups, if the connection's user may
act for that uid (a superuser for all, another user for the range an administrator
granted, checked at every request); uid 0 is the superuser; ids without an account are
used as they are."""

from __future__ import annotations

import pytest

from plasmafs.client import Client, LocalCaller, acting_for
from plasmafs.client.accounts import accounts
from plasmafs.core.errors import AccessDeniedError, InvalidArgumentError, OperationNotPermittedError
from tests.support.accounts import STAFF_GID, UIDS
from tests.support.cli_runner import Pfs, assert_error, assert_ok

ALICE = UIDS["alice"]
ANN = LocalCaller(5000, 5000)  # local users of a host, without accounts
BEN = LocalCaller(6000, 6000)
STAFF_MEMBER = LocalCaller(7000, 7000, (STAFF_GID,))


async def test_each_request_acts_as_its_caller(fs: Client) -> None:
    await fs.mkdir("/shared", 0o1777)
    with acting_for(ANN):
        await fs.mkdir("/shared/ann", 0o700)
        made = await fs.create("/shared/ann/notes", 0o600)
    assert (made.uid, made.gid) == (ANN.uid, ANN.gid)
    assert ((await fs.stat("/shared/ann")).uid, (await fs.stat("/shared/ann")).gid) == (5000, 5000)
    with acting_for(BEN):
        with pytest.raises(AccessDeniedError):
            await fs.stat("/shared/ann/notes")
        with pytest.raises(AccessDeniedError):
            await fs.create("/shared/ann/mine")
        with pytest.raises(OperationNotPermittedError):
            await fs.chmod("/shared/ann", 0o777)
    # The root of the host is the superuser; the connection's own user is too.
    with acting_for(LocalCaller(0, 0)):
        await fs.chown("/shared/ann/notes", BEN.uid, BEN.gid)
    with acting_for(BEN), pytest.raises(AccessDeniedError):  # still no search in /shared/ann
        await fs.stat("/shared/ann/notes")
    assert (await fs.stat("/shared/ann/notes")).uid == BEN.uid


async def test_a_callers_groups_count(fs: Client) -> None:
    await fs.mkdir("/team", 0o750)
    await fs.chown("/team", 0, STAFF_GID)
    await fs.create("/team/plan", 0o640)
    await fs.chown("/team/plan", 0, STAFF_GID)
    with acting_for(STAFF_MEMBER):
        assert (await fs.stat("/team/plan")).gid == STAFF_GID
        with pytest.raises(AccessDeniedError):  # read, not write, for the group
            await fs.create("/team/other")
    with acting_for(LocalCaller(7000, 7000)), pytest.raises(AccessDeniedError):
        await fs.stat("/team/plan")


async def test_one_transaction_may_carry_requests_of_several_callers(fs: Client) -> None:
    await fs.mkdir("/shared", 0o1777)
    async with fs.transaction() as t:
        with acting_for(ANN):
            first = t.create("/shared/a")
        with acting_for(BEN):
            second = t.create("/shared/b")
        owners = ((await first).uid, (await second).uid)
    assert owners == (ANN.uid, BEN.uid)
    assert (await fs.stat("/shared/b")).uid == BEN.uid


async def test_a_user_acts_for_the_uids_granted_and_at_once_no_more(
    fs: Client, alice: Client
) -> None:
    await fs.mkdir("/shared", 0o1777)
    with acting_for(ANN), pytest.raises(OperationNotPermittedError, match="act for"):
        await alice.stat("/shared")
    root = await accounts(fs)
    granted = await root.set_callers("alice", (5000, 5999))
    assert granted.act_for_callers == (5000, 5999)
    assert (await root.principals()).user("alice").act_for_callers == (5000, 5999)
    with acting_for(ANN):  # the same connection, the next request
        assert (await alice.create("/shared/by-ann")).uid == ANN.uid
    for outside in (BEN, LocalCaller(0, 0)):
        with acting_for(outside), pytest.raises(OperationNotPermittedError):
            await alice.stat("/shared")
    assert (await alice.create("/shared/by-alice")).uid == ALICE  # acting as itself
    await root.set_callers("alice", None)
    with acting_for(ANN), pytest.raises(OperationNotPermittedError):
        await alice.stat("/shared")
    with pytest.raises(InvalidArgumentError):
        await root.set_callers("alice", (10, 5))
    alices = await accounts(alice)
    with pytest.raises(OperationNotPermittedError):
        await alices.set_callers("alice", (0, 10))


def test_the_cli_grants_and_shows_the_right(pfs: Pfs) -> None:
    assert_ok(pfs("admin", "user", "set", "alice", "--act-for-callers"), None)
    listing = {line.split()[0]: line.split() for line in pfs("admin", "user", "list").lines}
    assert listing["NAME"][5] == "CALLERS"
    assert listing["alice"][5] == "1-4294967295" and listing["root"][5] == "all"
    done = pfs("admin", "user", "set", "alice", "--act-for-callers", "2000-2999")
    assert done.lines[-1] == "alice may act for local callers: uids 2000-2999"
    assert_ok(pfs("admin", "user", "set", "alice", "--no-act-for-callers"), None)
    listing = {line.split()[0]: line.split() for line in pfs("admin", "user", "list").lines}
    assert listing["alice"][5] == "-"
    assert_error(pfs("admin", "user", "set", "alice", "--act-for-callers", "9-3"), "admin", "first")
    assert_error(pfs("admin", "user", "set", "nobody", "--no-act-for-callers"), "admin", "nobody")
