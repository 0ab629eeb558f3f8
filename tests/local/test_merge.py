"""`memsync merge` and the merge engine (SEMANTICS rules 1, 4 to 7, 13 and 14), through the
command line (`main([...])` with capsys) and the library's plan/apply split.

Every test sets `XDG_STATE_HOME` to its own directory, so that the persistent merge
index never lands in the real home.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memsync.cli import main
from memsync.config import default_state_dir
from memsync.core.lines import Header, classify, split_complete
from memsync.core.merge import plan_merge
from memsync.core.records import Record
from memsync.core.timestamps import parse_ts
from memsync.local.fileindex import FileIndex
from memsync.local.memory import Memory
from memsync.local.merge import apply_merge, plan_file_merge
from memsync.local.reading import view_of
from memsync.local.statedir import StateDir
from tests.helpers.common import JSON_KEYS

NOW = "2026-12-01T00:00:00Z"
_NOW_US = parse_ts(NOW)
assert _NOW_US is not None
NOW_US: int = _NOW_US
HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}'
OTHER_HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-02T00:00:00Z"}'

Run = tuple[int, str, str]


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> Run:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def merge_json(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> dict[str, Any]:
    status, out, err = run(capsys, "merge", *argv, "--json")
    assert status == 0, err
    doc: dict[str, Any] = json.loads(out)
    assert set(doc) == JSON_KEYS
    return doc


def entry(rid: str, created_at: str, text: str = "t", **extra: Any) -> bytes:
    obj = {"id": rid, "kind": "fact", "text": text, "created_at": created_at, **extra}
    return json.dumps(obj).encode()


def tomb(rid: str, created_at: str) -> bytes:
    return json.dumps({"id": rid, "deleted": True, "created_at": created_at}).encode()


def write(path: Path, *lines: bytes, header: bytes | None = HEADER) -> Path:
    """A memory file holding `lines` after a header (the same header bytes in every file
    unless given: a merge counts a line DEST holds byte for byte as a duplicate)."""
    path.write_bytes(b"".join(raw + b"\n" for raw in ([header] if header else []) + list(lines)))
    return path


def append(path: Path, *lines: bytes) -> None:
    with open(path, "ab") as f:
        f.write(b"".join(raw + b"\n" for raw in lines))


def lines_of(path: Path) -> list[bytes]:
    lines, _ = split_complete(path.read_bytes())
    return lines


def records_of(path: Path) -> list[Record]:
    return [r for raw in lines_of(path) if type(r := classify(raw)) is Record]


def live(path: Path, now: str = NOW) -> list[tuple[str, int, str]]:
    """The view as (id, created_at instant, text)."""
    return [(r.id, r.ts, r.fields()["text"]) for r in view_of([path], parse_ts(now)).records]


def ids(n: int, prefix: str = "a") -> list[str]:
    return [f"{prefix}{i:011d}" for i in range(n)]


NO_INDEX = pytest.mark.parametrize("flags", [(), ("--no-index",)], ids=["indexed", "no-index"])


# --- the command line ---------------------------------------------------------------------


@NO_INDEX
def test_json_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    a, b = (
        entry("a00000000001", "2026-11-01T00:00:00Z"),
        entry("a00000000002", "2026-11-02T00:00:00Z"),
    )
    src = write(tmp_path / "src.jsonl", a, b)
    dest = tmp_path / "dest.jsonl"
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)
    assert doc == {
        "dest": str(dest),
        "appended": 2,
        "bytes_appended": len(a) + len(b) + 2,
        "repeated": 0,
        "duplicates": 0,
        "beaten": 0,
        "held": [],
        "withheld": [],
        "bad": [],
        "twins": [],
        "dry_run": False,
    }
    assert lines_of(dest)[1:] == [a, b]


@NO_INDEX
def test_human_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    older, newer = (
        entry("a00000000001", "2026-11-01T00:00:00Z", "old"),
        entry("a00000000001", "2026-11-02T00:00:00Z", "new"),
    )
    other = entry("a00000000002", "2026-11-01T00:00:00Z")
    src = write(tmp_path / "src.jsonl", older, other, header=OTHER_HEADER)
    dest = write(tmp_path / "dest.jsonl", newer)
    status, out, err = run(capsys, "merge", src, "--into", dest, "--now", NOW, *flags)
    assert (status, err) == (0, "")
    assert out == (
        f"{dest}: appended 1 record(s) ({len(other) + 1} bytes); "
        "0 duplicate(s) and 1 beaten version(s) skipped\n"
    )
    status, out, err = run(capsys, "merge", src, "--into", dest, "--now", NOW, "--dry-run", *flags)
    assert status == 0
    assert out.startswith(f"{dest}: would append 0 record(s) (0 bytes); ")


@NO_INDEX
def test_dest_is_created_when_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """A missing DEST (even in a missing directory) is created with mode 0600 and a header
    line first (rule 2), then the records."""
    rec = entry("a00000000001", "2026-11-01T00:00:00Z")
    src = write(tmp_path / "src.jsonl", rec)
    dest = tmp_path / "new" / "dir" / "dest.jsonl"
    assert merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)["appended"] == 1
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    header, *rest = lines_of(dest)
    parsed = classify(header)
    assert isinstance(parsed, Header)
    assert parsed.format == "agent-memory/0.1"
    assert rest == [rec]


@NO_INDEX
def test_dry_run_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    src = write(tmp_path / "src.jsonl", entry("a00000000001", "2026-11-01T00:00:00Z"))
    missing = tmp_path / "missing.jsonl"
    doc = merge_json(capsys, src, "--into", missing, "--now", NOW, "--dry-run", *flags)
    assert (doc["appended"], doc["dry_run"]) == (1, True)
    assert not missing.exists()
    dest = write(tmp_path / "dest.jsonl", entry("a00000000002", "2026-11-01T00:00:00Z"))
    before = dest.read_bytes()
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW, "--dry-run", *flags)
    assert (doc["appended"], doc["dry_run"]) == (1, True)
    assert dest.read_bytes() == before
    # A dry run leaves no cursor behind: the real merge still appends the record.
    assert merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)["appended"] == 1


@NO_INDEX
def test_nothing_is_appended_when_nothing_is_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """Merging again appends nothing; nor does a source holding only what DEST holds, byte
    for byte or written another way (`Z`, `.000Z`, `+01:00`: one instant, rule 6)."""
    rid = "a00000000001"
    src = write(tmp_path / "src.jsonl", entry(rid, "2026-11-01T07:51:02Z", "x"))
    dest = tmp_path / "dest.jsonl"
    assert merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)["appended"] == 1
    before = dest.read_bytes()
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)
    assert (doc["appended"], doc["bytes_appended"]) == (0, 0)
    other = write(
        tmp_path / "other.jsonl",
        entry(rid, "2026-11-01T07:51:02.000Z", "x"),
        entry(rid, "2026-11-01T08:51:02+01:00", "x"),
        json.dumps({"created_at": "2026-11-01T07:51:02Z", "text": "x", "kind": "fact", "id": rid})
        .replace(", ", ",")
        .encode(),
    )
    doc = merge_json(capsys, other, "--into", dest, "--now", NOW, *flags)
    assert (doc["appended"], doc["duplicates"], doc["twins"]) == (0, 3, [])
    assert dest.read_bytes() == before


@NO_INDEX
def test_bad_lines_are_reported_and_not_merged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """Rule 4: a bad line of a source is reported with its file and line number and never
    reaches DEST; blank lines and a torn last line (rule 1) are not reported."""
    good = [
        entry("a00000000001", "2026-11-01T00:00:00Z"),
        entry("a00000000002", "2026-11-02T00:00:00Z"),
    ]
    src = tmp_path / "src.jsonl"
    src.write_bytes(
        HEADER + b"\n"
        + good[0] + b"\n"
        + b'{"id": "a00000000003", "kind": "fact", "text": "unterminated\n'
        + b"\n"
        + b'{"id": "a00000000004", "kind": "opinion", "text": "t", "created_at": "2026-11-01T00:00:00Z"}\n'
        + good[1] + b"\n"
        + b'{"id": "a00000000005", "kind": "fa'
    )  # fmt: skip
    dest = tmp_path / "dest.jsonl"
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)
    assert doc["appended"] == 2
    assert [(b["file"], b["line"]) for b in doc["bad"]] == [(str(src), 3), (str(src), 5)]
    assert all(b["reason"] for b in doc["bad"])
    assert lines_of(dest)[1:] == good
    status, out, _ = run(
        capsys, "merge", src, "--into", tmp_path / "d2.jsonl", "--now", NOW, *flags
    )
    assert status == 0
    assert f"bad line: {src}:3: " in out
    assert f"bad line: {src}:5: " in out
    assert out.count("(not merged)") == 2


@NO_INDEX
def test_twins_are_both_kept_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """Rule 7: same id and instant, different content: both lines are kept, the pair is
    reported, and rule 9's tie-break (the greater canonical JSON) decides the view."""
    rid = "a00000000001"
    mine, theirs = (
        entry(rid, "2026-11-01T00:00:00Z", "apple"),
        entry(rid, "2026-11-01T01:00:00+01:00", "zebra"),
    )
    dest = write(tmp_path / "dest.jsonl", mine)
    src = write(tmp_path / "src.jsonl", theirs)
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)
    assert doc["appended"] == 1
    assert doc["twins"] == [{"id": rid, "created_at": "2026-11-01T00:00:00.000Z"}]
    assert lines_of(dest)[1:] == [mine, theirs]
    assert [text for _, _, text in live(dest)] == ["zebra"]
    other = write(tmp_path / "other.jsonl", mine)
    status, out, _ = run(capsys, "merge", src, "--into", other, "--now", NOW, *flags)
    assert status == 0
    assert (
        f"twins: id {rid} at 2026-11-01T00:00:00.000Z has two different contents (both kept)" in out
    )
    # Both are in OTHER now: merging again appends and reports nothing.
    doc = merge_json(capsys, dest, "--into", other, "--now", NOW, *flags)
    assert (doc["appended"], doc["twins"]) == (0, [])


