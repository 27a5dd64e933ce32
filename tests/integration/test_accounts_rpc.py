"""The Accounts service through the library (plasmafs.client.accounts): a superuser adds
and removes users and groups and issues and revokes credentials; the namenode applies
each change at once (a new token works, a revoked one is refused, and an open
connection of a revoked credential or a removed user is cut); other users may only
list names; bad input gets typed errors; an insecure namenode refuses the service."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from plasmafs.client import AuthenticationError, Client
from plasmafs.client.accounts import Accounts, accounts
from plasmafs.client.connection import Connection
from plasmafs.core.errors import (
    BusyError,
    ConfigError,
    ExistsError,
    InvalidArgumentError,
    NotFoundError,
    OperationNotPermittedError,
)
from tests.support.accounts import STAFF_GID, TOKENS, UIDS
from tests.support.cli_runner import Pfs, assert_ok
from tests.support.cluster import NamenodeProcess

ALICE_CREDENTIAL = 2  # tests/accounts.py: alice's live credential


async def _closed(conn: Connection, within: float = 10.0) -> None:
    """Wait until `conn` has ended (the namenode cut it), failing after `within` s."""
    deadline = time.monotonic() + within
    while not conn.closed:
        assert time.monotonic() < deadline, "the connection was not cut"
        await asyncio.sleep(0.01)


async def test_revoking_a_credential_cuts_its_idle_connection(fs: Client) -> None:
    root = await accounts(fs)
    async with Client(fs.address, token=TOKENS["alice"]) as alice:
        conn = await alice.connection()
        assert conn.user == "alice"
        revoked = await root.revoke(credential_id=ALICE_CREDENTIAL)
        assert revoked.sessions_cut == 1
        assert [c.credential_id for c in revoked.credentials] == [ALICE_CREDENTIAL]
        assert revoked.credentials[0].revoked is not None
        await _closed(conn)
        with pytest.raises(AuthenticationError, match="credential revoked"):
            await alice.listdir("/")
    with pytest.raises(AuthenticationError, match="credential revoked"):
        async with Client(fs.address, token=TOKENS["alice"]):
            pass
    assert await fs.listdir("/") == []  # root's connection was left alone


async def test_revoking_every_credential_of_a_user(fs: Client) -> None:
    root = await accounts(fs)
    _, second = await root.issue_credential("bob", "second")
    async with (
        Client(fs.address, token=TOKENS["bob"]) as one,
        Client(fs.address, token=second) as two,
    ):
        conns = [await one.connection(), await two.connection()]
        revoked = await root.revoke(user="bob")
        assert revoked.sessions_cut == 2
        assert len(revoked.credentials) == 2
        for conn in conns:
            await _closed(conn)
        with pytest.raises(AuthenticationError):
            await two.listdir("/")
    again = await root.revoke(user="bob")  # nothing left to revoke
    assert (again.credentials, again.sessions_cut) == ((), 0)


async def test_removing_a_user_cuts_its_connections_and_refuses_its_token(fs: Client) -> None:
    root = await accounts(fs)
    async with Client(fs.address, token=TOKENS["bob"]) as bob:
        conn = await bob.connection()
        await root.remove_user("bob")
        await _closed(conn)
        with pytest.raises(AuthenticationError, match="user removed"):
            await bob.listdir("/")
    with pytest.raises(AuthenticationError, match="unknown credential"):
        async with Client(fs.address, token=TOKENS["bob"]):
            pass
    listing = await root.principals()
    assert "bob" not in [u.name for u in listing.users]
    assert UIDS["bob"] not in listing.group("staff").members


async def test_a_new_user_acts_with_its_token(fs: Client) -> None:
    root = await accounts(fs)
    user, token = await root.add_user("carol", groups=["staff"], label="laptop")
    assert (user.name, user.uid, user.gid, user.groups, user.superuser) == (
        "carol",
        1003,
        1003,
        (STAFF_GID,),
        False,
    )
    async with Client(fs.address, token=token) as carol:
        me = await (await accounts(carol)).whoami()
        assert me == user
    listing = await root.principals(credentials=True)
    assert listing.caller == "root"
    assert listing.group("carol").gid == 1003
    assert 1003 in listing.group("staff").members
    (credential,) = [c for c in listing.credentials if c.uid == 1003]
    assert credential.label == "laptop"
    assert credential.live(time.time()) and credential.created is not None
    assert credential.expires is None

    later = time.time() + 3600
    issued, second = await root.issue_credential("carol", "ci", expires=later)
    assert issued.expires == pytest.approx(later, abs=0.01)
    async with Client(fs.address, token=second) as carol:
        assert (await carol.connection()).user == "carol"


async def test_groups(fs: Client) -> None:
    root = await accounts(fs)
    group = await root.add_group("devs", members=["alice", "bob"])
    assert (group.name, group.members) == ("devs", (UIDS["alice"], UIDS["bob"]))
    assert group.gid >= 1000
    fixed = await root.add_group("ops", gid=4242)
    assert (fixed.gid, fixed.members) == (4242, ())
    listing = await root.principals()
    assert group.gid in listing.user("alice").groups
    await root.remove_group("devs")
    listing = await root.principals()
    assert "devs" not in [g.name for g in listing.groups]
    assert group.gid not in listing.user("alice").groups
    with pytest.raises(BusyError, match="primary group"):
        await root.remove_group("alice")
    with pytest.raises(ExistsError):
        await root.add_group("ops")
    with pytest.raises(ExistsError):
        await root.add_group("ops2", gid=4242)
    with pytest.raises(NotFoundError, match="nobody"):
        await root.add_group("team", members=["nobody"])
    assert "team" not in [g.name for g in (await root.principals()).groups]  # all or nothing


async def test_refusals_are_typed(fs: Client) -> None:
    root = await accounts(fs)
    for bad in ("Carol", "1carol", "", "a" * 33, "car ol"):
        with pytest.raises(InvalidArgumentError, match="bad user name"):
            await root.add_user(bad)
    with pytest.raises(InvalidArgumentError, match="bad group name"):
        await root.add_group("-devs")
    with pytest.raises(ExistsError, match="alice"):
        await root.add_user("alice")
    with pytest.raises(ExistsError, match="uid 1001"):
        await root.add_user("carol", uid=1001, gid=STAFF_GID)
    with pytest.raises(NotFoundError, match="nogroup"):
        await root.add_user("carol", gid="nogroup")
    with pytest.raises(InvalidArgumentError, match="future"):
        await root.add_user("carol", expires=time.time() - 1)
    assert "carol" not in [u.name for u in (await root.principals()).users]
    with pytest.raises(InvalidArgumentError, match="label"):
        await root.issue_credential("alice", "tab\there")
    for missing in (root.remove_user("nobody"), root.issue_credential("nobody")):
        with pytest.raises(NotFoundError, match="nobody"):
            await missing
    with pytest.raises(NotFoundError, match="credential 999"):
        await root.revoke(credential_id=999)
    with pytest.raises(NotFoundError):
        await root.revoke(user="nobody")
    with pytest.raises(InvalidArgumentError):
        await root.revoke()
    with pytest.raises(OperationNotPermittedError, match="last superuser"):
        await root.remove_user("root")


async def test_other_users_may_only_list_names(fs: Client) -> None:
    async with Client(fs.address, token=TOKENS["alice"]) as alice:
        mine = await accounts(alice)
        listing = await mine.principals()
        assert listing.caller == "alice"
        assert [u.name for u in listing.users] == ["root", "alice", "bob"]
        assert listing.credentials == ()
        me = await mine.whoami()
        assert (me.uid, me.gid, me.groups) == (UIDS["alice"], UIDS["alice"], (STAFF_GID,))
        with pytest.raises(OperationNotPermittedError, match="only a superuser"):
            await mine.principals(credentials=True)
        refused = [
            mine.add_user("mallory", superuser=True),
            mine.remove_user("bob"),
            mine.add_group("mine"),
            mine.remove_group("staff"),
            mine.issue_credential("root"),
            mine.revoke(user="root"),
        ]
        for call in refused:
            with pytest.raises(OperationNotPermittedError, match="only a superuser"):
                await call
    assert "mallory" not in [u.name for u in (await (await accounts(fs)).principals()).users]


async def test_ls_shows_the_owner_s_name(fs: Client, pfs: Pfs) -> None:
    await fs.mkdir("/home")
    await fs.mkdir("/home/alice")
    await fs.chown("/home/alice", UIDS["alice"], UIDS["alice"])
    async with Client(fs.address, token=TOKENS["alice"]) as alice:
        await alice.create("/home/alice/notes")
    fields = pfs("ls", "-l", "/home/alice").out.split()
    assert fields[3:5] == ["alice", "alice"] and fields[-1] == "notes"
    await fs.chown("/home/alice/notes", 4321, STAFF_GID)
    result = pfs("ls", "-l", "/home/alice")
    assert_ok(result, None)
    assert result.out.split()[3:5] == ["4321", "staff"]


async def test_an_insecure_namenode_has_no_accounts(dsn: str, tmp_path: Path) -> None:
    namenode = NamenodeProcess(dsn, tmp_path, tls=False).start()
    try:
        async with Client(namenode.address, tls=False) as fs:
            service: Accounts = await accounts(fs)
            for call in (service.principals(), service.add_user("carol"), service.revoke(1)):
                with pytest.raises(ConfigError, match=r"accounts need a secure namenode \(TLS\)"):
                    await call
    finally:
        namenode.stop()
