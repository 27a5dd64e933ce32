"""Every request handler of the mount answers: a bug inside one becomes EIO (and a log
line) instead of a worker that ends without replying, which left the program that made
the request hanging."""

from __future__ import annotations

import errno
import logging

import pyfuse3
import pytest

from plasmafs.mount.operations import PlasmaOperations, answered


async def test_a_bug_is_answered_with_eio_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def buggy(inode: int) -> int:
        raise AssertionError("an editor without its reader")

    with caplog.at_level(logging.ERROR), pytest.raises(pyfuse3.FUSEError) as raised:
        await answered(buggy)(7)
    assert raised.value.errno == errno.EIO
    assert "buggy failed" in caplog.text and "an editor without its reader" in caplog.text


async def test_errnos_and_results_pass_through() -> None:
    async def missing() -> None:
        raise pyfuse3.FUSEError(errno.ENOENT)

    async def fine(x: int) -> int:
        return x + 1

    with pytest.raises(pyfuse3.FUSEError) as raised:
        await answered(missing)()
    assert raised.value.errno == errno.ENOENT
    assert await answered(fine)(1) == 2


async def test_a_request_without_a_reply_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    async def forget(inodes: list[tuple[int, int]]) -> None:
        raise KeyError(inodes[0][0])

    with caplog.at_level(logging.ERROR):
        assert await answered(forget, replies=False)([(5, 1)]) is None
    assert "forget failed" in caplog.text


def test_every_handler_of_the_mount_is_guarded() -> None:
    for name in ("lookup", "getattr", "setattr", "write", "flush", "release", "forget"):
        assert getattr(PlasmaOperations, name).__wrapped__ is not None, name