@NO_INDEX
def test_older_versions_are_beaten_and_appends_are_in_time_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """Rule 14: a version older than DEST's current version of its id, or than a tombstone
    DEST holds, is not appended; what is appended comes in (created_at, id) order."""
    dest = write(
        tmp_path / "dest.jsonl",
        entry("a00000000001", "2026-11-05T00:00:00Z", "current"),
        tomb("a00000000002", "2026-11-05T00:00:00Z"),
    )
    src = write(
        tmp_path / "src.jsonl",
        entry("a00000000009", "2026-11-09T00:00:00Z"),
        entry("a00000000001", "2026-11-04T00:00:00Z", "older"),
        entry("a00000000002", "2026-11-05T00:00:00Z", "deleted at the same instant"),
        entry("a00000000003", "2026-11-02T00:00:00Z"),
        entry("a00000000002", "2026-11-06T00:00:00Z", "re-added"),
    )
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)
    assert (doc["appended"], doc["beaten"]) == (3, 2)
    appended = [json.loads(raw) for raw in lines_of(dest)[3:]]
    assert [(o["id"], o["created_at"]) for o in appended] == [
        ("a00000000003", "2026-11-02T00:00:00Z"),
        ("a00000000002", "2026-11-06T00:00:00Z"),
        ("a00000000009", "2026-11-09T00:00:00Z"),
    ]


