"""git's three-way merge of a memory file (issue 22, item 6; SEMANTICS rules 5, 10, 14, 15).

The property runs random divergent histories: a common BASE (records, tombstones,
supersessions, twins, the same record written two ways, a header, a bad line), then on each
side more of the same appended, and sometimes the side compacted (rule 15). The merged file
must have the view of the union of both sides (the reference view, rules 8 to 12 read
literally), at every `now`; start with OURS byte for byte; append only copies of THEIRS'
lines, each once (rule 14's repeats aside); and be a fixed point (merging THEIRS again, or
merging the other way round, changes no view).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsync.core.compaction import compact_lines
from memsync.core.gitmerge import gitattributes_with, merge_three
from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.core.timestamps import SECOND
from memsync.errors import MemsyncError, UnsupportedFormat
from tests.helpers.examples import examples
from tests.helpers.reference import reference_view
from tests.helpers.strategies import BAD_LINES, HEADER, NOW, T0, line_soups

MINUTE = 60 * SECOND
NOWS = (T0, NOW, T0 + 11 * MINUTE)
LATER = T0 + 30 * MINUTE
"""When a side compacts: after every record of the grid."""


def lines_of(data: bytes) -> list[bytes]:
    """A committed file's lines (its last one complete even without a "\\n")."""
    lines = data.split(b"\n")
    return lines[:-1] if lines[-1] == b"" else lines


def as_file(lines: list[bytes]) -> bytes:
    return b"".join(raw + b"\n" for raw in lines)


def valid(lines: list[bytes]) -> list[bytes]:
    """Only the records of a soup: a side that adds a bad line is refused (tested apart)."""
    return [raw for raw in lines if type(classify(raw)) is Record]


def respelled(raw: bytes) -> bytes:
    """The same record (rule 7) in other bytes: keys sorted, no spaces."""
    return json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()


def twin_of(raw: bytes) -> bytes:
    """A twin (rule 7): the same key, other content (a tombstone stays as it is)."""
    obj = json.loads(raw)
    if "text" in obj:
        obj["text"] += " (twin)"
    return json.dumps(obj).encode()


def compacted(lines: list[bytes], horizon: int) -> list[bytes]:
    """A side compacted (rule 15): `horizon` 0 lets every tombstone go (as when every
    replica has read past them), a long one keeps them all."""
    plan, _ = compact_lines(lines, now=LATER, horizon=horizon)
    return [HEADER, *(rec.raw for rec in plan.keep)]


@st.composite
def histories(draw: st.DrawFn) -> tuple[bytes, bytes, bytes]:
    """(BASE, OURS, THEIRS): a shared history, each side appending its own records (some
    the same as the other side's), and each side maybe compacted."""
    base = [HEADER, *draw(line_soups(16))]
    if draw(st.booleans()):
        base.append(BAD_LINES[2])
    sides = []
    shared = valid(draw(line_soups(6)))
    for _side in range(2):
        mine = valid(draw(line_soups(12)))
        # Both sides made the same change (a cherry-pick), maybe written another way (the
        # same records in other bytes, rule 7), or in both ways, or one side made twins of
        # it (same key, other content), among its other records.
        match draw(st.sampled_from(["none", "same", "respelled", "both ways", "twins"])):
            case "same":
                mine += shared
            case "respelled":
                mine += map(respelled, shared)
            case "both ways":
                mine += [*shared, *map(respelled, shared)]
            case "twins":
                mine += map(twin_of, shared)
        mine = draw(st.permutations(mine))
        lines = base + mine
        match draw(st.sampled_from(["as is", "as is", "compacted", "compacted, no tombstones"])):
            case "compacted":
                lines = compacted(lines, horizon=365 * 24 * 60 * MINUTE)
            case "compacted, no tombstones":
                lines = compacted(lines, horizon=0)
        sides.append(as_file(lines))
    return as_file(base), sides[0], sides[1]


@pytest.mark.slow
@settings(max_examples=examples(0.5))  # three merges and maybe two compactions each
@given(histories())
def test_the_merge_has_the_view_of_the_union(history: tuple[bytes, bytes, bytes]) -> None:
    """The merged file's view is the reference view of OURS and THEIRS together, at every
    `now`; it starts with OURS byte for byte; what follows are copies of THEIRS' lines that
    OURS lacks, none twice but for rule 14's repeats; merging THEIRS again appends nothing,
    and the merge the other way round has the same view."""
    base, ours, theirs = history
    union = lines_of(ours) + lines_of(theirs)
    merged = merge_three(base, ours, theirs)
    assert merged.data.startswith(ours)
    added = lines_of(merged.data[len(ours) :])
    assert len(added) == merged.appended
    assert set(added) <= set(lines_of(theirs)) | set(lines_of(ours))
    new = [raw for raw in added if raw not in set(lines_of(ours))]
    assert len(added) - len(set(new)) == merged.repeated, "a line appended twice"
    for now in NOWS:
        assert reference_view(lines_of(merged.data), now) == reference_view(union, now)
    again = merge_three(theirs, merged.data, theirs)
    assert again.data == merged.data
    other_way = merge_three(base, theirs, ours)
    for now in NOWS:
        assert reference_view(lines_of(other_way.data), now) == reference_view(union, now)


# --- what BASE tells ------------------------------------------------------------------


def line(rid: str, minute: int, **extra: object) -> bytes:
    obj: dict[str, object] = {"id": rid, "created_at": f"2026-11-01T00:{minute:02d}:00Z"}
    if not extra.get("deleted"):
        obj |= {"kind": "fact", "text": f"{rid} at {minute}"}
    return json.dumps(obj | extra).encode()


