"""`pfs admin user ...`, `pfs admin group ...` and `pfs whoami` against a real namenode.

The `pfs` fixture acts as root (the superuser of the test accounts); `--token-file`
before the command acts as another user. A new token is written to a new file with
mode 0600, never over an existing one; a removed user's or revoked token is refused in
one line; only a superuser changes accounts.
"""

from __future__ import annotations

import stat
from pathlib import Path

from tests.support.accounts import STAFF_GID
from tests.support.cli_runner import Pfs, assert_error, assert_ok


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _rows(out: str) -> dict[str, list[str]]:
    """A table's rows by their first column (the header under its own first word)."""
    return {line.split()[0]: line.split() for line in out.splitlines()}


def test_a_new_user_works_with_its_token_until_removed(pfs: Pfs, tmp_path: Path) -> None:
    token = tmp_path / "carol.token"
    add = pfs("admin", "user", "add", "carol", "--groups", "staff", "--token-file", str(token))
    assert_ok(add, f"added user carol (uid 1003, gid 1003); token in {token}\n")
    assert _mode(token) == 0o600
    as_carol = ("--token-file", str(token))
    assert_ok(
        pfs(*as_carol, "whoami"),
        "user:      carol\n"
        "uid:       1003\n"
        "gid:       1003 (carol)\n"
        f"groups:    1003 (carol), {STAFF_GID} (staff)\n"
        "superuser: no\n",
    )
    # Root makes carol a home; names in chown are the cluster's.
    assert_ok(pfs("mkdir", "/home", "/home/carol"))
    assert_ok(pfs("chown", "carol:carol", "/home/carol"))
    assert_ok(pfs(*as_carol, "mkdir", "/home/carol/work"))
    fields = pfs("ls", "-l", "/home/carol").out.split()
    assert fields[3:5] == ["carol", "carol"] and fields[-1] == "work"

    users = _rows(pfs("admin", "user", "list").out)
    assert users["NAME"] == ["NAME", "UID", "GID", "GROUPS", "SUPERUSER", "CALLERS", "CREDENTIALS"]
    assert users["root"] == ["root", "0", "0", "-", "yes", "all", "1"]
    assert users["carol"] == ["carol", "1003", "1003", "staff", "no", "-", "6"]

    assert_ok(pfs("admin", "user", "del", "carol"), "removed user carol\n")
    assert_error(pfs(*as_carol, "ls", "/"), "ls", "not authenticated", "unknown credential")
    assert "carol" not in _rows(pfs("admin", "user", "list").out)
    # Its files keep the uid, shown as a number now; its group stays.
    assert pfs("ls", "-l", "/home").out.split()[3:5] == ["1003", "carol"]
    assert_error(pfs("admin", "user", "del", "carol"), "admin", "no user named carol")


def test_root_is_the_superuser(pfs: Pfs) -> None:
    assert_ok(
        pfs("whoami"),
        "user:      root\nuid:       0\ngid:       0 (root)\ngroups:    0 (root)\nsuperuser: yes\n",
    )


def test_groups(pfs: Pfs) -> None:
    added = pfs("admin", "group", "add", "devs", "--gid", "3000", "--members", "alice,bob")
    assert_ok(added, "added group devs (gid 3000)\n")
    assert_ok(pfs("admin", "group", "add", "ops"), "added group ops (gid 1000)\n")
    groups = _rows(pfs("admin", "group", "list").out)
    assert groups["NAME"] == ["NAME", "GID", "MEMBERS"]
    assert groups["devs"] == ["devs", "3000", "alice,bob"]
    assert groups["staff"] == ["staff", str(STAFF_GID), "alice,bob"]
    assert groups["ops"] == ["ops", "1000", "-"]
    assert_ok(pfs("admin", "group", "del", "devs"), "removed group devs\n")
    assert "devs" not in _rows(pfs("admin", "group", "list").out)
    assert_error(pfs("admin", "group", "del", "alice"), "admin", "primary group of alice")
    assert_error(pfs("admin", "group", "add", "ops"), "admin", "group ops exists")
    assert_error(pfs("admin", "group", "add", "x", "--members", "nobody"), "admin", "nobody")
    assert_error(pfs("admin", "group", "add", "x", "--gid", "-1"), "admin", "gid must be")


