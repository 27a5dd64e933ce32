"""The encoding of an inode's extended attributes and the checks of names and sizes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plasmafs.core import xattrs
from plasmafs.core.errors import (
    InvalidArgumentError,
    NameTooLongError,
    NoSpaceError,
    NotSupportedError,
)
from plasmafs.core.xattrs import XattrSpace

names = st.builds(
    lambda space, rest: space.value + rest,
    st.sampled_from(list(XattrSpace)),
    st.binary(min_size=1, max_size=40).filter(lambda b: b"\0" not in b),
)


@given(st.dictionaries(names, st.binary(max_size=300), max_size=20))
def test_pairs_round_trip(pairs: dict[bytes, bytes]) -> None:
    blob = xattrs.encode(pairs)
    assert (blob is None) == (not pairs)
    assert xattrs.decode(blob) == pairs


def test_names_and_limits() -> None:
    assert xattrs.space_of(b"user.a") is XattrSpace.USER
    assert xattrs.space_of(b"security.selinux") is XattrSpace.SECURITY
    for name, error in (
        (b"system.posix_acl_access", NotSupportedError),
        (b"user", NotSupportedError),
        (b"user.", InvalidArgumentError),
        (b"user.a\0b", InvalidArgumentError),
        (b"user." + b"x" * 251, NameTooLongError),
    ):
        with pytest.raises(error):
            xattrs.space_of(name)
    xattrs.check_value(b"v" * xattrs.MAX_VALUE)
    with pytest.raises(NoSpaceError):
        xattrs.check_value(b"v" * (xattrs.MAX_VALUE + 1))
    with pytest.raises(NoSpaceError):
        xattrs.encode({b"user.a": b"v" * xattrs.MAX_VALUE, b"user.b": b"v" * xattrs.MAX_VALUE})
