"""Options are taken by their whole names only: a prefix of a long option such as
`-skipTrash` is an unknown option, never that option (a typo must not delete for good)."""

from __future__ import annotations

import pytest

from plasmafs.cli.main import build_parser


@pytest.mark.parametrize(
    "argv",
    [
        ["rm", "-s", "/x"],
        ["rm", "-skip", "/x"],
        ["rm", "--skip", "/x"],
        ["expunge", "-i"],
        ["expunge", "--imm"],
    ],
)
def test_a_prefix_of_an_option_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2


def test_whole_names_and_short_options_with_values_are_taken() -> None:
    parser = build_parser()
    assert parser.parse_args(["rm", "-skipTrash", "/x"]).skip_trash
    assert parser.parse_args(["rm", "--skip-trash", "/x"]).skip_trash
    removal = parser.parse_args(["rm", "-rf", "/x"])
    assert removal.recursive and removal.force and not removal.skip_trash
    assert parser.parse_args(["expunge", "-immediate"]).immediate
    assert parser.parse_args(["mkdir", "-m755", "/d"]).mode == "755"
