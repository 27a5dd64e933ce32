"""Tokens parse strictly; token files are refused when others may touch them; the token
a process uses comes from --token-file, then PFS_TOKEN_FILE, then client.json."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from plasmafs.core.credentials import (
    TOKEN_FILE_ENV,
    find_token,
    format_token,
    new_secret,
    parse_token,
    read_token_file,
    write_token_file,
)
from plasmafs.core.errors import ConfigError
from plasmafs.core.secret_files import write_private

SECRET = bytes(range(32))
TOKEN = format_token(7, SECRET)


def test_a_token_round_trips_and_hides_its_secret_from_repr() -> None:
    assert TOKEN == "pfs1.7.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
    parsed = parse_token(TOKEN)
    assert parsed is not None
    assert (parsed.credential_id, parsed.secret) == (7, SECRET)
    assert TOKEN.rsplit(".", 1)[1] not in repr(parsed)
    fresh = new_secret()
    assert len(fresh) == 32 and fresh != new_secret()
    assert parse_token(format_token(2**63 - 1, fresh)) is not None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "pfs2.7." + TOKEN.split(".")[2],  # another version
        "pfs1.0." + TOKEN.split(".")[2],  # ids start at 1
        "pfs1.07." + TOKEN.split(".")[2],  # a second spelling of 7
        "pfs1.-7." + TOKEN.split(".")[2],
        "pfs1.9223372036854775808." + TOKEN.split(".")[2],  # beyond a bigint
        "pfs1.7",
        TOKEN[:-1],  # 31.x bytes
        TOKEN + "A",
        TOKEN + "=",  # padding
        TOKEN[:-1] + "9",  # unused low bits set: a second spelling of another secret
        TOKEN.replace("A", "+", 1),  # standard base64, not url-safe
        " " + TOKEN,
        TOKEN + "\n",
        TOKEN.replace(".", ":"),
        "pfs1.\uff17." + TOKEN.split(".")[2],  # a full-width 7: int() would take it
    ],
)
def test_malformed_tokens_are_refused(text: str) -> None:
    assert parse_token(text) is None


def test_format_refuses_what_cannot_be_parsed() -> None:
    with pytest.raises(ValueError):
        format_token(0, SECRET)
    with pytest.raises(ValueError):
        format_token(1, SECRET[:31])


def test_a_private_token_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "token"
    write_token_file(path, TOKEN)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text() == TOKEN + "\n"
    assert read_token_file(path) == TOKEN


def test_writing_a_token_file_makes_it_private_even_over_an_open_one(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("old")
    path.chmod(0o644)
    (tmp_path / "token.tmp").write_text("stale")
    (tmp_path / "token.tmp").chmod(0o666)
    write_token_file(path, TOKEN)
    assert path.stat().st_mode & 0o777 == 0o600
    write_private(tmp_path / "sub" / "key", b"k")
    assert (tmp_path / "sub" / "key").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o610, 0o601, 0o666])
def test_a_token_file_others_may_touch_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "token"
    write_token_file(path, TOKEN)
    path.chmod(mode)
    with pytest.raises(ConfigError) as refused:
        read_token_file(path)
    assert str(path) in str(refused.value)
    assert f"mode {mode:04o}" in str(refused.value)
    assert TOKEN not in str(refused.value)


@pytest.mark.parametrize(
    "contents", [b"", b"secret\n", TOKEN.encode() + b"\n" + TOKEN.encode(), b"\xff" * 40]
)
def test_a_token_file_without_one_token_is_refused_without_quoting_it(
    tmp_path: Path, contents: bytes
) -> None:
    path = tmp_path / "token"
    write_private(path, contents)
    with pytest.raises(ConfigError, match="does not hold a plasmafs token") as refused:
        read_token_file(path)
    assert "secret" not in str(refused.value)


def test_missing_and_special_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read token file"):
        read_token_file(tmp_path / "absent")
    directory = tmp_path / "dir"
    directory.mkdir(mode=0o700)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_token_file(directory)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_token_file(fifo)  # refused, not waited on


def test_the_token_comes_from_the_flag_then_the_environment_then_client_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = {name: format_token(n, new_secret()) for n, name in enumerate("xer", 1)}
    files = {}
    for name, token in tokens.items():
        files[name] = tmp_path / name
        write_token_file(files[name], token)
    monkeypatch.delenv(TOKEN_FILE_ENV, raising=False)
    assert find_token(None) is None
    assert find_token(None, recorded=files["r"]) == tokens["r"]
    monkeypatch.setenv(TOKEN_FILE_ENV, "")
    assert find_token(None, recorded=files["r"]) == tokens["r"]
    monkeypatch.setenv(TOKEN_FILE_ENV, str(files["e"]))
    assert find_token(None, recorded=files["r"]) == tokens["e"]
    assert find_token(files["x"], recorded=files["r"]) == tokens["x"]
    monkeypatch.setenv(TOKEN_FILE_ENV, str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="absent"):
        find_token(None, recorded=files["r"])  # a named file that is missing is an error
