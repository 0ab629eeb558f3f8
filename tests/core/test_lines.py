"""Reading lines (SEMANTICS rules 1 to 4): `split_complete` and `classify`, bytes in, values out.

`classify` is the single place that decides validity, so every bad-line shape of rule 4 is
pinned here, including the ones a lax validator would let through (`"0.9"` as a
confidence, `true` as a number).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.core.lines import (
    MAX_LINE_BYTES,
    Blank,
    Header,
    Invalid,
    classify,
    split_complete,
)
from memsync.core.records import KINDS, Record
from memsync.core.timestamps import parse_ts
from memsync.errors import UnsupportedFormat

TS = "2026-11-01T00:00:00Z"
_DROP = object()


def line(**changes: Any) -> bytes:
    """A valid entry line with `changes` applied (`_DROP` removes a field)."""
    obj: dict[str, Any] = {
        "id": "a1a1a1a1a1a1",
        "kind": "lesson",
        "text": "Run the linters before pushing.",
        "scope": "global",
        "tags": [],
        "source": "session:s1",
        "confidence": 0.9,
        "expires_at": None,
        "supersedes": None,
        "created_at": TS,
    }
    for name, value in changes.items():
        if value is _DROP:
            del obj[name]
        else:
            obj[name] = value
    return json.dumps(obj).encode()


def tombstone(**changes: Any) -> bytes:
    obj: dict[str, Any] = {"id": "a1a1a1a1a1a1", "deleted": True, "created_at": TS}
    for name, value in changes.items():
        if value is _DROP:
            del obj[name]
        else:
            obj[name] = value
    return json.dumps(obj).encode()


def test_a_valid_entry_is_a_record_with_its_bytes_kept() -> None:
    raw = line(source="user", supersedes="b2b2b2b2b2b2", expires_at="2026-12-01T00:00:00Z")
    rec = classify(raw)
    assert isinstance(rec, Record)
    assert rec.raw == raw
    assert rec.id == "a1a1a1a1a1a1"
    assert rec.ts == parse_ts(TS)
    assert rec.key == ("a1a1a1a1a1a1", parse_ts(TS))
    assert not rec.deleted
    assert rec.user
    assert rec.supersedes == "b2b2b2b2b2b2"
    assert rec.expires == parse_ts("2026-12-01T00:00:00Z")


def test_a_tombstone_is_a_record() -> None:
    rec = classify(tombstone())
    assert isinstance(rec, Record)
    assert rec.deleted
    assert (rec.user, rec.supersedes, rec.expires) == (False, None, None)


def test_only_required_fields_gives_the_defaults() -> None:
    """Rule 3: scope, tags, source, confidence, expires_at and supersedes are optional."""
    raw = b'{"id": "x", "kind": "fact", "text": "t", "created_at": "2026-11-01T00:00:00Z"}'
    rec = classify(raw)
    assert isinstance(rec, Record)
    assert (rec.user, rec.supersedes, rec.expires) == (False, None, None)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_accepted(kind: str) -> None:
    assert isinstance(classify(line(kind=kind)), Record)


@pytest.mark.parametrize("confidence", [0, 0.0, 1, 1.0, 0.5, 1e-9])
def test_confidence_in_range_is_accepted(confidence: float) -> None:
    assert isinstance(classify(line(confidence=confidence)), Record)


def test_unknown_fields_are_allowed_and_kept_verbatim() -> None:
    """Rules 3 and 5: unknown extra fields are allowed; the raw bytes keep them."""
    raw = line(**{"x-origin": {"host": "laptop", "n": [1, 2]}, "weight": 3})
    rec = classify(raw)
    assert isinstance(rec, Record)
    assert rec.fields()["x-origin"] == {"host": "laptop", "n": [1, 2]}
    assert rec.raw == raw


# Rule 4: every shape of bad line. Each gives Invalid with a reason; the `hint` must appear
# in the reason, so that a person reading `memsync check` knows which field to fix.
BAD: list[tuple[str, bytes, str]] = [
    ("bad-json", b'{"id": "x1", "kind": "lesson", "text": "unterminated', "JSON"),
    ("bad-json-trailing", line() + b" junk", "JSON"),
    ("bad-utf8", line(text="PLACEHOLDER").replace(b"PLACEHOLDER", b"\xff\xfe"), "UTF-8"),
    ("bad-utf8-truncated-sequence", line(text="x").replace(b'"x"', b'"\xc3"'), "UTF-8"),
    ("non-object-array", b"[1, 2, 3]", "object"),
    ("non-object-string", b'"a string"', "object"),
    ("non-object-number", b"42", "object"),
    ("non-object-null", b"null", "object"),
    ("non-object-true", b"true", "object"),
    ("missing-id", line(id=_DROP), "id"),
    ("missing-kind", line(kind=_DROP), "kind"),
    ("missing-text", line(text=_DROP), "text"),
    ("missing-created_at", line(created_at=_DROP), "created_at"),
    ("tombstone-missing-created_at", tombstone(created_at=_DROP), "created_at"),
    ("tombstone-missing-id", tombstone(id=_DROP), "id"),
    ("id-number", line(id=42), "id"),
    ("id-null", line(id=None), "id"),
    ("id-empty", line(id=""), "id"),
    ("kind-number", line(kind=1), "kind"),
    ("kind-unknown", line(kind="opinion"), "kind"),
    ("kind-null", line(kind=None), "kind"),
    ("text-number", line(text=42), "text"),
    ("text-null", line(text=None), "text"),
    ("text-list", line(text=["a"]), "text"),
    ("created_at-number", line(created_at=1_700_000_000), "created_at"),
    ("created_at-null", line(created_at=None), "created_at"),
    ("scope-number", line(scope=1), "scope"),
    ("scope-null", line(scope=None), "scope"),
    ("tags-string", line(tags="fetching"), "tags"),
    ("tags-of-numbers", line(tags=[1, 2]), "tags"),
    ("tags-null", line(tags=None), "tags"),
    ("source-number", line(source=7), "source"),
    ("source-list", line(source=["user"]), "source"),
    ("confidence-string", line(confidence="0.9"), "confidence"),
    ("confidence-true", line(confidence=True), "confidence"),
    ("confidence-false", line(confidence=False), "confidence"),
    ("confidence-null", line(confidence=None), "confidence"),
    ("confidence-1.5", line(confidence=1.5), "confidence"),
    ("confidence-negative", line(confidence=-0.1), "confidence"),
    ("confidence-NaN", line(confidence=float("nan")), "JSON"),
    ("confidence-Infinity", line(confidence=float("inf")), "JSON"),
    ("confidence-overflow", line().replace(b"0.9", b"1e999"), "confidence"),
    ("expires_at-number", line(expires_at=5), "expires_at"),
    ("expires_at-naive", line(expires_at="2026-12-01T00:00:00"), "expires_at"),
    ("expires_at-words", line(expires_at="tomorrow"), "expires_at"),
    ("supersedes-number", line(supersedes=3), "supersedes"),
    ("supersedes-list", line(supersedes=["b2b2b2b2b2b2"]), "supersedes"),
    ("deleted-yes", tombstone(deleted="yes"), "deleted"),
    ("deleted-1", tombstone(deleted=1), "deleted"),
    ("created_at-naive", line(created_at="2026-11-01T00:00:00"), "created_at"),
    ("created_at-yesterday", line(created_at="yesterday"), "created_at"),
    ("created_at-feb-30", line(created_at="2026-02-30T00:00:00Z"), "created_at"),
    ("created_at-date-only", line(created_at="2026-11-01"), "created_at"),
    ("created_at-hour-24", line(created_at="2026-11-01T24:00:00Z"), "created_at"),
    ("created_at-epoch-string", line(created_at="1700000000"), "created_at"),
    ("tombstone-naive", tombstone(created_at="2026-11-01T00:00:00"), "created_at"),
    ("over-64-KiB", line(text="x" * MAX_LINE_BYTES), "longer"),
]


@pytest.mark.parametrize(("raw", "hint"), [pytest.param(r, h, id=i) for i, r, h in BAD])
def test_bad_lines_are_invalid_with_a_reason(raw: bytes, hint: str) -> None:
    """Rule 4: anything but a header, a blank line or a well-typed record is a bad line: a
    value with a reason, never an exception, never a record."""
    parsed = classify(raw, source="m.jsonl", line_no=7)
    assert isinstance(parsed, Invalid), parsed
    assert hint.lower() in parsed.reason.lower(), parsed.reason


def test_the_size_limit_is_64_KiB_without_the_terminator() -> None:
    """Rule 4's limit: a line of exactly 64 KiB is read, one byte more is bad."""
    base = line(text="")
    exact = line(text="x" * (MAX_LINE_BYTES - len(base)))
    assert len(exact) == MAX_LINE_BYTES == 64 * 1024
    assert isinstance(classify(exact), Record)
    over = line(text="x" * (MAX_LINE_BYTES - len(base) + 1))
    assert isinstance(classify(over), Invalid)


