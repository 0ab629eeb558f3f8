"""`memsync export --markdown` and `memsync import --from mcp-memory`, API and CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsync import Memory, StateDir, export_markdown, import_mcp_memory
from memsync.cli import main
from memsync.core.timestamps import SECOND
from memsync.local.compaction import compact_file
from memsync.local.fresh import now_us

# As the reference server (modelcontextprotocol/servers, src/memory) writes its file: one
# JSON.stringify()'d object a line, entities first, then relations.
REFERENCE: list[dict[str, Any]] = [
    {
        "type": "entity",
        "name": "John_Smith",
        "entityType": "person",
        "observations": ["Speaks fluent Spanish", "Graduated in 2019", "Prefers morning meetings"],
    },
    {
        "type": "entity",
        "name": "Anthropic",
        "entityType": "organization",
        "observations": ["Founded in 2021", "Based in San Francisco"],
    },
    {"type": "entity", "name": "memsync", "entityType": "project", "observations": []},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    {"type": "relation", "from": "John_Smith", "to": "memsync", "relationType": "maintains"},
]


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state directory of the test's own: the import ledger lives there."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    return tmp_path / "xdg-state" / "memsync"


def _reference(path: Path, objs: list[dict[str, Any]] = REFERENCE) -> Path:
    path.write_text("\n".join(json.dumps(o, separators=(",", ":")) for o in objs))
    return path


def test_import_twice_appends_nothing_the_second_time(tmp_path: Path) -> None:
    src, into = _reference(tmp_path / "memory.jsonl"), tmp_path / "me.jsonl"
    first = import_mcp_memory(src, into)
    assert (first.appended, first.present) == (7, 0)
    size = into.stat().st_size
    second = import_mcp_memory(src, into)
    assert (second.appended, second.present) == (0, 7)
    assert into.stat().st_size == size
    entries = {e.text: e for e in Memory(into).view().entries}
    assert entries["Speaks fluent Spanish"].scope == "entity:John_Smith"
    assert entries["Speaks fluent Spanish"].kind == "fact"
    assert entries["John_Smith works_at Anthropic"].scope == "entity:John_Smith"
    assert "organization" in entries["Founded in 2021"].tags
    assert Memory(into).check().clean
    assert oct(into.stat().st_mode & 0o777) == "0o600"


def test_a_forgotten_import_stays_forgotten_and_new_observations_come_in(tmp_path: Path) -> None:
    src, into = _reference(tmp_path / "memory.jsonl"), tmp_path / "me.jsonl"
    import_mcp_memory(src, into)
    mem = Memory(into)
    gone = next(e for e in mem.view().entries if e.text == "Graduated in 2019")
    mem.forget(gone.id)
    grown = [dict(o) for o in REFERENCE]
    grown[1]["observations"] = [*REFERENCE[1]["observations"], "Makes Claude"]
    result = import_mcp_memory(_reference(src, grown), into)
    assert result.appended == 1
    texts = {e.text for e in mem.view().entries}
    assert "Graduated in 2019" not in texts
    assert "Makes Claude" in texts


DAY = 86_400 * SECOND


def _forget_one_and_compact(into: Path, text: str, *, days_later: int) -> None:
    mem = Memory(into)
    mem.forget(next(e for e in mem.view().entries if e.text == text).id)
    compact_file(into, now=now_us() + days_later * DAY, quiet_seconds=0)


@pytest.mark.parametrize("days_later", [1, 365])  # within the 90-day horizon, and past it
def test_a_forgotten_import_stays_forgotten_after_compaction(
    tmp_path: Path, days_later: int
) -> None:
    """Issue 24, item 7: past the horizon, compaction drops the entry and its tombstone,
    and importing the same source again brought the entry back to life ("appended 1
    entry"); within it, every import after a compaction appended a dead line again."""
    src, into = _reference(tmp_path / "memory.jsonl"), tmp_path / "me.jsonl"
    assert import_mcp_memory(src, into).appended == 7
    _forget_one_and_compact(into, "Graduated in 2019", days_later=days_later)
    compacted = into.read_bytes()
    assert b"Graduated in 2019" not in compacted  # the entry's line is gone
    again = import_mcp_memory(src, into)
    assert (again.appended, again.present, again.forgotten) == (0, 6, 1)
    assert into.read_bytes() == compacted  # nothing new: nothing appended
    assert "Graduated in 2019" not in {e.text for e in Memory(into).view().entries}


def test_an_import_of_what_the_file_already_removes_appends_nothing_without_a_ledger(
    tmp_path: Path, state: Path
) -> None:
    """The tombstone still in the file says so, with the state directory lost."""
    src, into = _reference(tmp_path / "memory.jsonl"), tmp_path / "me.jsonl"
    import_mcp_memory(src, into)
    _forget_one_and_compact(into, "Graduated in 2019", days_later=1)
    assert StateDir(state).import_ledger(into).is_file()
    StateDir(state).import_ledger(into).unlink()
    size = into.stat().st_size
    again = import_mcp_memory(src, into)
    assert (again.appended, again.forgotten) == (0, 1)
    assert into.stat().st_size == size


def test_the_cli_says_what_was_forgotten_since(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, into = _reference(tmp_path / "memory.jsonl"), tmp_path / "me.jsonl"
    assert main(["import", "--from", "mcp-memory", str(src), str(into)]) == 0
    _forget_one_and_compact(into, "Graduated in 2019", days_later=365)
    capsys.readouterr()
    assert main(["import", "--from", "mcp-memory", str(src), str(into)]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{into}: appended 0 entries; 6 already there; 1 forgotten since an earlier import "
        "(not imported again)\n"
    )


def test_a_bad_line_stops_the_import_naming_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objs: list[dict[str, Any]] = [
        *REFERENCE,
        {"type": "relation", "from": "a", "relationType": "knows"},
    ]
    src, into = _reference(tmp_path / "memory.jsonl", objs), tmp_path / "me.jsonl"
    assert main(["import", "--from", "mcp-memory", str(src), str(into)]) == 2
    err = capsys.readouterr().err
    assert err == f"memsync: {src}:6: key 'to' must be a non-empty string\n"
    assert Memory.open(into).view().records == []
    src.write_text("{not json\n")
    assert main(["import", "--from", "mcp-memory", str(src), str(into)]) == 2
    assert f"{src}:1: not JSON" in capsys.readouterr().err


def test_a_secret_observation_is_skipped_never_stored(tmp_path: Path) -> None:
    objs: list[dict[str, Any]] = [{"type": "entity", "name": "ci", "entityType": "system", "observations": [
        "Runs nightly", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789"]}]  # fmt: skip
    src, into = _reference(tmp_path / "memory.jsonl", objs), tmp_path / "me.jsonl"
    result = import_mcp_memory(src, into)
    assert result.appended == 1
    assert len(result.skipped) == 1
    assert b"ghp_" not in into.read_bytes()


@pytest.mark.slow
def test_cli_import_twice(tmp_path: Path) -> None:
    src, into = _reference(tmp_path / "memory.jsonl"), tmp_path / "me.jsonl"
    argv = [sys.executable, "-m", "memsync", "import", "--from", "mcp-memory", str(src), str(into)]
    out = [subprocess.run(argv, capture_output=True, text=True, check=True).stdout for _ in "ab"]
    assert out == [
        f"{into}: appended 7 entries; 0 already there\n",
        f"{into}: appended 0 entries; 7 already there\n",
    ]


def test_export_groups_by_kind_then_scope(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    mem = Memory.open(path)
    mem.add("fact", "CI has two cores.", scope="project:ci")
    p = mem.add("preference", "Short answers.", source="user")
    mem.add("fact", "UTC everywhere.", tags=["time"], confidence=0.8)
    gone = mem.add("lesson", "A lesson later forgotten.")
    mem.forget(gone.id)
    text = export_markdown(path)
    assert text.index("## Preferences") < text.index("## Facts")
    facts = text[text.index("## Facts") :]
    assert facts.index("### global") < facts.index("### project:ci")
    assert "- Short answers. (" in text
    assert "said by the person" in text
    assert p.id in text
    assert "confidence 0.8; tags: `time`" in text
    assert "forgotten" not in text
    assert "## Lessons" not in text


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "me.jsonl", tmp_path / "MEMORY.md"
    Memory.open(path).add("avoid", "Never\nforce-push.")
    assert main(["export", "--markdown", str(path), str(out)]) == 0
    assert "- Never force-push. (" in out.read_text()
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert main(["export", "--markdown", str(path)]) == 0
    assert capsys.readouterr().out == out.read_text()
    assert main(["export", str(path)]) == 2
    assert "--markdown" in capsys.readouterr().err
