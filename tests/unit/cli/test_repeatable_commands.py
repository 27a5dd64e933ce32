"""A path of a repeatable command (mkdir -p, chmod, chown, touch) cut by a failover is
done again; any other command reports it, one line, and goes on with the next path."""

from __future__ import annotations

import pytest

from plasmafs.cli.exits import FAILOVER_ATTEMPTS, CommandFailed, Reporter
from plasmafs.core.errors import ConnectionLostError, NotActiveError, NotFoundError


class Flaky:
    """An action whose first `cuts` calls for each path are cut by a failover."""

    def __init__(self, cuts: int) -> None:
        self.cuts = cuts
        self.calls: list[str] = []

    async def __call__(self, path: str) -> None:
        self.calls.append(path)
        if self.calls.count(path) <= self.cuts:
            raise (ConnectionLostError if len(self.calls) % 2 else NotActiveError)("cut")


async def test_a_repeatable_action_is_done_again_after_a_failover() -> None:
    action = Flaky(cuts=FAILOVER_ATTEMPTS - 1)
    await Reporter("chmod").each(["/a", "/b"], action, repeatable=True)
    assert action.calls == ["/a"] * FAILOVER_ATTEMPTS + ["/b"] * FAILOVER_ATTEMPTS


async def test_tries_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    action = Flaky(cuts=FAILOVER_ATTEMPTS)
    with pytest.raises(CommandFailed):
        await Reporter("touch").each(["/a"], action, repeatable=True)
    assert action.calls == ["/a"] * FAILOVER_ATTEMPTS
    assert capsys.readouterr().err == "pfs: touch: cut\n"


async def test_other_actions_and_other_errors_are_not_repeated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    action = Flaky(cuts=1)
    with pytest.raises(CommandFailed):
        await Reporter("rm").each(["/a", "/b"], action)
    assert action.calls == ["/a", "/b"]

    async def missing(path: str) -> None:
        raise NotFoundError(f"no such file: {path}")

    with pytest.raises(CommandFailed):
        await Reporter("chmod").each(["/x"], missing, repeatable=True)
    assert capsys.readouterr().err.splitlines()[-1] == "pfs: chmod: no such file: /x"
