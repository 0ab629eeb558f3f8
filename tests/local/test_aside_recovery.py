"""Every reader and writer of a memory file recovers what a killed compaction left aside
(rule 16; issue 24, residual (a)): `recall`, `merge --into` (its destination and its
sources), and a long-lived `Memory` (a server's) at its next read or write, not only at
its start. The state is made as a compaction killed right after its rename leaves it
(tests.helpers.aside)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsync import Memory
from memsync.cli import main
from memsync.local.fulltext import recall
from memsync.local.reading import view_of
from tests.helpers.aside import leave_aside
from tests.helpers.records import entry

LATE = entry("late00000001", 100, text="Appended while the compaction ran.") + b"\n"


def _memory(path: Path, text: str = "Kept by the compaction.") -> Memory:
    mem = Memory.open(path, create=True)
    mem.add("fact", text)
    return mem


@pytest.mark.parametrize("fts", [True, False], ids=["fts", "scan"])
def test_recall_recovers_the_lines_left_aside(tmp_path: Path, fts: bool) -> None:
    path = tmp_path / "me.jsonl"
    _memory(path)
    aside = leave_aside(path, LATE)
    hits = recall(path, "compaction", state_dir=tmp_path / "state", use_fts=fts)
    assert "late00000001" in {h.id for h in hits}
    assert not aside.exists()
    assert path.read_bytes().count(LATE) == 1


def test_the_recall_command_recovers_the_lines_left_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = tmp_path / "me.jsonl"
    _memory(path)
    aside = leave_aside(path, LATE)
    assert main(["recall", str(path), "appended", "--json"]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)] == ["late00000001"]
    assert not aside.exists()


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "no-index"])
def test_merge_into_recovers_its_destinations_lines_left_aside(
    tmp_path: Path, indexed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines left aside are the destination's: recovered into it, once, and the
    merge judged against them (the source holds the same late line: not appended twice)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    dest, src = tmp_path / "me.jsonl", tmp_path / "other.jsonl"
    _memory(dest)
    _memory(src, "From the other file.")
    with open(src, "ab") as f:
        f.write(LATE)
    aside = leave_aside(dest, LATE)
    args = ["merge", str(src), "--into", str(dest)] + ([] if indexed else ["--no-index"])
    assert main(args) == 0
    assert not aside.exists()
    assert dest.read_bytes().count(LATE) == 1
    texts = {r.fields()["text"] for r in view_of([dest]).records}
    assert texts >= {"Appended while the compaction ran.", "From the other file."}


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "no-index"])
def test_merge_into_recovers_its_sources_lines_left_aside(
    tmp_path: Path, indexed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    dest, src = tmp_path / "me.jsonl", tmp_path / "other.jsonl"
    _memory(dest)
    _memory(src, "From the other file.")
    aside = leave_aside(src, LATE)
    args = ["merge", str(src), "--into", str(dest)] + ([] if indexed else ["--no-index"])
    assert main(args) == 0
    assert not aside.exists()
    assert src.read_bytes().count(LATE) == 1
    assert dest.read_bytes().count(LATE) == 1


def test_a_long_lived_memory_recovers_at_its_next_write(tmp_path: Path) -> None:
    """A server opens its `Memory` once: a compaction killed later is recovered by the next
    write through it, before that write (the lines keep their order in the file)."""
    path = tmp_path / "me.jsonl"
    mem = _memory(path)
    aside = leave_aside(path, LATE)
    mem.add("fact", "Written after the kill.")
    assert not aside.exists()
    data = path.read_bytes()
    assert data.count(LATE) == 1
    assert data.index(LATE) < data.index(b"Written after the kill.")


def test_a_long_lived_memory_recovers_at_its_next_prompt(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    mem = _memory(path)
    assert "Appended" not in mem.to_prompt()  # its cache holds the file as it was
    aside = leave_aside(path, LATE)
    assert "Appended while the compaction ran." in mem.to_prompt()
    assert not aside.exists()