@NO_INDEX
def test_a_torn_last_line_in_dest_is_terminated_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """Rule 1: DEST ends in a write in progress that will never finish (its writer died):
    a "\n" goes first, so the torn line stays its own bad line instead of swallowing the
    first merged record, and DEST's old bytes are untouched."""
    dest = write(tmp_path / "dest.jsonl", entry("a00000000001", "2026-11-01T00:00:00Z"))
    with open(dest, "ab") as f:
        f.write(b'{"id": "a00000000002", "kind": "fa')
    before = dest.read_bytes()
    new = entry("a00000000003", "2026-11-02T00:00:00Z")
    src = write(tmp_path / "src.jsonl", new)
    assert merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)["appended"] == 1
    assert dest.read_bytes() == before + b"\n" + new + b"\n"
    assert [r.id for r in records_of(dest)] == ["a00000000001", "a00000000003"]


def test_merging_a_file_into_itself_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "m.jsonl", entry("a00000000001", "2026-11-01T00:00:00Z"))
    other = write(tmp_path / "other.jsonl", entry("a00000000002", "2026-11-01T00:00:00Z"))
    before = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    cases: list[tuple[list[str | Path], str | Path]] = [
        ([path], path),
        ([other, "./m.jsonl"], path),
        ([link], "m.jsonl"),
    ]
    for sources, into in cases:
        for flags in ([], ["--no-index"]):
            status, out, err = run(capsys, "merge", *sources, "--into", into, *flags)
            assert (status, out) == (2, "")
            assert err == f"memsync: {into}: cannot merge a file into itself\n"
    assert path.read_bytes() == before


