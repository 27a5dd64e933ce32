"""Property tests of the name and path rules (plasmafs.core.paths).

The pure part checks `check_name`, `normalize` and `split_canonical` against an
independent model. The namenode part checks that whatever valid names a user picks
come back from readdir exactly and in UTF-8 byte order, and that invalid names are
refused before anything reaches the namespace.

A name is 1..255 UTF-8 bytes without '/' or NUL and is neither '.' nor '..'. In a
*path*, '', '.', '..' and '/' are syntax that `normalize` resolves lexically, so through
the path-taking API only NUL, over-long and non-UTF-8 components can be invalid names;
the namenode itself refuses every non-canonical wire path.
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from plasmafs.client import (
    Client,
    ExistsError,
    FileKind,
    InvalidArgumentError,
    NameTooLongError,
    PlasmaError,
    SyncClient,
)
from plasmafs.client.sync import SyncTransaction
from plasmafs.core import paths
from plasmafs.core.errors import error_from_wire
from tests.support.cluster import NamenodeProcess

# --- the model -----------------------------------------------------------------------------


def name_error(name: str) -> type[PlasmaError] | None:
    """The error `check_name` must raise for `name`, or None if it is a valid name."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        return InvalidArgumentError
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return InvalidArgumentError
    return NameTooLongError if size > 255 else None


def is_valid_name(name: str) -> bool:
    """Valid according to the library itself."""
    try:
        paths.check_name(name)
    except (InvalidArgumentError, NameTooLongError):
        return False
    return True


def utf8_order(names: list[str]) -> list[str]:
    return sorted(names, key=lambda n: n.encode("utf-8"))


def expected_normalize(path: str, cwd: str) -> str | type[PlasmaError]:
    """What `normalize(path, cwd)` must return (or raise), built on posixpath."""
    if path == "" or "\0" in path:
        return InvalidArgumentError
    full = path if path.startswith("/") else cwd + "/" + path
    # Every component is checked as a name, even one a later '..' removes again.
    for part in full.split("/"):
        if part not in ("", ".", ".."):
            error = name_error(part)
            if error is not None:
                return error
    canonical = posixpath.normpath(full)
    if canonical.startswith("//"):  # POSIX keeps a leading '//'; plasmafs does not
        canonical = "/" + canonical.lstrip("/")
    if len(canonical.encode("utf-8")) > paths.MAX_PATH_BYTES:
        return NameTooLongError
    return canonical


# --- strategies ----------------------------------------------------------------------------

# Characters of 1, 2, 3 and 4 UTF-8 bytes, to cross the 255-byte limit at every width.
WIDE = st.sampled_from(["a", "é", "€", "𝄞"])
SURROGATE = st.characters(categories=["Cs"])
TRICKY = st.sampled_from(["/", "\0", ".", " ", "\\", "\n", "\u00ad", "\ufeff", "\U0010ffff"])

any_names = st.one_of(
    st.text(max_size=40),
    st.text(st.one_of(st.characters(), TRICKY, SURROGATE), max_size=20),
    st.lists(WIDE, min_size=60, max_size=260).map("".join),
    st.sampled_from(["", ".", "..", "...", ". ", " ..", "a/b", "/", "\0", "a\0"]),
)
valid_names = st.one_of(
    st.text(min_size=1, max_size=30),
    st.lists(WIDE, min_size=1, max_size=255).map("".join),
).filter(is_valid_name)

components = st.one_of(
    st.sampled_from(["", ".", "..", "a", "b", "é", "𝄞"]),
    st.text(max_size=8),
    st.lists(WIDE, min_size=60, max_size=100).map("".join),
)
user_paths = st.builds(
    lambda lead, parts: lead + "/".join(parts),
    st.sampled_from(["", "/", "//"]),
    st.lists(components, max_size=12),
)
canonical_dirs = st.lists(
    st.text(st.characters(exclude_characters="/\0"), min_size=1, max_size=6).filter(is_valid_name),
    max_size=4,
).map(lambda parts: "/" + "/".join(parts))


# --- pure properties -------------------------------------------------------------------------


@given(any_names)
@example("a" * 255)
@example("é" * 127 + "a")
@example("€" * 85)
@example("𝄞" * 63 + "abc")
@example("a" * 256)
@example("é" * 128)
@example("𝄞" * 64)
@example("a" * 300 + "/")
@example("\udc80")
def test_check_name_accepts_exactly_1_to_255_utf8_bytes_without_slash_nul_or_dots(
    name: str,
) -> None:
    error = name_error(name)
    if error is None:
        assert paths.check_name(name) == name
    else:
        with pytest.raises(PlasmaError) as raised:
            paths.check_name(name)
        assert type(raised.value) is error