def test_the_size_limit_excludes_a_crlf_terminator() -> None:
    """The same 64 KiB line written with a CRLF ending (rule 1) is as valid as with LF."""
    base = line(text="")
    exact = line(text="x" * (MAX_LINE_BYTES - len(base)))
    assert isinstance(classify(exact + b"\r"), Record)


@pytest.mark.parametrize(
    "raw",
    [b"", b" ", b"   ", b"\t", b"\r", b" \r"],
    ids=["empty", "sp", "3sp", "tab", "cr", "sp-cr"],
)
def test_blank_lines_are_skipped_not_bad(raw: bytes) -> None:
    """Rule 3: blank lines (a CRLF file's blank line is b"\\r") are neither records nor bad."""
    assert isinstance(classify(raw), Blank)


def test_crlf_lines_are_read_and_keep_their_bytes() -> None:
    """Rule 1: `\\r\\n` endings are accepted; rule 5: the raw bytes keep the `\\r`."""
    raw = line() + b"\r"
    rec = classify(raw)
    assert isinstance(rec, Record)
    assert rec.raw == raw
    assert rec.key == classify(line()).key  # type: ignore[union-attr]


@pytest.mark.parametrize("fmt", ["agent-memory/0.1", "agent-memory/0.2", "agent-memory/0.10"])
def test_supported_headers(fmt: str) -> None:
    """Rule 2: the header names the format; any agent-memory/0.x is read."""
    raw = json.dumps({"format": fmt, "created_at": TS, "generation": "g1"}).encode()
    parsed = classify(raw)
    assert parsed == Header(fmt, "g1")