def test_missing_source_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "merge", tmp_path / "nope.jsonl", "--into", tmp_path / "d.jsonl")
    assert (status, out) == (2, "")
    assert err == f"memsync: {tmp_path / 'nope.jsonl'}: no such memory file\n"
    assert not (tmp_path / "d.jsonl").exists()


# --- clock skew: records dated too far ahead are held -----------------------------------


@NO_INDEX
def test_a_future_record_is_held_until_its_time_comes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """A record dated more than 24 h ahead of `--now` is held: reported, not merged, and
    not dropped either: a later merge (with a later `--now`) appends it once its time has
    come, and the merges in between keep reporting it."""
    future = entry("f00000000001", "2026-12-03T00:00:00Z", "from a clock two days ahead")
    normal = entry("a00000000001", "2026-11-30T00:00:00Z")
    src = write(tmp_path / "src.jsonl", future, normal)
    dest = tmp_path / "dest.jsonl"
    held = [
        {
            "file": str(src),
            "line": 2,
            "id": "f00000000001",
            "created_at": "2026-12-03T00:00:00.000Z",
        }
    ]
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)
    assert (doc["appended"], doc["held"]) == (1, held)
    assert lines_of(dest)[1:] == [normal]
    status, out, _ = run(
        capsys, "merge", src, "--into", dest, "--now", "2026-12-01T12:00:00Z", *flags
    )
    assert status == 0
    assert (
        f"held: {src}:2: id f00000000001 dated 2026-12-03T00:00:00.000Z, more than 24 h ahead "
        "of this clock; it will be merged when its time comes"
    ) in out
    assert lines_of(dest)[1:] == [normal]
    doc = merge_json(capsys, src, "--into", dest, "--now", "2026-12-02T00:00:00Z", *flags)
    assert (doc["appended"], doc["held"]) == (1, [])
    assert lines_of(dest)[1:] == [normal, future]
    doc = merge_json(capsys, src, "--into", dest, "--now", "2026-12-04T00:00:00Z", *flags)
    assert (doc["appended"], doc["held"]) == (0, [])


@NO_INDEX
def test_the_24_hour_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    at_limit = entry("f00000000001", "2026-12-02T00:00:00Z")
    past_limit = entry("f00000000002", "2026-12-02T00:00:00.001Z")
    src = write(tmp_path / "src.jsonl", at_limit, past_limit)
    dest = tmp_path / "dest.jsonl"
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW, *flags)
    assert doc["appended"] == 1
    assert [h["id"] for h in doc["held"]] == ["f00000000002"]
    assert lines_of(dest)[1:] == [at_limit]


@NO_INDEX
def test_replicas_report_the_same_future_record_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """Two replicas holding one future record (written two ways) report it with the same
    id and created_at, whichever way its line spells the instant, and neither takes it in."""
    a = write(tmp_path / "a.jsonl", entry("f00000000001", "2026-12-03T00:00:00Z", "x"))
    b = write(tmp_path / "b.jsonl", entry("f00000000001", "2026-12-03T01:00:00.000+01:00", "x"))
    before = a.read_bytes(), b.read_bytes()
    into_b = merge_json(capsys, a, "--into", b, "--now", NOW, *flags)
    into_a = merge_json(capsys, b, "--into", a, "--now", NOW, *flags)
    fresh = [
        merge_json(capsys, src, "--into", tmp_path / f"fresh-{src.name}", "--now", NOW, *flags)
        for src in (a, b)
    ]
    reports = [
        [(h["id"], h["created_at"]) for h in doc["held"]] for doc in (into_b, into_a, *fresh)
    ]
    assert reports == [[("f00000000001", "2026-12-03T00:00:00.000Z")]] * 4
    assert (a.read_bytes(), b.read_bytes()) == before
    later = "2026-12-03T00:00:00Z"
    assert merge_json(capsys, a, "--into", b, "--now", later, *flags)["appended"] == 0
    assert merge_json(capsys, b, "--into", a, "--now", later, *flags)["appended"] == 0


# --- the persistent index ---------------------------------------------------------------