@given(user_paths, canonical_dirs)
@example("/a/../..//b/./", "/")
@example("..", "/")
@example("x/../y", "/c/d")
@example("//a", "/")
@example("/" + "/".join(["a" * 255] * 16), "/")
@example("/" + "/".join(["a" * 255] * 15) + "/" + "b" * 254, "/")
def test_normalize_is_idempotent_canonical_and_resolves_lexically(path: str, cwd: str) -> None:
    expected = expected_normalize(path, cwd)
    if not isinstance(expected, str):
        with pytest.raises(PlasmaError) as raised:
            paths.normalize(path, cwd)
        assert type(raised.value) is expected
        return
    out = paths.normalize(path, cwd)
    assert out == expected
    assert paths.normalize(out) == out
    assert paths.normalize(out, "/elsewhere") == out
    parts = paths.split_canonical(out.encode("utf-8"))
    assert "/" + "/".join(parts) == out
    assert all(is_valid_name(p) for p in parts)
    assert paths.encode(path, cwd) == out.encode("utf-8")
    if out != "/":
        parent, name = paths.parent_and_name(out)
        assert paths.join(parent, name) == out and is_valid_name(name)


@given(
    st.one_of(
        user_paths.map(lambda p: p.encode("utf-8", "surrogatepass")),
        st.binary(max_size=20).map(lambda b: b"/" + b),
        st.binary(max_size=20),
    )
)
@example(b"/")
@example(b"")
@example(b"/a/")
@example(b"/a//b")
@example(b"/\xff")
@example(b"/\xed\xa0\x80")  # an encoded surrogate is not UTF-8
def test_split_canonical_accepts_exactly_the_fixpoints_of_normalize(raw: bytes) -> None:
    try:
        text = raw.decode("utf-8")
        canonical = paths.normalize(text).encode("utf-8") == raw
    except (UnicodeDecodeError, InvalidArgumentError, NameTooLongError):
        canonical = False
    if canonical:
        parts = paths.split_canonical(raw)
        assert ("/" + "/".join(parts)).encode("utf-8") == raw
    else:
        with pytest.raises((InvalidArgumentError, NameTooLongError)):
            paths.split_canonical(raw)


# --- against a namenode ------------------------------------------------------------------------

NAMENODE_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
_fresh = itertools.count()


def fresh_directory(client: SyncClient) -> str:
    """A new, empty directory for one hypothesis example."""
    path = f"/example-{next(_fresh)}"
    client.mkdir(path)
    return path


KINDS = st.sampled_from([FileKind.FILE, FileKind.DIRECTORY, FileKind.SYMLINK])


def make(t: SyncTransaction, path: str, kind: FileKind) -> None:
    if kind is FileKind.DIRECTORY:
        t.mkdir(path)
    elif kind is FileKind.FILE:
        t.create(path)
    else:
        t.symlink(path, "target of " + path)


@NAMENODE_SETTINGS
@given(
    entries=st.lists(st.tuples(valid_names, KINDS), max_size=25, unique_by=lambda e: e[0]),
    page=st.integers(min_value=1, max_value=5),
)
def test_valid_names_come_back_from_readdir_exactly_in_utf8_byte_order(
    namenode: NamenodeProcess, entries: list[tuple[str, FileKind]], page: int
) -> None:
    with SyncClient(namenode.address) as client:
        d = fresh_directory(client)
        with client.transaction() as t:
            for name, kind in entries:
                make(t, d + "/" + name, kind)
        expected = utf8_order([name for name, _ in entries])
        kind_of = dict(entries)

        listed, more = client.readdir(d)
        assert [e.name for e in listed] == expected and not more
        assert all(e.kind is kind_of[e.name] for e in listed)
        assert [e.name for e in client.scandir(d, page=page)] == expected
        plus = list(client.scandir(d, plus=True, page=page))
        assert [(e.name, e.attr.kind if e.attr else None) for e in plus] == [
            (e.name, e.kind) for e in listed
        ]
        for name, kind in entries:  # each name resolves back to its own inode
            attr = client.lookup(d + "/" + name)
            assert attr.kind is kind
            assert attr.ino == next(e.ino for e in listed if e.name == name)


@NAMENODE_SETTINGS
@given(
    committed=st.lists(valid_names, max_size=15, unique=True),
    added=st.lists(valid_names, max_size=15, unique=True),
    removed=st.sets(st.integers(min_value=0, max_value=14)),
    page=st.integers(min_value=1, max_value=4),
    cursor=st.one_of(st.just(""), valid_names),
)
def test_readdir_inside_a_transaction_merges_its_changes_in_utf8_byte_order(
    namenode: NamenodeProcess,
    committed: list[str],
    added: list[str],
    removed: set[int],
    page: int,
    cursor: str,
) -> None:
    added = [n for n in added if n not in committed]
    gone = {committed[i] for i in removed if i < len(committed)}
    expected = utf8_order([n for n in committed if n not in gone] + added)
    with SyncClient(namenode.address) as client:
        d = fresh_directory(client)
        with client.transaction() as t:
            for name in committed:
                t.create(d + "/" + name)
        with client.transaction() as t:
            for name in gone:
                t.unlink(d + "/" + name)
            for name in added:
                t.mkdir(d + "/" + name)
            assert [e.name for e in t.scandir(d, page=page)] == expected
            inside, _ = t.readdir(d, after=cursor)
            assert [e.name for e in inside] == [
                n for n in expected if n.encode("utf-8") > cursor.encode("utf-8")
            ]
            # Outside the transaction nothing changed yet.
            assert [e.name for e in client.scandir(d, page=page)] == utf8_order(committed)
        assert [e.name for e in client.scandir(d, page=page)] == expected
        after, _ = client.readdir(d, after=cursor)
        assert [e.name for e in after] == [
            n for n in expected if n.encode("utf-8") > cursor.encode("utf-8")
        ]