X, Y, Z = "a1a1a1a1a1a1", "b2b2b2b2b2b2", "c3c3c3c3c3c3"


def test_lines_compacted_away_on_our_side_stay_away() -> None:
    """OURS compacted away a deleted entry and its old tombstone, and an old version; THEIRS
    still holds them from BASE and appended a new entry: the merge brings the new entry,
    not the compacted lines back."""
    base = as_file([HEADER, line(X, 0), line(X, 1, deleted=True), line(Y, 2), line(Y, 3)])
    ours = as_file([HEADER, line(Y, 3)])
    theirs = base + as_file([line(Z, 4)])
    merged = merge_three(base, ours, theirs)
    assert merged.data == ours + as_file([line(Z, 4)])
    assert merged.left_out == 3


def test_a_line_deleted_by_hand_is_never_a_lost_entry() -> None:
    """A live entry OURS lost without a tombstone (deleted by hand, not forgotten) comes
    back from THEIRS: a merge never loses a live entry."""
    base = as_file([HEADER, line(X, 0), line(Y, 1)])
    ours = as_file([HEADER, line(Y, 1)])
    theirs = base + as_file([line(Z, 2)])
    merged = merge_three(base, ours, theirs)
    assert lines_of(merged.data) == [HEADER, line(Y, 1), line(X, 0), line(Z, 2)]


def test_both_sides_forget_and_supersede_without_conflict() -> None:
    """OURS forgets X and adds Z; THEIRS updates Y and supersedes Z: one view, no refusal."""
    base = as_file([HEADER, line(X, 0), line(Y, 1)])
    ours = base + as_file([line(X, 2, deleted=True), line(Z, 3)])
    theirs = base + as_file([line(Y, 4, text="newer"), line("d4d4d4d4d4d4", 5, supersedes=Z)])
    merged = merge_three(base, ours, theirs)
    view = reference_view(lines_of(merged.data), NOW)
    assert [(rid, ts) for rid, ts, _ in view] == [
        (Y, T0 + 4 * MINUTE),
        ("d4d4d4d4d4d4", T0 + 5 * MINUTE),
    ]
    assert b'"newer"' in view[0][2]


# --- what is refused --------------------------------------------------------------------


def test_a_new_bad_line_of_theirs_is_refused_naming_it() -> None:
    base = as_file([HEADER, line(X, 0)])
    theirs = base + b"{not json\n"
    with pytest.raises(MemsyncError, match=r"^m\.jsonl \(theirs\):3: bad line"):
        merge_three(base, base + as_file([line(Y, 1)]), theirs, name="m.jsonl")


def test_a_bad_line_both_sides_hold_is_no_reason_to_refuse() -> None:
    base = as_file([HEADER, b"{not json"])
    merged = merge_three(base, base + as_file([line(X, 0)]), base + as_file([line(Y, 1)]))
    assert lines_of(merged.data)[-1] == line(Y, 1)


def test_a_credential_of_theirs_is_refused() -> None:
    base = as_file([HEADER, line(X, 0)])
    secret = line(Y, 1, text="token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
    with pytest.raises(MemsyncError, match=r"\(theirs\):3: looks like it holds a credential"):
        merge_three(base, base, base + secret + b"\n")


def test_another_format_is_refused() -> None:
    other = b'{"format": "agent-memory/9.0", "created_at": "2026-11-01T00:00:00Z"}\n'
    with pytest.raises(UnsupportedFormat):
        merge_three(b"", as_file([HEADER]), other + as_file([line(X, 0)]))


def test_a_json_lines_file_that_is_no_memory_is_refused() -> None:
    """`*.jsonl` also matches other JSON Lines: a side without a header or a valid record
    is left to git, so that a line THEIRS removed is not kept by a memory merge."""
    base = b'{"event": "a"}\n{"event": "b"}\n'
    with pytest.raises(MemsyncError, match=r"^log\.jsonl \(ours\): not a memory file"):
        merge_three(base, base + b'{"event": "c"}\n', b'{"event": "a"}\n', name="log.jsonl")


def test_a_last_line_without_newline_is_a_line_in_a_commit() -> None:
    base = as_file([HEADER])
    merged = merge_three(base, base + line(X, 0), base + line(Y, 1))
    assert merged.data == as_file([HEADER, line(X, 0), line(Y, 1)])


def test_a_file_new_on_both_sides_keeps_a_header() -> None:
    merged = merge_three(b"", as_file([line(X, 0)]), as_file([HEADER, line(Y, 1)]))
    assert lines_of(merged.data) == [line(X, 0), line(Y, 1)]
    merged = merge_three(b"", b"", as_file([HEADER, line(Y, 1)]))
    assert lines_of(merged.data) == [HEADER, line(Y, 1)]


# --- .gitattributes ---------------------------------------------------------------------


def test_gitattributes_lines_are_added_once_and_nothing_else_changes() -> None:
    text = "*.png binary\r\n# mine\n*.jsonl merge=memsync"
    once = gitattributes_with(text, ["*.jsonl", "/mem/me.jsonl"])
    assert once == text + "\n/mem/me.jsonl merge=memsync\n"
    assert gitattributes_with(once, ["*.jsonl", "/mem/me.jsonl"]) == once


@pytest.mark.parametrize("pattern", ["my notes.jsonl", "#x", "!x", ""])
def test_gitattributes_refuses_what_it_cannot_say(pattern: str) -> None:
    with pytest.raises(MemsyncError, match="pattern"):
        gitattributes_with("", [pattern])
