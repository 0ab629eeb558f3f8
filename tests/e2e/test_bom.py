"""A UTF-8 byte order mark at the start of a file is ignored (SEMANTICS rule 1; issue 23).

Conformance-style: every shared conformance case, with a BOM put before each input file,
must read as without it through `memsync show` and `memsync check`, through a merge of
the inputs into a fresh file, and through compaction (which drops the BOM: the new file
starts with memsync's own header). A peer file in a hub that starts with a BOM is pulled
as without it. A BOM anywhere else stays part of its line, a bad line (case 020 style).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memsync.cli import main
from memsync.core.lines import BOM
from memsync.core.timestamps import parse_ts
from memsync.hub.sync import sync_once
from memsync.hub.transports.memory import InMemoryTransport
from memsync.local.compaction import compact_file
from memsync.local.fresh import header_line
from memsync.local.memory import Memory
from memsync.local.merge import merge_files
from memsync.local.targets import looks_like_memory, require_memory_target
from tests.helpers.paths import SHARED

CASES_DIR = SHARED / "conformance" / "cases"
CASES = [
    pytest.param(folder, id=folder.name)
    for folder in sorted(CASES_DIR.iterdir() if CASES_DIR.is_dir() else [])
    if (folder / "expected.json").is_file()
    and json.loads((folder / "expected.json").read_text(encoding="utf-8"))["error"] is None
]

View = list[tuple[str, int, str]]


def _instant(text: str) -> int:
    us = parse_ts(text)
    assert us is not None
    return us


def _show(capsys: pytest.CaptureFixture[str], files: list[Path], now: str) -> View:
    status = main(["show", *map(str, files), "--now", now, "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    return [(o["id"], _instant(o["created_at"]), o["text"]) for o in json.loads(out)]


def _bad(capsys: pytest.CaptureFixture[str], files: list[Path], now: str) -> list[tuple[str, int]]:
    main(["check", *map(str, files), "--json", "--now", now])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return [(Path(b["file"]).name, b["line"]) for b in json.loads(out)["bad"]]


def _with_bom(folder: Path, tmp: Path) -> tuple[dict[str, Any], list[Path]]:
    doc: dict[str, Any] = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    files = []
    for name in doc["inputs"]:
        path = tmp / name
        path.write_bytes(BOM + (folder / name).read_bytes())
        files.append(path)
    return doc, files


@pytest.mark.parametrize("folder", CASES)
def test_a_case_with_a_bom_reads_as_without_it(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc, files = _with_bom(folder, tmp_path)
    expected = [(e["id"], _instant(e["created_at"]), e["text"]) for e in doc["live"]]
    assert _show(capsys, files, doc["now"]) == expected
    assert _bad(capsys, files, doc["now"]) == [(f, n) for f, n in doc["bad"]]

    # merged into a fresh file: the same view, and no BOM carried into it
    dest = tmp_path / "merged" / "dest.jsonl"
    dest.parent.mkdir()
    merge_files(dest, files, now=_instant(doc["now"]))
    assert _show(capsys, [dest], doc["now"]) == expected
    assert BOM not in dest.read_bytes()

    # compacted: the same view; a rewritten file starts with its header, without the BOM
    for path in files if len(files) == 1 else [dest]:
        result = compact_file(path, now=_instant(doc["now"]), quiet_seconds=0, grace_seconds=0)
        if result.rewritten:
            assert path.read_bytes().startswith(b'{"format"')
    shown = files if len(files) == 1 else [dest]
    assert _show(capsys, shown, doc["now"]) == expected


def test_cases_are_found() -> None:
    assert CASES, f"no conformance cases under {CASES_DIR} (set MEMSYNC_SHARED?)"


ENTRY = b'{"id": "r1", "kind": "fact", "text": "kept", "created_at": "2026-11-01T00:00:00Z"}'
NOW = "2026-11-02T00:00:00Z"


def test_a_bom_at_the_start_of_a_headerless_file_is_ignored_and_elsewhere_is_bad(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(BOM + ENTRY + b"\n" + BOM + ENTRY.replace(b"r1", b"r2") + b"\n")
    assert [r[0] for r in _show(capsys, [path], NOW)] == ["r1"]
    assert _bad(capsys, [path], NOW) == [("m.jsonl", 2)]


def test_memory_add_on_a_file_with_a_bom(tmp_path: Path) -> None:
    """The writer's side: appending keeps the file readable, the BOM still ignored."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(BOM + header_line(_instant(NOW)) + ENTRY + b"\n")
    mem = Memory(path)
    mem.add("fact", "Added after.", now=_instant(NOW))
    assert sorted(e.text for e in mem.view(_instant(NOW)).entries) == ["Added after.", "kept"]
    assert mem.check(_instant(NOW)).bad == []


def test_a_peer_file_with_a_bom_is_pulled_as_without_it(tmp_path: Path) -> None:
    local = tmp_path / "me.jsonl"
    Memory.open(local, now=_instant(NOW)).add("fact", "Mine.", now=_instant(NOW))
    hub = InMemoryTransport()
    peer = BOM + header_line(_instant(NOW), "0123456789abcdef") + ENTRY + b"\n"
    hub.files[("notes", "peer.jsonl")] = bytearray(peer)
    hub.mtimes[("notes", "peer.jsonl")] = 1.0
    report = sync_once(
        memory="notes",
        local=local,
        remote="hub",
        transport=hub,
        replica="me",
        state_dir=tmp_path / "state",
        now=_instant(NOW),
    )
    assert report.ok, report.error
    assert report.bad == []
    data = local.read_bytes()
    assert ENTRY + b"\n" in data
    assert BOM not in data


def test_a_file_with_a_bom_is_a_memory_file_to_write_into(tmp_path: Path) -> None:
    """Commands that refuse to write records into a file that is no memory file take one
    starting with a byte order mark for the memory file it is."""
    with_header = tmp_path / "a.jsonl"
    with_header.write_bytes(BOM + header_line(_instant(NOW)))
    headerless = tmp_path / "b.jsonl"
    headerless.write_bytes(BOM + ENTRY + b"\n")
    for path in (with_header, headerless):
        assert looks_like_memory(path) is True
        require_memory_target(path)