def test_a_header_without_generation() -> None:
    raw = json.dumps({"format": "agent-memory/0.1", "created_at": TS}).encode()
    assert classify(raw) == Header("agent-memory/0.1", None)


@pytest.mark.parametrize(
    "fmt", ["agent-memory/1.0", "agent-memory/0.1-beta", "other/0.1", "agent-memory", 1, None]
)
def test_unsupported_headers_raise_with_file_and_line(fmt: object) -> None:
    """Rule 2: a format other than agent-memory/0.x is refused with a clear error, not
    guessed at; the error names where it was found."""
    raw = json.dumps({"format": fmt, "created_at": TS}).encode()
    with pytest.raises(UnsupportedFormat) as info:
        classify(raw, source="notes.jsonl", line_no=1)
    assert "notes.jsonl:1" in str(info.value)
    assert str(fmt) in str(info.value)
    assert info.value.file == "notes.jsonl:1"


def test_split_complete_keeps_only_terminated_lines() -> None:
    """Rule 1: a line is complete only when it ends in a newline; the offset returned is
    just past the last one, so a reader resumes at the torn line."""
    data = b"one\ntwo\r\n\nthree"
    lines, end = split_complete(data)
    assert lines == [b"one", b"two\r", b""]
    assert end == len(b"one\ntwo\r\n\n")
    assert data[end:] == b"three"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", ([], 0)),
        (b"torn", ([], 0)),
        (b"\n", ([b""], 1)),
        (b"a\n", ([b"a"], 2)),
        (b"a\nb\n", ([b"a", b"b"], 4)),
    ],
)
def test_split_complete_edges(data: bytes, expected: tuple[list[bytes], int]) -> None:
    assert split_complete(data) == expected


def test_a_torn_line_completed_later_reads_once() -> None:
    """Rule 1: what is torn now is read whole once its newline arrives, and only then."""
    full = line() + b"\n"
    first = full[:40]
    lines, end = split_complete(first)
    assert (lines, end) == ([], 0)
    lines, end = split_complete(full)
    assert lines == [line()]
    assert end == len(full)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
_FIELD_VALUES = st.one_of(
    _JSON, st.sampled_from([TS, "2026-11-01T00:00:00+01:00", "a1a1a1a1a1a1", *KINDS, "user"])
)


