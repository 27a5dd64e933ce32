"""Accounts on real PostgreSQL: the store's refusals, what it keeps of a secret, and the
registry that verifies tokens (loaded from the store, kept current by applied changes)."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from plasmafs.core.credentials import parse_token, secret_digest
from plasmafs.core.errors import (
    AuthenticationError,
    BusyError,
    ExistsError,
    InvalidArgumentError,
    NotFoundError,
)
from plasmafs.namenode.account_store import AccountStore
from plasmafs.namenode.principals import SUPERUSER, Principals
from plasmafs.namenode.store import Store
from tests.support.accounts import (
    ALICE_EXPIRED_TOKEN,
    ALICE_REVOKED_TOKEN,
    ALICE_TOKEN,
    BOB_TOKEN,
    ROOT_TOKEN,
    STAFF_GID,
    insert_test_accounts,
)

ALICE, BOB = 1001, 1002


@pytest.fixture
async def accounts(dsn: str) -> AsyncIterator[AccountStore]:
    """The account store of a database holding the fixed test accounts."""
    conn = await asyncpg.connect(dsn)
    try:
        # Once the template holds them, the per-test copy does too.
        if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM users WHERE name = 'root')"):
            await insert_test_accounts(conn)
    finally:
        await conn.close()
    store = Store(dsn, read_pool_size=2)
    await store.open()
    try:
        yield AccountStore(store)
    finally:
        await store.close()


async def _fetch(dsn: str, query: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


def _refusal(principals: Principals, token: str) -> str:
    with pytest.raises(AuthenticationError) as refused:
        principals.verify(token)
    return str(refused.value)


async def test_the_fixed_tokens_name_their_users_and_groups(accounts: AccountStore) -> None:
    principals = Principals(await accounts.load())
    root = principals.verify(ROOT_TOKEN)
    assert (root.name, root.uid, root.gid, root.superuser) == ("root", 0, 0, True)
    alice = principals.verify(ALICE_TOKEN)
    assert (alice.name, alice.uid, alice.gid, alice.superuser) == ("alice", ALICE, ALICE, False)
    assert alice.groups == {ALICE, STAFF_GID}
    assert (alice.credential_id, alice.expires) == (2, None)
    assert principals.verify(BOB_TOKEN).groups == {BOB, STAFF_GID}
    names = principals.names()
    assert names.users == {0: "root", ALICE: "alice", BOB: "bob"}
    assert names.groups == {0: "root", ALICE: "alice", BOB: "bob", STAFF_GID: "staff"}
    assert (principals.uid_of("bob"), principals.gid_of("staff")) == (BOB, STAFF_GID)
    with pytest.raises(NotFoundError):
        principals.uid_of("mallory")
    assert SUPERUSER.superuser and SUPERUSER.uid == 0


async def test_forged_expired_and_revoked_tokens_are_refused(accounts: AccountStore) -> None:
    principals = Principals(await accounts.load())
    alice_id, bob_secret = parse_token(ALICE_TOKEN), parse_token(BOB_TOKEN)
    assert alice_id is not None and bob_secret is not None
    forged = ALICE_TOKEN.rsplit(".", 1)[0] + "." + BOB_TOKEN.rsplit(".", 1)[1]
    assert _refusal(principals, forged) == "unknown credential"
    assert _refusal(principals, "pfs1.999." + BOB_TOKEN.rsplit(".", 1)[1]) == "unknown credential"
    assert _refusal(principals, ALICE_TOKEN + "x") == "malformed token"
    assert _refusal(principals, "Bearer " + ALICE_TOKEN) == "malformed token"
    assert _refusal(principals, ALICE_EXPIRED_TOKEN) == "credential expired"
    assert _refusal(principals, ALICE_REVOKED_TOKEN) == "credential revoked"
    # Revocation and expiry are told only to a holder of the secret.
    wrong = ALICE_REVOKED_TOKEN.rsplit(".", 1)[0] + "." + BOB_TOKEN.rsplit(".", 1)[1]
    assert _refusal(principals, wrong) == "unknown credential"


async def test_a_credential_expires_at_its_time(accounts: AccountStore) -> None:
    with pytest.raises(InvalidArgumentError, match="future"):
        await accounts.issue_credential(ALICE, "late", time.time() - 1)
    expires = time.time() + 3600
    issued = await accounts.issue_credential(ALICE, "an hour", expires)
    principals = Principals(await accounts.load())
    principal = principals.verify(issued.token)
    assert principal.expires == pytest.approx(expires, abs=1e-5)  # microseconds in SQL
    assert principals.verify(issued.token, now=principal.expires - 1e-3).uid == ALICE
    with pytest.raises(AuthenticationError, match="credential expired"):
        principals.verify(issued.token, now=principal.expires)


async def test_only_the_secret_s_hash_is_stored(accounts: AccountStore, dsn: str) -> None:
    issued = await accounts.issue_credential(BOB, "laptop")
    assert issued.credential_id > 5  # after the fixed ids
    token = parse_token(issued.token)
    assert token is not None and token.credential_id == issued.credential_id
    assert issued.row.secret_sha256 == secret_digest(token.secret)
    rows = await _fetch(dsn, "SELECT *, credentials::text AS whole FROM credentials")
    mine = [r for r in rows if r["credential_id"] == issued.credential_id]
    assert len(mine) == 1
    assert bytes(mine[0]["secret_sha256"]) == secret_digest(token.secret)
    assert mine[0]["label"] == "laptop"
    encoded = issued.token.rsplit(".", 1)[1]
    for row in rows:
        for value in (row["whole"], bytes(row["secret_sha256"]), row["label"]):
            text = value if isinstance(value, str) else value.hex()
            assert token.secret.hex() not in text
            assert encoded not in text
            assert base64.b64encode(token.secret).decode() not in text
    assert Principals(await accounts.load()).verify(issued.token).name == "bob"


async def test_revocation_applies_in_memory_and_in_the_database(accounts: AccountStore) -> None:
    principals = Principals(await accounts.load())
    laptop = await accounts.issue_credential(BOB, "laptop")
    principals.put_credentials([laptop.row])
    assert principals.verify(laptop.token).credential_id == laptop.credential_id
    revoked = await accounts.revoke_credential(laptop.credential_id)
    assert revoked.revoked is not None
    assert (await accounts.revoke_credential(laptop.credential_id)) == revoked  # no change
    principals.put_credentials([revoked])
    assert _refusal(principals, laptop.token) == "credential revoked"
    assert principals.verify(BOB_TOKEN).uid == BOB
    every = await accounts.revoke_user_credentials(BOB)
    assert [c.credential_id for c in every] == [3]
    principals.put_credentials(every)
    assert _refusal(principals, BOB_TOKEN) == "credential revoked"
    assert await accounts.revoke_user_credentials(BOB) == ()
    assert principals.rows() == await accounts.load()
    with pytest.raises(NotFoundError):
        await accounts.revoke_credential(999)
    with pytest.raises(NotFoundError):
        await accounts.revoke_credential(0)


async def test_removing_a_user_removes_its_credentials_and_memberships(
    accounts: AccountStore, dsn: str
) -> None:
    principals = Principals(await accounts.load())
    cut = await accounts.remove_user(ALICE)
    assert cut == (2, 4)  # the live and the expired one; the revoked one needs no cut
    principals.remove_user(ALICE)
    for loaded in (principals, Principals(await accounts.load())):
        assert _refusal(loaded, ALICE_TOKEN) == "unknown credential"
        assert loaded.verify(BOB_TOKEN).groups == {BOB, STAFF_GID}
        assert ALICE not in loaded.names().users
    assert await _fetch(dsn, "SELECT 1 FROM credentials WHERE uid = $1", ALICE) == []
    assert await _fetch(dsn, "SELECT 1 FROM group_members WHERE uid = $1", ALICE) == []
    assert principals.rows() == await accounts.load()
    # Its own group stays, and can go now that no user has it as primary group.
    await accounts.remove_group(ALICE)
    with pytest.raises(NotFoundError):
        await accounts.remove_user(ALICE)


async def test_duplicates_are_refused(accounts: AccountStore) -> None:
    with pytest.raises(ExistsError, match="user alice exists"):
        await accounts.add_user("alice", uid=4000)
    with pytest.raises(ExistsError, match="uid 1001 is taken"):
        await accounts.add_user("carol", uid=ALICE, gid=STAFF_GID)
    with pytest.raises(ExistsError, match="group staff exists"):
        await accounts.add_group("staff")
    with pytest.raises(ExistsError, match="gid 2000 is taken"):
        await accounts.add_group("devs", STAFF_GID)
    with pytest.raises(ExistsError, match="gid 2000 is taken"):
        await accounts.add_user("dave", uid=STAFF_GID)  # its own group would take gid 2000
    rows = await accounts.load()
    assert {u.name for u in rows.users} == {"root", "alice", "bob"}
    assert {g.name for g in rows.groups} == {"root", "alice", "bob", "staff"}


async def test_unknown_accounts_are_not_found(accounts: AccountStore) -> None:
    with pytest.raises(NotFoundError):
        await accounts.remove_user(4242)
    with pytest.raises(NotFoundError):
        await accounts.remove_group(4242)
    with pytest.raises(NotFoundError):
        await accounts.issue_credential(4242)
    with pytest.raises(NotFoundError):
        await accounts.revoke_user_credentials(4242)
    with pytest.raises(NotFoundError, match="no group with gid 4242"):
        await accounts.add_members(4242, [ALICE])
    with pytest.raises(NotFoundError, match="no user with uid 4242"):
        await accounts.add_members(STAFF_GID, [ALICE, 4242])
    with pytest.raises(NotFoundError, match="no group with gid 4242"):
        await accounts.add_user("carol", groups=[STAFF_GID, 4242])
    with pytest.raises(NotFoundError, match="no group with gid 4242"):
        await accounts.add_user("carol", gid=4242)
    rows = await accounts.load()  # nothing of the refused changes was written
    assert {u.name for u in rows.users} == {"root", "alice", "bob"}
    assert "carol" not in {g.name for g in rows.groups}


BAD_NAMES = ["", "Alice", "1abc", "-x", ".x", "a" * 33, "a b", "alice\n", "\nalice", "é", "a/b"]


@pytest.mark.parametrize("name", BAD_NAMES)
async def test_bad_names_are_refused_by_the_store_and_the_schema(
    accounts: AccountStore, dsn: str, name: str
) -> None:
    with pytest.raises(InvalidArgumentError, match="bad user name"):
        await accounts.add_user(name)
    with pytest.raises(InvalidArgumentError, match="bad group name"):
        await accounts.add_group(name)
    conn = await asyncpg.connect(dsn)
    try:
        with pytest.raises(asyncpg.CheckViolationError, match="groups_name_check"):
            await conn.execute("INSERT INTO groups (gid, name) VALUES (5000, $1)", name)
        with pytest.raises(asyncpg.CheckViolationError, match="users_name_check"):
            await conn.execute("INSERT INTO users (uid, name, gid) VALUES (5000, $1, 0)", name)
    finally:
        await conn.close()


async def test_good_names_and_ids_at_the_limits_are_taken(accounts: AccountStore) -> None:
    for name, uid in (("_", 0x1_0000), ("a" * 32, 2**32 - 1), ("x.y-z_9", 3000)):
        added = await accounts.add_user(name, uid=uid, gid=STAFF_GID)
        assert added.user.name == name and added.group is None
    for value in (-1, 2**32, 2**70):
        with pytest.raises(InvalidArgumentError):
            await accounts.add_user("carol", uid=value)
        with pytest.raises(InvalidArgumentError):
            await accounts.add_group("carol", value)


async def test_a_primary_group_cannot_be_removed(accounts: AccountStore) -> None:
    await accounts.add_user("carol", uid=3001, gid=ALICE)
    with pytest.raises(BusyError, match="primary group of alice, carol"):
        await accounts.remove_group(ALICE)
    principals = Principals(await accounts.load())
    await accounts.remove_group(STAFF_GID)  # only supplementary: its memberships go
    principals.remove_group(STAFF_GID)
    assert principals.verify(ALICE_TOKEN).groups == {ALICE}
    assert principals.rows() == await accounts.load()


async def test_membership_gives_groups(accounts: AccountStore) -> None:
    principals = Principals(await accounts.load())
    devs = await accounts.add_group("devs")
    assert devs.gid == 1000  # the first free gid from 1000
    principals.add_group(devs)
    assert await accounts.add_members(devs.gid, [BOB, 0]) == (0, BOB)
    assert await accounts.add_members(devs.gid, [BOB]) == ()  # already a member
    principals.add_members(devs.gid, [0, BOB])
    assert principals.verify(BOB_TOKEN).groups == {BOB, STAFF_GID, devs.gid}
    assert principals.verify(ALICE_TOKEN).groups == {ALICE, STAFF_GID}
    assert principals.names().groups[devs.gid] == "devs"
    assert principals.rows() == await accounts.load()


async def test_new_users_get_free_ids_and_their_own_group(accounts: AccountStore) -> None:
    principals = Principals(await accounts.load())
    carol = await accounts.add_user("carol", groups=[STAFF_GID, 1003])
    assert carol.user.uid == 1003  # one past the highest uid from 1000
    assert carol.group is not None and (carol.group.gid, carol.group.name) == (1003, "carol")
    assert carol.groups == (STAFF_GID,)  # its own group is its primary one, not a membership
    principals.add_user(carol.user, carol.group, carol.groups)
    principals.add_group(await accounts.add_group("blocker", 1004))
    dave = await accounts.add_user("dave")
    assert (dave.user.uid, dave.user.gid) == (1005, 1005)  # gid 1004 was taken
    principals.add_user(dave.user, dave.group, dave.groups)
    principals.add_group(await accounts.add_group("erin", 7000))
    erin = await accounts.add_user("erin", superuser=True)
    assert (erin.user.uid, erin.user.gid, erin.group) == (1006, 7000, None)
    principals.add_user(erin.user, erin.group, erin.groups)
    issued = await accounts.issue_credential(erin.user.uid, "admin")
    principals.put_credentials([issued.row])
    who = principals.verify(issued.token)
    assert (who.name, who.superuser, who.groups) == ("erin", True, {7000})
    assert principals.rows() == await accounts.load()
