"""A command never writes into its own input or into a file that is not a memory file
(issue 24, item 6): one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsync import Memory
from memsync.cli import main
from memsync.local.targets import looks_like_memory, same_file

_SOURCE = {"type": "entity", "name": "ci", "entityType": "system", "observations": ["nightly"]}


def _memory(path: Path) -> bytes:
    Memory.open(path).add("fact", "The build runs nightly.")
    return path.read_bytes()


def _one_line_refusal(capsys: pytest.CaptureFixture[str], *words: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith("memsync: ")
    assert err.count("\n") == 1
    for word in words:
        assert word in err


def test_export_onto_its_own_memory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    me = tmp_path / "me.jsonl"
    before = _memory(me)
    assert main(["export", "--markdown", str(me), str(me)]) == 2
    _one_line_refusal(capsys, str(me), "is the input file")
    link = tmp_path / "MEMORY.md"
    link.symlink_to(me)
    assert main(["export", "--markdown", str(me), str(link)]) == 2
    _one_line_refusal(capsys, str(link), f"is the input file ({me})")
    assert me.read_bytes() == before
    assert link.is_symlink()


def test_export_onto_another_memory_is_refused_onto_markdown_it_replaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    me, other, md = tmp_path / "me.jsonl", tmp_path / "other.jsonl", tmp_path / "MEMORY.md"
    _memory(me)
    other_bytes = _memory(other)
    assert main(["export", "--markdown", str(me), str(other)]) == 2
    _one_line_refusal(capsys, str(other), "is a memory file")
    assert other.read_bytes() == other_bytes
    md.write_text("# an older export\n")
    assert main(["export", "--markdown", str(me), str(md)]) == 0
    assert "The build runs nightly." in md.read_text()


def test_import_into_its_own_source_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "same.jsonl"
    src.write_text(json.dumps(_SOURCE) + "\n")
    before = src.read_bytes()
    assert main(["import", "--from", "mcp-memory", str(src), str(src)]) == 2
    _one_line_refusal(capsys, str(src), "is the input file")
    alias = tmp_path / "alias.jsonl"
    alias.symlink_to(src)
    assert main(["import", "--from", "mcp-memory", str(src), str(alias)]) == 2
    _one_line_refusal(capsys, "is the input file")
    assert src.read_bytes() == before


@pytest.mark.parametrize("command", ["add", "import", "mcp", "merge", "handoff"])
def test_a_target_that_is_not_a_memory_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text('Shopping: milk, eggs.\n{"not": "a record"}\nCall the plumber')
    before = notes.read_bytes()
    src = tmp_path / "memory.jsonl"
    src.write_text(json.dumps(_SOURCE) + "\n")
    me = tmp_path / "me.jsonl"
    _memory(me)
    argv = {
        "add": ["add", str(notes), "--kind", "fact", "--text", "The build runs nightly."],
        "import": ["import", "--from", "mcp-memory", str(src), str(notes)],
        "mcp": ["mcp", str(notes)],
        "merge": ["merge", str(me), "--into", str(notes)],
        "handoff": ["handoff", str(me), str(notes)],
    }[command]
    assert main(argv) == 2
    _one_line_refusal(capsys, str(notes), "not a memory file", "nothing written")
    assert notes.read_bytes() == before


def test_memory_files_in_every_shape_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty, headless, torn = tmp_path / "empty.jsonl", tmp_path / "h.jsonl", tmp_path / "t.jsonl"
    empty.touch()
    record = {
        "id": "a1b2c3d4e5f6",
        "kind": "fact",
        "text": "x",
        "scope": "global",
        "created_at": "2026-01-01T00:00:00Z",
    }
    headless.write_text("\n" + json.dumps(record) + "\n")  # records without a header
    torn.write_text("{garbage\n" + json.dumps(record) + "\n")  # a bad line first
    for path in (empty, headless, torn):
        assert (
            main(["add", str(path), "--kind", "fact", "--text", "The build runs nightly."]) == 0
        ), path
    capsys.readouterr()
    assert looks_like_memory(empty) is True  # it has its first entry now
    assert same_file(tmp_path / "missing", tmp_path / "missing") is False


def test_merge_into_a_hard_link_of_its_source_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    me, twin = tmp_path / "me.jsonl", tmp_path / "twin.jsonl"
    before = _memory(me)
    twin.hardlink_to(me)
    assert main(["merge", str(me), "--into", str(twin)]) == 2
    _one_line_refusal(capsys, "cannot merge a file into itself")
    assert main(["handoff", str(me), str(twin)]) == 2
    _one_line_refusal(capsys, "cannot hand a file off to itself")
    assert me.read_bytes() == before