@pytest.mark.slow
@given(st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")))
def test_classify_never_raises_on_arbitrary_bytes(raw: bytes) -> None:
    """Rule 4: a line is never an exception. Whatever the bytes, classify returns a value
    (an unsupported header is the one refusal, rule 2)."""
    try:
        parsed = classify(raw)
    except UnsupportedFormat:
        return
    assert isinstance(parsed, Record | Header | Blank | Invalid)


@pytest.mark.slow
@given(
    st.dictionaries(
        st.sampled_from(
            ["id", "kind", "text", "created_at", "deleted", "scope", "tags", "source",
             "confidence", "expires_at", "supersedes", "extra"]
        ),
        _FIELD_VALUES,
    )
)  # fmt: skip
def test_classify_never_raises_on_arbitrary_objects(obj: dict[str, Any]) -> None:
    """Record-shaped objects with arbitrary field values are records or bad lines, and a
    record's parsed fields obey rule 3's types."""
    parsed = classify(json.dumps(obj).encode())
    assert isinstance(parsed, Record | Invalid | Header)
    if isinstance(parsed, Record):
        assert isinstance(obj["id"], str)
        assert obj["id"]
        assert parse_ts(obj["created_at"]) == parsed.ts
        if obj.get("deleted") is not True:
            assert obj["kind"] in KINDS
            assert isinstance(obj["text"], str)
            conf = obj.get("confidence", 1.0)
            assert type(conf) in (int, float)
            assert 0 <= conf <= 1


def test_an_offset_without_colon_is_a_bad_line() -> None:
    assert isinstance(classify(line(created_at="2026-11-01T01:00:00+0100")), Invalid)


# Rule 4's shapes on which two JSON readers disagree: duplicate keys, numbers that are not
# finite as doubles, nesting past 32 levels, control characters in an id.


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("raw", "hint"),
    [
        pytest.param(
            line().replace(b'"text"', b'"deleted": true, "deleted": false, "text"'),
            "duplicate",
            id="duplicate-known-key",
        ),
        pytest.param(
            line().replace(b'"id"', b'"x": 1, "x" : 1, "id"'),
            "duplicate",
            id="duplicate-unknown-key-spaced",
        ),
        pytest.param(
            line().replace(b'"id"', b'"x": {"a": 1, "a": 2}, "id"'),
            "duplicate",
            id="duplicate-key-in-a-nested-object",
        ),
        pytest.param(
            tombstone().replace(b'"id"', b'"created_at": "2020-01-01T00:00:00Z", "id"'),
            "duplicate",
            id="duplicate-created_at-in-a-tombstone",
        ),
        pytest.param(
            line().replace(b'"id"', b'"x": 1e999, "id"'), "finite", id="1e999-in-an-unknown-field"
        ),
        pytest.param(
            line().replace(b'"id"', b'"x": [-1E+400], "id"'),
            "finite",
            id="negative-overflow-in-a-list",
        ),
        pytest.param(
            line().replace(b'"id"', b'"x": ' + b"9" * 400 + b', "id"'),
            "finite",
            id="integer-beyond-a-double",
        ),
        pytest.param(
            # The boundary (case 034): 32 arrays in a field, 33 levels with the record's own
            # object; one level fewer is the first case of the good shapes below.
            line().replace(b'"id"', f'"x": {_nested(32)}, "id"'.encode()),
            "nested",
            id="33-levels-counting-the-record",
        ),
        pytest.param(
            line().replace(b'"id"', f'"x": {_nested(1000)}, "id"'.encode()),
            "nested",
            id="1000-levels-in-a-record",
        ),
        pytest.param(_nested(1000).encode(), "nested", id="1000-levels-alone"),
        pytest.param(("{" + '"a":{' * 40 + "}" * 41).encode(), "nested", id="40-objects"),
        pytest.param(line(id="x4\nfake"), "control", id="newline-in-id"),
        pytest.param(line(id="x\x1b[31m"), "control", id="escape-in-id"),
        pytest.param(line(id="x\x7f"), "control", id="DEL-in-id"),
        pytest.param(line(id="x\x85"), "control", id="C1-in-id"),
        pytest.param(
            b'{"format": "agent-memory/0.1", "format": "agent-memory/0.1"}',
            "duplicate",
            id="duplicate-key-in-a-header",
        ),
    ],
)
def test_rule_4_shapes_readers_disagree_on_are_bad_lines(raw: bytes, hint: str) -> None:
    """Rule 4 (case 033): each of these decodes in some JSON reader; none is a record."""
    parsed = classify(raw, source="m.jsonl", line_no=3)
    assert isinstance(parsed, Invalid), parsed
    assert hint in parsed.reason, parsed.reason


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            line().replace(b'"id"', f'"x": {_nested(31)}, "id"'.encode()),
            id="32-levels-counting-the-record",
        ),
        pytest.param(line(id="a\tb"), id="tab-in-id"),
        pytest.param(line(id="caf\u00e9 \u00a0x"), id="non-ascii-id"),
        pytest.param(
            line(text='a "quoted": colon, a \\": and {"k": 1, "k": 2} in text'),
            id="keys-and-colons-inside-a-string",
        ),
        pytest.param(line(text="ends in a backslash \\"), id="trailing-backslash"),
        pytest.param(
            line(text=":starts with a colon", scope=":x"), id="strings-starting-with-colon"
        ),
        pytest.param(
            line().replace(b'"id"', b'"x": {"a": 1, "b": {"a": 1}}, "id"'),
            id="same-key-in-two-objects",
        ),
        pytest.param(
            line().replace(b'"id"', b'"x": [1e308, -1e-999, 123456789012345678901234567890], "id"'),
            id="large-but-finite-numbers",
        ),
        pytest.param(line().replace(b'"text"', b'"te\\u0078t"'), id="escaped-key"),
    ],
)
def test_rule_4_neighbours_that_are_fine(raw: bytes) -> None:
    """The checks for rule 4's shapes do not catch valid lines that look like them."""
    assert isinstance(classify(raw), Record), classify(raw)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _oracle_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_oracle_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_oracle_depth(v) for v in value), default=0)
    return 0


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('a":\\{}[], \t\u00e9\n')),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(st.tuples(st.sampled_from(["a", "b", 'c"', "d:", "e\\"]), inner), max_size=3)
    ),
    max_leaves=12,
)