# Names that no path syntax can rescue: NUL, more than 255 bytes, not UTF-8 at all.
unusable_names = st.one_of(
    st.builds(lambda a, b: a + "\0" + b, st.text(max_size=5), st.text(max_size=5)),
    st.lists(WIDE, min_size=256, max_size=300).map("".join),
    st.tuples(WIDE, st.integers(min_value=1, max_value=3)).map(
        lambda w: w[0] * (255 // len(w[0].encode()) + w[1])  # just over the limit
    ),
    st.builds(lambda a, s, b: a + s + b, st.text(max_size=5), SURROGATE, st.text(max_size=5)),
).filter(lambda n: "/" not in n and n not in ("", ".", ".."))


@NAMENODE_SETTINGS
@given(name=unusable_names)
def test_invalid_names_are_refused_by_the_client_before_anything_is_created(
    namenode: NamenodeProcess, name: str
) -> None:
    error = name_error(name)
    assert error is not None
    with SyncClient(namenode.address) as client:
        d = fresh_directory(client)
        client.create(d + "/existing")
        before = client.fsstat()
        bad = d + "/" + name
        with pytest.raises(error):
            paths.encode(bad)  # the client's own check, no request needed

        attempts: list[Callable[[], object]] = [
            lambda: client.mkdir(bad),
            lambda: client.mkdir(bad + "/below", parents=True),
            lambda: client.create(bad),
            lambda: client.touch(bad),
            lambda: client.symlink(bad, "/anywhere"),
            lambda: client.rename(d + "/existing", bad),
            lambda: client.lookup(bad),
        ]
        for attempt in attempts:
            with pytest.raises(error):
                attempt()
        with client.transaction() as t:
            with pytest.raises(error):
                t.create(bad)
            t.create(d + "/after")  # the transaction is still usable
        assert client.listdir(d) == ["after", "existing"]
        now = client.fsstat()
        assert (now.files, now.directories, now.symlinks) == (
            before.files + 1,
            before.directories,
            before.symlinks,
        )


async def test_dot_dotdot_empty_and_slash_are_path_syntax_not_names(fs: Client) -> None:
    await fs.mkdir("/d")
    for name in ("", ".", ".."):
        with pytest.raises(InvalidArgumentError):
            paths.check_name(name)
        with pytest.raises(ExistsError):  # /d/ is /d, /d/. is /d, /d/.. is /
            await fs.mkdir("/d/" + name)
    await fs.create("/d/" + "x/")  # the trailing '/' is syntax: this creates /d/x
    await fs.symlink("/d/.//y/../z", "t")  # and this /d/z
    assert await fs.listdir("/d") == ["x", "z"]
    assert await fs.listdir("/") == ["d"]


WIRE_PATHS = [
    (b"", InvalidArgumentError),
    (b"d/x", InvalidArgumentError),
    (b"/d/", InvalidArgumentError),
    (b"/d//x", InvalidArgumentError),
    (b"/d/.", InvalidArgumentError),
    (b"/d/..", InvalidArgumentError),
    (b"/d/../x", InvalidArgumentError),
    (b"/d/a\0b", InvalidArgumentError),
    (b"/d/\xff", InvalidArgumentError),
    (b"/d/\xed\xa0\x80", InvalidArgumentError),
    (b"/d/" + b"x" * 256, NameTooLongError),
    (b"/" + b"/".join([b"a" * 255] * 17), NameTooLongError),
]


@pytest.mark.parametrize(("raw", "error"), WIRE_PATHS, ids=[repr(r[:12]) for r, _ in WIRE_PATHS])
async def test_namenode_refuses_non_canonical_wire_paths(
    fs: Client, raw: bytes, error: type[PlasmaError]
) -> None:
    """The namenode does not trust the client: a raw non-canonical path is refused."""
    await fs.mkdir("/d")
    conn = await fs.connection()
    lookup, looked_up = conn.new_request()
    lookup.lookup.path = raw
    txn = conn.next_txn_id()
    begin, began = conn.new_request()
    begin.txn = txn
    begin.begin.lock_wait_ms = 0
    mkdir, made = conn.new_request()
    mkdir.txn = txn
    mkdir.mkdir.path, mkdir.mkdir.mode = raw, 0o755
    commit, committed = conn.new_request()
    commit.txn = txn
    commit.commit.SetInParent()
    for response in (await looked_up, await made):
        assert response.HasField("error")
        assert type(error_from_wire(response.error.code, response.error.message)) is error
    assert not (await began).HasField("error")
    assert not (await committed).HasField("error")
    assert await fs.listdir("/") == ["d"]
    assert await fs.listdir("/d") == []


async def test_readdir_cursor_containing_nul_is_an_invalid_argument(fs: Client) -> None:
    await fs.create("/a")
    with pytest.raises(InvalidArgumentError):
        await fs.readdir("/", after="a\0")
