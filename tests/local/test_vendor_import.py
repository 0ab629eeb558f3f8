"""`memsync import --from claude-auto-memory | gemini-md | agents-md` (issue 22, item 7):
idempotent, the same ids on every machine, what was forgotten stays forgotten, one-line
errors. The source files are tests/helpers/vendor_files.py's (each names its doc)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memsync import Memory
from memsync.cli import main
from memsync.local.importers import import_vendor
from tests.helpers.vendor_files import AGENTS_MD, GEMINI_MD, claude_memory_folder


def _sources(tmp_path: Path) -> dict[str, Path]:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "GEMINI.md").write_text(GEMINI_MD)
    (tmp_path / "AGENTS.md").write_text(AGENTS_MD)
    return {
        "claude-auto-memory": claude_memory_folder(tmp_path / "projects"),
        "gemini-md": tmp_path / "GEMINI.md",
        "agents-md": tmp_path / "AGENTS.md",
    }


def live(path: Path) -> list[dict[str, Any]]:
    return [json.loads(r.raw) for r in Memory.open(path).view().records]


EXPECTED = {"claude-auto-memory": 5, "gemini-md": 3, "agents-md": 5}
"""Entries per source: Claude's 4 topic files and 1 hand-written index bullet (not
`team/`); Gemini's 4 bullets, one of them twice; AGENTS.md's 5 items and paragraphs."""


@pytest.mark.parametrize("fmt", sorted(EXPECTED))
def test_importing_twice_appends_nothing_the_second_time(tmp_path: Path, fmt: str) -> None:
    src = _sources(tmp_path)[fmt]
    into = tmp_path / "me.jsonl"
    first = import_vendor(fmt, src, into)
    assert (first.appended, first.present) == (EXPECTED[fmt], 0)
    data = into.read_bytes()
    second = import_vendor(fmt, src, into)
    assert (second.appended, second.present) == (0, EXPECTED[fmt])
    assert into.read_bytes() == data
    view = live(into)
    assert len(view) == EXPECTED[fmt]
    assert {r["source"] for r in view} == {fmt}


@pytest.mark.parametrize("fmt", sorted(EXPECTED))
def test_two_machines_make_the_same_records(tmp_path: Path, fmt: str) -> None:
    """The same memory imported on two machines is one record (rule 6): merging their
    files appends nothing."""
    a = _sources(tmp_path / "a")[fmt]
    b = _sources(tmp_path / "b")[fmt]
    import_vendor(fmt, a, tmp_path / "a.jsonl")
    import_vendor(fmt, b, tmp_path / "b.jsonl")
    assert main(["merge", str(tmp_path / "a.jsonl"), "--into", str(tmp_path / "b.jsonl")]) == 0
    assert len(live(tmp_path / "b.jsonl")) == EXPECTED[fmt]
    assert {r["id"] for r in live(tmp_path / "a.jsonl")} == {
        r["id"] for r in live(tmp_path / "b.jsonl")
    }


def test_the_project_folder_is_read_as_its_memory_folder(tmp_path: Path) -> None:
    folder = _sources(tmp_path)["claude-auto-memory"]
    result = import_vendor("claude-auto-memory", folder.parent, tmp_path / "me.jsonl")
    assert result.appended == EXPECTED["claude-auto-memory"]


def test_what_was_forgotten_stays_forgotten_and_new_memories_come_in(tmp_path: Path) -> None:
    src = _sources(tmp_path)["gemini-md"]
    into = tmp_path / "me.jsonl"
    import_vendor("gemini-md", src, into)
    mem = Memory.open(into)
    ip = next(r for r in live(into) if "10.0.0.5" in r["text"])
    mem.forget(ip["id"])
    src.write_text(GEMINI_MD + "- The VPN is needed for staging.\n")
    result = import_vendor("gemini-md", src, into)
    assert (result.appended, result.present) == (1, 3)
    texts = {r["text"] for r in live(into)}
    assert "The staging server IP is 10.0.0.5." not in texts
    assert "The VPN is needed for staging." in texts


def test_scope_and_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _sources(tmp_path)["agents-md"]
    into = tmp_path / "me.jsonl"
    argv = ["import", "--from", "agents-md", str(src), str(into), "--scope", "project:web"]
    assert main([*argv, "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["appended"] == 5
    assert not into.exists()
    assert main(argv) == 0
    assert capsys.readouterr().out == f"{into}: appended 5 entries; 0 already there\n"
    assert {r["scope"] for r in live(into)} == {"project:web"}


def test_a_secret_is_skipped_and_listed(tmp_path: Path) -> None:
    src = tmp_path / "GEMINI.md"
    src.write_text(
        "## Gemini Added Memories\n- The token is ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8\n"
        "- Deploys on Fridays.\n"
    )
    result = import_vendor("gemini-md", src, tmp_path / "me.jsonl")
    assert result.appended == 1
    assert result.skipped == [f"{src}:2: looks like a secret (GitHub token)"]
    assert "ghp_" not in (tmp_path / "me.jsonl").read_text()


@pytest.mark.parametrize(
    ("fmt", "make", "message"),
    [
        ("gemini-md", lambda p: p.write_text("# nothing saved\n"), "no '## Gemini Added Memories'"),
        (
            "gemini-md",
            lambda p: p.write_bytes(b"## Gemini Added Memories\n- caf\xe9\n"),
            ":2: not UTF-8",
        ),
        ("agents-md", lambda p: None, "no such file or directory"),
        ("agents-md", lambda p: p.mkdir(), "is a folder, not a file"),
        ("claude-auto-memory", lambda p: p.write_text("x"), "not a directory"),
        (
            "claude-auto-memory",
            lambda p: (p.mkdir(), (p / "a.md").write_text("---\ntype: user\n")),
            "a.md:1: the frontmatter opened with '---' is never closed",
        ),
    ],
)
def test_bad_sources_are_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, make: object, message: str
) -> None:
    src = tmp_path / "src"
    make(src)  # type: ignore[operator]
    into = tmp_path / "me.jsonl"
    assert main(["import", "--from", fmt, str(src), str(into)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memsync: ")
    assert err.count("\n") == 1
    assert message in err
    assert not into.exists()


def test_scope_is_refused_for_mcp_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "memory.jsonl"
    src.write_text("")
    argv = ["import", "--from", "mcp-memory", str(src), str(tmp_path / "m.jsonl"), "--scope", "x"]
    assert main(argv) == 2
    assert "--scope is for Markdown formats" in capsys.readouterr().err