def _render(value: Any) -> str:
    """JSON text of `value`, where a list of (key, value) pairs is an object that may
    repeat a key, and whitespace varies around the punctuation."""
    if isinstance(value, list) and value and all(isinstance(p, tuple) for p in value):
        return "{" + " ,".join(f"{json.dumps(k)} :{_render(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[ " + ",".join(_render(v) for v in value) + "]"
    return json.dumps(value)


@pytest.mark.slow
@given(_json_values)
def test_rule_4_structure_agrees_with_an_independent_reader(extra: Any) -> None:
    """Property: with any JSON value in an unknown field, a line is a record exactly when
    Python's own json module, rejecting duplicate keys, reads it with nesting of at most
    32 levels (counting the record's own object)."""
    raw = line().replace(b'"id"', f'"x": {_render(extra)}, "id"'.encode())
    try:
        obj = json.loads(raw, object_pairs_hook=_reject_duplicates)
        valid = _oracle_depth(obj) <= 32
    except ValueError:
        valid = False
    assert isinstance(classify(raw), Record) == valid, raw


_KNOWN_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "deleted": st.booleans(),
    "kind": st.sampled_from([*KINDS, None]),
    "text": st.text(alphabet="ab :{}[],", max_size=8) | st.none(),
    "scope": st.sampled_from(["global", "repo:x", "a:b"]),
    "tags": st.lists(st.sampled_from(["t", "u:v", "{"]), max_size=3),
    "source": st.sampled_from(["user", "session:1", None]),
    "confidence": st.sampled_from([0, 0.5, 1]),
    "expires_at": st.sampled_from([None, TS, "2030-01-01T00:00:00.000Z"]),
    "supersedes": st.sampled_from(["b2", None]),
}


@pytest.mark.slow
@given(
    st.lists(st.sampled_from(sorted(_KNOWN_VALUES)), unique=True).flatmap(
        lambda keys: st.tuples(
            st.fixed_dictionaries({k: _KNOWN_VALUES[k] for k in keys}),
            st.sampled_from([None, "id", "created_at", *keys]),
            st.data(),
        )
    )
)
def test_known_fields_written_twice_make_a_bad_line(case: tuple[Any, Any, Any]) -> None:
    """Property: a line of known fields only, with any of them written twice (the fast
    path of rule 4's check, `_Fields.strings`), is a record exactly when Python's json
    module, rejecting duplicate keys, reads an entry or tombstone from it."""
    fields, twice, data = case
    pairs = [("id", "a1"), ("created_at", TS), *fields.items()]
    if twice is not None:
        again = data.draw(_KNOWN_VALUES.get(twice, st.just(dict(pairs)[twice])))
        pairs.insert(data.draw(st.integers(0, len(pairs))), (twice, again))
    raw = ("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}").encode()
    obj = dict(pairs)
    entry = obj.get("kind") is not None and obj.get("text") is not None
    valid = twice is None and (obj.get("deleted") is True or entry)
    assert isinstance(classify(raw), Record) == valid, raw