def test_no_index_and_indexed_give_the_same_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rid = ids(6)
    dest_lines = [
        entry(rid[0], "2026-11-05T00:00:00Z", "current"),
        tomb(rid[1], "2026-11-05T00:00:00Z"),
        entry(rid[2], "2026-11-01T00:00:00Z", "apple"),
    ]
    src_lines = [
        entry(rid[0], "2026-11-04T00:00:00Z", "older"),
        entry(rid[1], "2026-11-04T00:00:00Z", "deleted"),
        entry(rid[2], "2026-11-01T00:00:00.000Z", "zebra"),
        entry(rid[3], "2026-11-02T00:00:00Z", supersedes=rid[0]),
        b"not json",
        entry(rid[4], "2026-12-05T00:00:00Z", "future"),
        entry(rid[5], "2026-11-03T00:00:00Z", source="user"),
        dest_lines[0],
    ]
    src = write(tmp_path / "src.jsonl", *src_lines)
    indexed = write(tmp_path / "indexed.jsonl", *dest_lines)
    plain = tmp_path / "plain.jsonl"
    shutil.copyfile(indexed, plain)
    for more in ([], [tomb(rid[5], "2026-11-06T00:00:00Z"), entry(rid[0], "2026-11-07T00:00:00Z")]):
        append(src, *more)
        a = merge_json(capsys, src, "--into", indexed, "--now", NOW)
        b = merge_json(capsys, src, "--into", plain, "--now", NOW, "--no-index")
        assert (a.pop("dest"), b.pop("dest")) == (str(indexed), str(plain))
        if not more:
            assert a == b
            assert (a["appended"], a["beaten"], len(a["held"]), len(a["bad"])) == (3, 2, 1, 1)
            assert len(a["twins"]) == 1
        else:
            # The indexed merge reads only the lines the source gained: the plain one
            # meets the old ones again (as duplicates, beaten versions and bad lines).
            same = ("appended", "bytes_appended", "held")
            assert {k: a[k] for k in same} == {k: b[k] for k in same}
            assert (a["appended"], a["duplicates"], a["bad"]) == (2, 0, [])
        assert indexed.read_bytes() == plain.read_bytes()
        assert live(indexed) == live(plain)


def test_indexed_merge_reads_only_new_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], state_home: Path
) -> None:
    """The steady state: after a merge, one record added to SRC costs one line read, not
    SRC again (its old lines would count as duplicates), and DEST's index is current (it
    would read no byte of DEST to catch up)."""
    src = write(tmp_path / "src.jsonl", *(entry(r, "2026-11-01T00:00:00Z") for r in ids(300)))
    dest = tmp_path / "dest.jsonl"
    assert merge_json(capsys, src, "--into", dest, "--now", NOW)["appended"] == 300
    new = entry("b00000000001", "2026-11-02T00:00:00Z")
    append(src, new)
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW)
    assert (doc["appended"], doc["duplicates"]) == (1, 0)
    assert lines_of(dest)[-1] == new
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW)
    assert (doc["appended"], doc["duplicates"]) == (0, 0)
    assert default_state_dir() == state_home / "memsync"
    with FileIndex(dest, StateDir(default_state_dir()).merge_index(dest)) as index:
        assert index.refresh() == 0
        Memory(dest).add("fact", "added by another writer", now=NOW_US)
        assert index.refresh() == len(lines_of(dest)[-1]) + 1
    # The plain merge reads everything: the same outcome, every old line a duplicate.
    plain = merge_json(capsys, src, "--into", dest, "--now", NOW, "--no-index")
    assert (plain["appended"], plain["duplicates"]) == (0, 301)


