"""S3 access keys on a real namenode: made and listed by a superuser, their secrets
sealed at rest, signing keys only for a caller that may act for the key's user, and
revocation."""

from __future__ import annotations

import asyncpg
import pytest

from plasmafs.client import Client
from plasmafs.core.errors import NotFoundError, OperationNotPermittedError
from plasmafs.core.s3_signing import signing_key
from tests.support.accounts import STAFF_GID, UIDS
from tests.support.cli_runner import Pfs, assert_error, assert_ok
from tests.support.cluster import NamenodeProcess


async def test_a_key_signs_as_its_user_and_its_secret_is_sealed_at_rest(
    fs: Client, namenode: NamenodeProcess
) -> None:
    keys = await fs.s3_keys()
    key, secret = await keys.create("alice")
    assert key.user == "alice" and key.uid == UIDS["alice"] and key.revoked is None
    assert len(key.access_key_id) == 20 and key.access_key_id.startswith("PFS")
    assert len(secret) == 40
    signing = await keys.signing_key(key.access_key_id, "20261128", "us-east-1")
    assert signing.key == signing_key(secret, "20261128", "us-east-1")
    assert (signing.user, signing.uid, signing.gid) == ("alice", 1001, 1001)
    assert signing.groups == (STAFF_GID,)
    assert signing.key != (await keys.signing_key(key.access_key_id, "20261129", "us-east-1")).key
    conn = await asyncpg.connect(namenode.dsn)
    try:
        stored = await conn.fetchval("SELECT secret_sealed FROM s3_keys")
    finally:
        await conn.close()
    assert secret.encode() not in stored and len(stored) == 12 + 40 + 16
    assert [k.access_key_id for k in await keys.list("alice")] == [key.access_key_id]
    assert await keys.list("bob") == []


async def test_only_a_caller_that_may_act_for_the_user_gets_a_signing_key(
    fs: Client, alice: Client
) -> None:
    key, _ = await (await fs.s3_keys()).create("bob")
    as_alice = await alice.s3_keys()
    with pytest.raises(OperationNotPermittedError, match="may not act for local uid 1002"):
        await as_alice.signing_key(key.access_key_id, "20261128", "us-east-1")
    with pytest.raises(OperationNotPermittedError):
        await as_alice.create("alice")
    await (await fs.accounts()).set_callers("alice", (1002, 1002))
    assert (await as_alice.signing_key(key.access_key_id, "20261128", "eu-1")).uid == 1002


async def test_revoked_and_unknown_keys_sign_nothing(fs: Client) -> None:
    keys = await fs.s3_keys()
    key, _ = await keys.create("alice")
    revoked = await keys.revoke(key.access_key_id)
    assert revoked.revoked is not None
    with pytest.raises(NotFoundError, match="S3 key revoked"):
        await keys.signing_key(key.access_key_id, "20261128", "us-east-1")
    for unknown in ("PFSAAAAAAAAAAAAAAAAA", "AKIAIOSFODNN7EXAMPLE", "x" * 200):
        with pytest.raises(NotFoundError, match="no such S3 key"):
            await keys.signing_key(unknown, "20261128", "us-east-1")


def test_the_cli_prints_a_new_key_pair_in_two_lines(pfs: Pfs) -> None:
    made = pfs("admin", "user", "s3-key", "alice")
    assert_ok(made, None)
    lines = made.out.splitlines()
    assert [line.split(": ")[0] for line in lines] == ["access_key_id", "secret_access_key"]
    access_key_id = lines[0].split(": ")[1]
    listed = pfs("admin", "user", "s3-keys", "alice")
    assert_ok(listed, None)
    assert access_key_id in listed.out and "alice" in listed.out
    assert_ok(
        pfs("admin", "user", "s3-revoke", access_key_id),
        f"revoked S3 key {access_key_id} of alice\n",
    )
    assert_error(pfs("admin", "user", "s3-key", "nobody"), "admin", "no user named nobody")