def test_revoke_by_credential_and_by_user(pfs: Pfs, tmp_path: Path, cluster_pki: Path) -> None:
    second = tmp_path / "alice-ci.token"
    issued = pfs(
        "admin", "user", "token", "alice", "--token-file", str(second),
        "--label", "ci", "--expires", "1d",
    )  # fmt: skip
    assert_ok(issued, f"credential 6 of alice written to {second}\n")
    assert _mode(second) == 0o600
    assert pfs("--token-file", str(second), "whoami").lines[0] == "user:      alice"
    credentials = _rows(pfs("admin", "user", "list", "--credentials").out)
    assert credentials["6"][1:3] == ["alice", "ci"] and credentials["6"][-1] == "-"
    assert credentials["2"][-2:] == ["never", "-"]
    assert_ok(
        pfs("admin", "user", "revoke", "--credential", "6"),
        "revoked credential(s) 6; 0 connection(s) cut\n",
    )
    refused = pfs("--token-file", str(second), "ls", "/")
    assert_error(refused, "ls", "not authenticated", "credential revoked")
    assert _rows(pfs("admin", "user", "list").out)["alice"][-1] == "2"

    # 4 is alice's expired credential: revoked too, as every one not revoked yet.
    assert_ok(
        pfs("admin", "user", "revoke", "alice"), "revoked credential(s) 2, 4; 0 connection(s) cut\n"
    )
    first = cluster_pki / "alice.token"
    assert_error(pfs("--token-file", str(first), "ls", "/"), "ls", "credential revoked")
    assert _rows(pfs("admin", "user", "list").out)["alice"][-1] == "-"
    assert_ok(pfs("admin", "user", "revoke", "alice"), "alice has no live credential\n")
    credentials = _rows(pfs("admin", "user", "list", "--credentials").out)
    assert credentials["6"][-1] != "-" and credentials["2"][-1] != "-"


def test_only_a_superuser_changes_accounts(pfs: Pfs, tmp_path: Path, cluster_pki: Path) -> None:
    as_alice = ("--token-file", str(cluster_pki / "alice.token"))
    token = tmp_path / "mallory.token"
    add = pfs(
        *as_alice, "admin", "user", "add", "mallory", "--superuser", "--token-file", str(token)
    )
    assert_error(add, "admin", "add user: only a superuser may do this")
    assert not token.exists()
    assert_error(pfs(*as_alice, "admin", "user", "revoke", "root"), "admin", "only a superuser")
    assert_error(pfs(*as_alice, "admin", "group", "add", "mine"), "admin", "only a superuser")
    assert_error(
        pfs(*as_alice, "admin", "user", "list", "--credentials"), "admin", "only a superuser"
    )
    # Names are anyone's to read.
    users = _rows(pfs(*as_alice, "admin", "user", "list").out)
    assert users["NAME"][-1] == "CALLERS" and "mallory" not in users
    assert "staff" in _rows(pfs(*as_alice, "admin", "group", "list").out)
    assert pfs(*as_alice, "whoami").lines[-1] == "superuser: no"


def test_bad_input_changes_nothing(pfs: Pfs, tmp_path: Path) -> None:
    token = tmp_path / "new.token"
    for bad in ("Dave", "1dave", "da ve", "d" * 33):
        result = pfs("admin", "user", "add", bad, "--token-file", str(token))
        assert_error(result, "admin", "bad user name")
    assert_error(pfs("admin", "group", "add", "Devs"), "admin", "bad group name")
    assert not token.exists()

    existing = tmp_path / "existing.token"
    existing.write_text("keep me\n")
    for args in (("add", "dave"), ("token", "alice")):
        result = pfs("admin", "user", *args, "--token-file", str(existing))
        assert_error(result, "admin", f"{existing} exists", "never overwritten")
    assert existing.read_text() == "keep me\n"
    assert "dave" not in _rows(pfs("admin", "user", "list").out)

    for options, fragment in [
        (("--expires", "30x"), "invalid duration '30x'"),
        (("--expires", "0d"), "invalid duration"),
        (("--uid", "abc"), "uid must be a number"),
        (("--uid", "4294967296"), "uid must be a number"),
        (("--groups", "nogroup"), "no group named nogroup"),
        (("--gid", "4242"), "no group with gid 4242"),
    ]:
        result = pfs("admin", "user", "add", "dave", *options, "--token-file", str(token))
        assert_error(result, "admin", fragment)
    assert not token.exists()
    assert "dave" not in _rows(pfs("admin", "user", "list").out)

    assert_error(pfs("admin", "user", "revoke"), "admin", "give a user NAME or --credential ID")
    assert_error(
        pfs("admin", "user", "revoke", "alice", "--credential", "2"), "admin", "give a user NAME"
    )
    assert_error(pfs("admin", "user", "revoke", "--credential", "x"), "admin", "credential id")
    assert_error(pfs("admin", "user", "revoke", "--credential", "99"), "admin", "no credential 99")
    assert_error(pfs("admin", "user", "revoke", "nobody"), "admin", "no user named nobody")
    assert_error(pfs("admin", "user", "token", "nobody", "--token-file", str(token)), "admin")
    assert not token.exists()
    assert_error(pfs("admin", "user", "del", "root"), "admin", "last superuser")


def test_a_token_file_in_a_new_directory(pfs: Pfs, tmp_path: Path) -> None:
    token = tmp_path / "tokens" / "erin.token"
    assert_ok(pfs("admin", "user", "add", "erin", "--token-file", str(token)), None)
    assert _mode(token) == 0o600
    assert pfs("--token-file", str(token), "whoami").lines[0] == "user:      erin"
