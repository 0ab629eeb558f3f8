"""`memsync.cli._quickargs`: the everyday commands parsed without argparse (issue 20) mean
what argparse makes of them, and the plain lines agents run take that quick path."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsync.cli import _build_parser
from memsync.cli._quickargs import SPECS, quick_args
from memsync.errors import UsageError
from tests.helpers.examples import examples

OPTIONS = sorted({a.name for c in SPECS.values() for a in c.args if not a.positional})
WORDS = [
    *OPTIONS,
    *(f"{o}=" for o in OPTIONS),
    "--kind=fact",
    "--json=1",
    "--max-chars=-5",
    "--kin",  # an abbreviation: argparse's to take
    "-h",
    "--help",
    "--",
    "-",
    "-q",
    "--quiet",
    "-v",
    "--verbose",
    "--unknown",
    "fact",
    "lesson",
    "Fact",
    "0.5",
    "1.5",
    "-0.5",
    "10",
    "0",
    "2026-01-01T00:00:00Z",
    "2026-13-01",
    "",
    "x y",
    "a=b",
    "me.jsonl",
    "dir/me.jsonl",
    "retry",
    "add",
]


def _argparse(argv: list[str]) -> dict[str, Any] | None:
    """What argparse makes of `argv`: its namespace, or None for an error or help."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            ns = _build_parser(argv).parse_args(argv)
    except (UsageError, SystemExit):
        return None
    return _comparable(vars(ns))


def _comparable(values: dict[str, Any]) -> dict[str, Any]:
    out = dict(values)
    out["handler"] = out["handler"].__qualname__
    return out


@settings(max_examples=examples(1.0), deadline=None)
@given(
    command=st.sampled_from(sorted(SPECS)),
    words=st.lists(st.sampled_from(WORDS), max_size=8),
)
def test_a_line_parsed_quickly_means_what_argparse_makes_of_it(
    command: str, words: list[str]
) -> None:
    argv = [command, *words]
    quick = quick_args(argv)
    if quick is not None:
        assert _comparable(vars(quick)) == _argparse(argv)


POOLS = {
    "kind": ["fact", "lesson", "fiction"],
    "confidence": ["0.5", "1", "1.5", "-0.1", "x"],
    "min_confidence": ["0.5", "1.5"],
    "limit": ["5", "0", "-1", "many"],
    "max_chars": ["4000", "0", "1e3"],
    "expires_at": ["2026-01-01T00:00:00Z", "2026-13-01"],
    "now": ["2026-01-01T00:00:00+01:00", "yesterday"],
}
OTHER = ["me.jsonl", "x", "", "a=b", "-x", "github.com", "two words"]


@st.composite
def lines(draw: st.DrawFn) -> list[str]:
    """A command line built from a command's declared arguments, with values that are
    mostly fine and sometimes refused, in any order and either option form, and maybe one
    stray word: most are lines the quick path takes."""
    command = SPECS[draw(st.sampled_from(sorted(SPECS)))]
    pieces: list[list[str]] = []
    run: list[str] = []
    for arg in command.args:
        pool = POOLS.get(arg.dest, OTHER)
        if arg.positional:
            count = draw(st.integers(0, 2)) if arg.kwargs.get("nargs") == "*" else 1
            run += [draw(st.sampled_from(pool)) for _ in range(count)]
            continue
        for _ in range(draw(st.integers(0, 2 if arg.kwargs.get("action") else 1))):
            if arg.kwargs.get("action") == "store_true":
                pieces.append([arg.name])
            elif draw(st.booleans()):
                pieces.append([f"{arg.name}={draw(st.sampled_from(pool))}"])
            else:
                pieces.append([arg.name, draw(st.sampled_from(pool))])
    pieces = draw(st.permutations(pieces))
    pieces.insert(draw(st.integers(0, len(pieces))), run)
    words = [w for piece in pieces for w in piece]
    if draw(st.booleans()):
        words.insert(draw(st.integers(0, len(words))), draw(st.sampled_from(WORDS)))
    return [command.name, *words]


@settings(max_examples=examples(1.0), deadline=None)
@given(argv=lines())
def test_a_declared_line_means_the_same_either_way(argv: list[str]) -> None:
    quick = quick_args(argv)
    if quick is not None:
        assert _comparable(vars(quick)) == _argparse(argv)


PLAIN = [
    ["add", "me.jsonl", "--kind", "fact", "--text", "Builds need Python 3.11."],
    ["add", "me.jsonl", "--kind=lesson", "--text=Retry once.", "--tag", "ci", "--tag", "py"],
    [
        "add",
        "me.jsonl",
        "--kind",
        "preference",
        "--text",
        "Tabs.",
        "--scope",
        "github.com",
        "--source",
        "user",
        "--confidence",
        "0.8",
        "--expires-at",
        "2027-01-01T00:00:00Z",
        "--supersedes",
        "abc123",
    ],
    ["forget", "me.jsonl", "abc123"],
    ["prompt", "me.jsonl", "--max-chars", "4000"],
    ["prompt", "--scope", "github.com", "a.jsonl", "b.jsonl"],
    ["prompt"],
    ["recall", "me.jsonl", "retry", "--limit", "5", "--json"],
    ["recall", "--kind", "fact", "--kind", "lesson", "me.jsonl", "flaky tests"],
]


@pytest.mark.parametrize("argv", PLAIN, ids=lambda a: " ".join(a)[:40])
def test_the_lines_agents_run_take_the_quick_path(argv: list[str]) -> None:
    quick = quick_args(argv)
    assert quick is not None
    assert _comparable(vars(quick)) == _argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["add", "me.jsonl", "--kind", "fact"],  # --text is required
        ["add", "me.jsonl", "--kind", "fiction", "--text", "x"],
        ["add", "me.jsonl", "--text", "-x", "--kind", "fact"],  # a value like an option
        ["forget", "me.jsonl"],
        ["forget", "me.jsonl", "a", "b"],
        ["prompt", "--max-chars", "0"],
        ["prompt", "a.jsonl", "--scope", "s", "b.jsonl"],  # split: argparse refuses b.jsonl
        ["recall", "me.jsonl", "retry", "--limit", "many"],
        ["--quiet", "add", "me.jsonl", "--kind", "fact", "--text", "x"],
        ["prompt", "--help"],
        ["show", "me.jsonl"],
    ],
    ids=lambda a: " ".join(a)[:40],
)
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert quick_args(argv) is None
