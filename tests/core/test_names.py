"""Names a hub uses as path components (issue 23): those Windows cannot hold."""

from __future__ import annotations

import pytest

from memsync.core.names import valid_name, windows_problem


@pytest.mark.parametrize(
    "name",
    [
        "con",
        "CON",
        "Prn",
        "aux",
        "nul",
        "NUL.jsonl",
        "com1",
        "COM9",
        "lpt1",
        "lpt9.txt",
        "con.tar.gz",
        "notes.",
        "laptop..",
        "com0",
        "lpt0",
    ],
)
def test_names_windows_cannot_hold(name: str) -> None:
    assert windows_problem(name) is not None


@pytest.mark.parametrize(
    "name",
    ["console", "con-1", "nullable", "com10", "lpt", "auxiliary", "me", "laptop.home", "x.y_z"],
)
def test_names_windows_can_hold(name: str) -> None:
    assert valid_name(name)
    assert windows_problem(name) is None


def test_a_trailing_space_is_named() -> None:
    assert windows_problem("notes ") == "ends with a dot or a space, which Windows drops"