def test_a_deleted_destination_gets_everything_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: the index remembered how far each source had been read, so merging into
    a destination deleted since (or replaced by a new file) appended nothing."""
    lines = [entry(r, "2026-11-01T00:00:00Z") for r in ids(5)]
    src = write(tmp_path / "src.jsonl", *lines)
    dest = tmp_path / "dest.jsonl"
    assert merge_json(capsys, src, "--into", dest, "--now", NOW)["appended"] == 5
    dest.unlink()
    assert merge_json(capsys, src, "--into", dest, "--now", NOW)["appended"] == 5
    assert lines_of(dest)[1:] == lines
    replacement = write(tmp_path / "replacement.jsonl", lines[0])
    os.replace(replacement, dest)
    doc = merge_json(capsys, src, "--into", dest, "--now", NOW)
    assert (doc["appended"], doc["duplicates"]) == (4, 2)  # a record and the header line
    assert sorted(lines_of(dest)[1:]) == sorted(lines)


# --- plan and apply -------------------------------------------------------------------------


def test_apply_appends_exactly_what_the_plan_lists(tmp_path: Path) -> None:
    dest = write(tmp_path / "dest.jsonl", entry("a00000000001", "2026-11-05T00:00:00Z"))
    src = write(
        tmp_path / "src.jsonl",
        entry("a00000000001", "2026-11-01T00:00:00Z"),
        entry("a00000000002", "2026-11-03T00:00:00Z"),
        entry("a00000000003", "2026-11-02T00:00:00Z"),
    )
    before = dest.read_bytes()
    pending = plan_file_merge(dest, [src], now=NOW_US)
    assert dest.read_bytes() == before
    planned = pending.plan.data()
    assert [r.id for r in pending.plan.append] == ["a00000000003", "a00000000002"]
    result = apply_merge(pending)
    assert dest.read_bytes() == before + planned
    assert (result.appended, result.bytes_appended, result.beaten) == (2, len(planned), 1)
    assert [r.raw for r in result.records] == [r.raw for r in pending.plan.append]


def _merge_in_another_process(src: Path, dest: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "memsync", "merge", str(src), "--into", str(dest), "--now", NOW],
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.parametrize("dest_exists", [True, False], ids=["dest", "no-dest"])
def test_a_plan_applied_late_does_not_duplicate_lines(tmp_path: Path, dest_exists: bool) -> None:
    """Between plan and apply another process appended some of the planned lines (and
    created DEST, when it was missing): `apply_merge` appends only the rest."""
    lines = [entry(r, f"2026-11-0{i + 1}T00:00:00Z") for i, r in enumerate(ids(6))]
    src = write(tmp_path / "src.jsonl", *lines)
    dest = tmp_path / "dest.jsonl"
    if dest_exists:
        write(dest, entry("b00000000001", "2026-11-01T00:00:00Z"))
    pending = plan_file_merge(dest, [src], now=NOW_US)
    assert len(pending.plan.append) == 6
    known = pending.plan.duplicates  # the header line, when DEST holds the same one
    part = write(tmp_path / "part.jsonl", lines[1], lines[4])
    _merge_in_another_process(part, dest)
    result = apply_merge(pending)
    assert (result.appended, result.duplicates) == (4, known + 2)
    held = [r.id for r in records_of(dest)]
    assert sorted(held) == sorted(set(held))
    assert set(ids(6)) <= set(held)
    assert sum(isinstance(classify(raw), Header) for raw in lines_of(dest)) == 1


# --- the engine's rules, on lines in memory ---------------------------------------------------


def test_a_copy_of_the_losing_twin_is_a_duplicate() -> None:
    """Regression: DEST holding twins keeps the losing one out of its per-id summary, so a
    copy of that one written another way was appended again (and reported as a twin) at
    every merge of a source holding it, a new line each time."""
    rid = "a00000000001"
    loser = entry(rid, "2026-11-01T00:00:00Z", "apple")
    winner = entry(rid, "2026-11-01T00:00:00Z", "zebra")
    loser_again = entry(rid, "2026-11-01T00:00:00.000Z", "apple")
    now = NOW_US
    plan = plan_merge([loser, winner], [("src", 1, [loser_again])], now)
    assert (plan.append, plan.duplicates, plan.twins) == ([], 1, [])
    # The same in one batch: a twin and one record written two ways; one copy is kept.
    plan = plan_merge([], [("src", 1, [loser, winner, loser_again])], now)
    assert sorted(r.raw for r in plan.append) == sorted([loser, winner])
    assert plan.duplicates == 1


def test_a_twin_beaten_by_a_later_user_version_stays_beaten() -> None:
    """Regression: an inferred record older than a user version of its id is beaten
    (rule 14), but if DEST held its twin it was appended anyway: the first merge skipped
    it, the second appended it (not idempotent)."""
    rid = "a00000000001"
    inferred_a = entry(rid, "2026-11-01T00:00:00Z", "apple")
    inferred_b = entry(rid, "2026-11-01T00:00:00Z", "zebra")
    user = entry(rid, "2026-11-02T00:00:00Z", "mine", source="user")
    now = NOW_US
    first = plan_merge([inferred_a, user], [("src", 1, [inferred_b])], now)
    assert (first.append, first.beaten) == ([], 1)
