"""Fuzzing every reader (issue 13): arbitrary bytes and arbitrary, odd JSON.

The lines come from two generators: raw bytes (any byte, torn UTF-8, NUL, CR), and JSON
texts built to hit what readers disagree on: deep nesting, numbers out of a double's range
(`1e999`, `1E+400`, 400-digit integers, `-0`, `NaN`), duplicate keys, control characters,
lone surrogate escapes (`"\\ud800"`), a BOM, CRLF, very long strings; often as a record
with one field made odd, so that a reader that half-parses the line would change a view.

Every reader gets them: `classify`, the view (`Memory.view`), `check`, the `show` and
`check` commands, a merge of a fuzzed source into a clean destination, and a sync pass that
finds the fuzzed file as a peer's hub file. Properties: nothing raises but the documented
`UnsupportedFormat` of a foreign header (one line from the CLI, never a traceback); every
bad line is reported with its file and line; nothing bad is merged or pushed; the good
lines of the same file still arrive.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsync.cli import main
from memsync.core.clock import MAX_FUTURE
from memsync.core.lines import BOM, Header, Invalid, classify
from memsync.core.records import Record, canonical
from memsync.errors import UnsupportedFormat
from memsync.hub.sync import sync_once
from memsync.hub.transports.memory import InMemoryTransport
from memsync.local.fresh import header_line
from memsync.local.memory import Memory
from memsync.local.merge import merge_files
from memsync.local.reading import view_of
from tests.helpers.examples import examples

_HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
FUZZ = settings(
    max_examples=examples(0.6),
    deadline=None,
    suppress_health_check=_HEALTH,
)
"""For `classify` alone: a pure function."""
FUZZ_FILES = settings(
    max_examples=examples(0.4),
    deadline=None,
    suppress_health_check=_HEALTH,
)
"""For the readers of one small file (the view, check, the prompt)."""
FUZZ_SLOW = settings(
    max_examples=examples(0.25),
    deadline=None,
    suppress_health_check=_HEALTH,
)
"""For a merge, a sync pass (SQLite, a lock, a state directory) or three CLI runs: a few
seconds in CI on a loaded machine."""
NOW = 1_790_000_000_000_000
HEADER = header_line(NOW - 10**9)
STAMP = "2026-09-21T14:00:00Z"

# --- lines --------------------------------------------------------------------------------

_ODD_NUMBERS = (
    "1e999",
    "-1e999",
    "1E+400",
    "-0",
    "-0.0",
    "0e0",
    "1" * 400,
    "-" + "9" * 309,
    "4.9e-324",
    "1e-400",
    "NaN",
    "Infinity",
    "-Infinity",
    "0.1e1",
    "01",
    "1.",
    ".5",
    "+1",
    "0x10",
)
_ODD_STRINGS = (
    '"\\ud800"',
    '"\\udfff\\ud800"',
    '"\\u0000"',
    '"\\u001b[31mred"',
    '"a\\u2028b"',
    '"\x01raw control"',
    '"tab\there"',
    '"\\"quoted\\""',
    '"\\\\"',
    '"\\x41"',
    '"\xef\xbb\xbfbom inside"',
    '"' + "é" * 3000 + '"',
    '"' + "x" * 70_000 + '"',
    '"unterminated',
    '"\\u12"',
)
_FIELDS = ("id", "kind", "text", "created_at", "deleted", "confidence", "scope", "tags",
           "source", "expires_at", "supersedes", "x")  # fmt: skip


def _odd_scalar(draw: st.DrawFn) -> str:
    text: str = draw(
        st.one_of(
            st.sampled_from(_ODD_NUMBERS),
            st.sampled_from(_ODD_STRINGS),
            st.sampled_from(("true", "false", "null", "[]", "{}", '""', "0", "0.5", "1")),
            st.text(max_size=20).map(json.dumps),
            st.integers().map(str),
            st.floats(allow_nan=False, allow_infinity=False).map(repr),
        )
    )
    return text


@st.composite
def json_texts(draw: st.DrawFn, depth: int = 0) -> str:
    """A JSON-ish text: mostly valid syntax, with the odd shapes of the module docstring."""
    roll = draw(st.integers(0, 9))
    if depth > 3 or roll < 4:
        return _odd_scalar(draw)
    if roll < 6:
        items = draw(st.lists(json_texts(depth + 1), max_size=4))
        return "[" + ", ".join(items) + "]"
    keys = draw(st.lists(st.sampled_from(_FIELDS), max_size=5))  # repeats: duplicate keys
    values = [draw(json_texts(depth + 1)) for _ in keys]
    return "{" + ", ".join(f'"{k}": {v}' for k, v in zip(keys, values, strict=True)) + "}"


@st.composite
def odd_headers(draw: st.DrawFn) -> bytes:
    """A header line whose format is odd: a newline, an escape sequence, a number..."""
    roll = draw(st.integers(0, 3))
    if roll == 0:
        value = draw(st.sampled_from(('"agent-memory/1.0\\nforged"', '"\\u001b]0;x\\u0007"')))
    elif roll == 1:
        value = '"' + "agent-memory/" * 500 + '"'
    else:
        value = _odd_scalar(draw)
    return _encode('{"format": ' + value + ', "created_at": "' + STAMP + '"}')


@st.composite
def odd_records(draw: st.DrawFn) -> str:
    """A valid record with one or two fields made odd (or repeated, or deeply nested)."""
    obj = {
        "id": draw(st.sampled_from(("a1", "b2", "c3"))),
        "kind": "fact",
        "text": "A fact.",
        "created_at": STAMP,
    }
    fields = [f'"{k}": {json.dumps(v)}' for k, v in obj.items()]
    for _ in range(draw(st.integers(1, 2))):
        key = draw(st.sampled_from(_FIELDS))
        shape = draw(st.integers(0, 3))
        if shape == 0:
            value = _odd_scalar(draw)
        elif shape == 1:
            n = draw(st.sampled_from((31, 32, 33, 200, 1000)))
            value = "[" * n + "]" * n
        else:
            value = draw(json_texts(1))
        fields.insert(draw(st.integers(0, len(fields))), f'"{key}": {value}')
    return "{" + ", ".join(fields) + "}"


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _dress(draw: st.DrawFn, raw: bytes) -> bytes:
    """A BOM in front, a CR at the end (a CRLF file), or nothing."""
    roll = draw(st.integers(0, 9))
    if roll == 0:
        return b"\xef\xbb\xbf" + raw
    if roll == 1:
        return raw + b"\r"
    return raw


@st.composite
def fuzzed_lines(draw: st.DrawFn) -> bytes:
    """One line without its "\\n" (it holds none)."""
    roll = draw(st.integers(0, 9))
    if roll < 2:
        raw = draw(st.binary(max_size=120))
    elif roll < 5:
        raw = _encode(draw(json_texts()))
    elif roll < 9:
        raw = _encode(draw(odd_records()))
    else:  # a good record in another spelling: the file's good lines must still count
        rid = draw(st.sampled_from(("g1", "g2", "a1")))
        raw = json.dumps(
            {"id": rid, "kind": "lesson", "text": draw(st.text(max_size=30)), "created_at": STAMP}
        ).encode()
    return _dress(draw, raw.replace(b"\n", b" "))


@st.composite
def fuzzed_files(draw: st.DrawFn) -> bytes:
    """A file: maybe a header (ours, or another's), fuzzed lines, maybe a torn last line."""
    lines = draw(st.lists(fuzzed_lines(), min_size=1, max_size=12))
    head = draw(
        st.one_of(
            st.sampled_from((HEADER.rstrip(b"\n"), b"", b'{"format": "agent-memory/9.0"}')),
            # A header with an odd format: refused, in one line whatever it holds.
            odd_headers(),
        )
    )
    data = b"\n".join(([head] if head else []) + lines) + b"\n"
    if draw(st.booleans()):
        data += draw(st.binary(max_size=40)).replace(b"\n", b"")  # a write in progress
    return data


# --- helpers --------------------------------------------------------------------------------


def _complete(data: bytes, *, at_start: bool = True) -> list[bytes]:
    """The complete lines of a file, or of its bytes past the start (rule 1: a byte order
    mark at the start of a file is no part of its first line)."""
    end = data.rfind(b"\n") + 1
    lines = data[: end - 1].split(b"\n") if end else []
    if lines and at_start:
        lines[0] = lines[0].removeprefix(BOM)
    return lines


def _parse(raw: bytes) -> object:
    """`classify`, with UnsupportedFormat as a value."""
    try:
        return classify(raw)
    except UnsupportedFormat as exc:
        return exc


def _foreign(data: bytes) -> bool:
    """Whether a complete line of `data` is a header memsync must refuse (rule 2)."""
    return any(isinstance(_parse(raw), UnsupportedFormat) for raw in _complete(data))


def _expected_bad(data: bytes, *, distinct: bool = False) -> list[int]:
    """The line numbers of the bad lines; with `distinct`, of the first of equal lines
    only (a merge skips a line equal to one it has already judged, bad ones included)."""
    seen: set[bytes] = set()
    out = []
    for n, raw in enumerate(_complete(data), 1):
        if isinstance(_parse(raw), Invalid) and not (distinct and raw in seen):
            out.append(n)
        seen.add(raw)
    return out


def _good(data: bytes) -> list[bytes]:
    return [raw for raw in _complete(data) if type(_parse(raw)) is Record]


def _ts(raw: bytes) -> int:
    rec = classify(raw)
    assert type(rec) is Record
    return rec.ts


def _key(records: list[Record]) -> list[tuple[str, int, bytes]]:
    return [(r.id, r.ts, canonical(r)) for r in records]


def _fresh(tmp: Path) -> Path:
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _cli(*args: str) -> tuple[int, str, str]:
    """`memsync ARGS` in this process: its exit status, stdout and stderr."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    out.flush()
    buffer = out.buffer
    assert isinstance(buffer, io.BytesIO)
    return rc, buffer.getvalue().decode("utf-8", "replace"), err.getvalue()


# --- classify -------------------------------------------------------------------------------


@FUZZ
@given(st.one_of(st.binary(max_size=200), fuzzed_lines()))
def test_classify_takes_any_line(raw: bytes) -> None:
    """A value for any bytes; only a foreign header raises, and it says which format."""
    if isinstance(_parse(raw), UnsupportedFormat):
        with pytest.raises(UnsupportedFormat) as info:
            classify(raw, source="f.jsonl", line_no=3)
        assert "f.jsonl:3" in str(info.value)
        assert "\n" not in str(info.value)
        return
    parsed = classify(raw, source="f.jsonl", line_no=3)
    assert isinstance(parsed, Record | Header | Invalid) or not raw.strip()
    if isinstance(parsed, Record):
        # A record the reader keeps must survive a strict second reading as the same record.
        obj = json.loads(raw)
        assert isinstance(obj, dict)
        assert obj["id"] == parsed.id
        assert classify(raw) == parsed


# --- the view, check, show ---------------------------------------------------------------


@FUZZ_FILES
@given(data=fuzzed_files())
def test_view_and_check_report_every_bad_line_and_keep_the_good(
    tmp_path: Path, data: bytes
) -> None:
    path = _fresh(tmp_path / "v") / "me.jsonl"
    path.write_bytes(data)
    mem = Memory(path)
    if _foreign(data):
        for read in (mem.view, mem.check, mem.to_prompt):
            with pytest.raises(UnsupportedFormat, match=re.escape(str(path))):
                read()
        return
    view = mem.view(NOW)
    where = [(b.file, b.line) for b in view.bad]
    assert where == [(str(path), n) for n in _expected_bad(data)]
    good = _good(data)
    assert _key(view.records) == _key(view_of_lines(tmp_path, good))
    report = mem.check(NOW)
    assert [(b.file, b.line) for b in report.bad] == where
    mem.to_prompt(now=NOW)  # every reader of the view, the prompt block too
    _ = view.entries  # and the pydantic models of the API


def view_of_lines(tmp: Path, lines: list[bytes], *, held: bool = False) -> list[Record]:
    """The view of these lines alone (without those a merge holds, when `held`)."""
    if held:
        lines = [raw for raw in lines if _ts(raw) <= NOW + MAX_FUTURE]
    clean = tmp / "clean.jsonl"
    clean.write_bytes(HEADER + b"".join(raw + b"\n" for raw in lines))
    return view_of([clean], NOW).records


@FUZZ_SLOW
@given(data=fuzzed_files())
def test_show_and_check_commands_never_print_a_traceback(tmp_path: Path, data: bytes) -> None:
    path = _fresh(tmp_path / "c") / "me.jsonl"
    path.write_bytes(data)
    for command in (["show", str(path)], ["show", "--json", str(path)], ["check", str(path)]):
        rc, out, err = _cli(*command)
        assert "Traceback" not in out + err
        if _foreign(data):
            assert rc != 0
            assert err.count("\n") == 1, err  # one line, naming the file
            assert str(path) in err
        elif command[0] == "show":
            assert rc == 0, err
        else:
            assert rc in ((1,) if _expected_bad(data) else (0, 1)), err
            for n in _expected_bad(data):
                assert f"{path}:{n}" in out + err


# --- merge and sync ---------------------------------------------------------------------------


@FUZZ_SLOW
@given(data=fuzzed_files())
def test_merge_of_a_fuzzed_source_brings_its_good_lines_and_nothing_bad(
    tmp_path: Path, data: bytes
) -> None:
    root = _fresh(tmp_path / "m")
    source, dest = root / "source.jsonl", root / "dest.jsonl"
    source.write_bytes(data)
    Memory.open(dest, now=NOW).add("fact", "Already here.", now=NOW)
    before = dest.read_bytes()
    if _foreign(data):
        with pytest.raises(UnsupportedFormat, match=re.escape(str(source))):
            merge_files(dest, [source], now=NOW)
        assert dest.read_bytes() == before
        return
    result = merge_files(dest, [source], now=NOW)
    assert not _foreign(data)
    assert [(b["file"], b["line"]) for b in result.bad] == [
        (str(source), n) for n in _expected_bad(data, distinct=True)
    ]
    merged = dest.read_bytes()
    assert merged.startswith(before)
    assert all(
        type(classify(raw)) is Record for raw in _complete(merged[len(before) :], at_start=False)
    )
    assert _key(view_of([dest], NOW).records) == _key(
        view_of_lines(root, [*_good(data), *_good(before)], held=True)
    )


@FUZZ_SLOW
@given(data=fuzzed_files())
def test_sync_with_a_fuzzed_peer_file_merges_the_good_and_pushes_nothing_bad(
    tmp_path: Path, data: bytes
) -> None:
    root = _fresh(tmp_path / "s")
    local, state = root / "me.jsonl", root / "state"
    Memory.open(local, now=NOW).add("fact", "Mine.", now=NOW)
    mine = local.read_bytes()
    hub = InMemoryTransport()
    hub.files[("notes", "evil.jsonl")] = bytearray(data)
    hub.mtimes[("notes", "evil.jsonl")] = 1.0
    report = sync_once(
        memory="notes",
        local=local,
        remote="hub",
        transport=hub,
        replica="me",
        state_dir=state,
        now=NOW,
    )
    assert "Traceback" not in (report.error or "")
    if _foreign(data):
        # Refused whole (today) or skipped with a warning (issue 13 item 5): either way
        # nothing of it is merged, and an error is one line naming the file.
        if report.error is not None:
            assert "evil.jsonl" in report.error
            assert "\n" not in report.error
        assert local.read_bytes() == mine
        return
    assert report.ok, report.error
    assert [(b["file"], b["line"]) for b in report.bad] == [
        ("hub:notes/evil.jsonl", n) for n in _expected_bad(data, distinct=True)
    ]
    after = local.read_bytes()
    assert all(
        type(classify(raw)) is Record for raw in _complete(after[len(mine) :], at_start=False)
    )
    assert _key(view_of([local], NOW).records) == _key(
        view_of_lines(root, [*_good(data), *_good(mine)], held=True)
    )
    ours = bytes(hub.files[("notes", "me.jsonl")])
    assert set(_good(mine)) <= set(_complete(ours))  # our own records still go out
    for raw in _complete(ours):
        assert type(_parse(raw)) in (Record, Header), f"pushed {raw[:80]!r}"
