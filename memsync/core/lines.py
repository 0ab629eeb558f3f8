"""Reading lines (SEMANTICS rules 1 to 4): split bytes into complete lines and classify each.

This module is the single place that decides whether a line is valid. It is pure: bytes in,
values out. A bad line is a value (`Invalid`, with a reason), never an exception; the only
exception is `UnsupportedFormat` for a header memsync must not guess at (rule 2).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from memsync.core.lazyre import LazyPattern
from memsync.core.records import KINDS, Record
from memsync.core.timestamps import EPOCH, Timestamp
from memsync.errors import UnsupportedFormat

__all__ = [
    "BOM",
    "LONG_LINE_KEPT",
    "MAX_ID_CHARS",
    "MAX_LINE_BYTES",
    "BadLine",
    "Blank",
    "Header",
    "Invalid",
    "LineSplitter",
    "Parsed",
    "RecordFields",
    "SourceLines",
    "classify",
    "classify_described",
    "classify_fields",
    "is_header",
    "split_complete",
    "valid_id",
    "without_bom",
]

SourceLines: TypeAlias = tuple[str, int, list[bytes]]
"""Consecutive lines of one source, as a merge takes them in: the source's name (how
messages name it), the number of the first line, and the lines (without their "\\n")."""

MAX_LINE_BYTES = 64 * 1024
"""A line longer than this (its terminator excluded) is a bad line (rule 4)."""

MAX_DEPTH = 32
"""Arrays and objects nested deeper than this make a bad line (rule 4)."""

_SUPPORTED_FORMAT = LazyPattern(r"agent-memory/0\.\d+\Z")  # headers alone (0.15 ms)
MAX_ID_CHARS = 128
"""The longest id (rule 3), in characters."""
_US = timedelta(microseconds=1)
# Instants a datetime can represent in UTC: an offset can push "9999-12-31T23:59:59-01:00"
# past year 9999, which would make formatting the instant fail later.
_FIRST_US = (datetime.min.replace(tzinfo=UTC) - EPOCH) // _US
_LAST_US = (datetime.max.replace(tzinfo=UTC) - EPOCH) // _US
_KINDS = frozenset(KINDS)
# Rule 4: a control character other than tab makes an id bad (C0, DEL and C1).
_ID_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# An integer literal this long is beyond a double's range: a reader that reads numbers as
# doubles gets infinity (rule 4: "a number that is not finite").
_HUGE_INTEGER = re.compile(rb"\d{309}")


class Header(msgspec.Struct, frozen=True):
    """A header line: `{"format": "agent-memory/0.1", "created_at": ...}` (rule 2).

    `generation` is memsync's token for a rewritten file (compaction); None when absent.
    `install` is the token of the memsync installation that writes a hub file (its state
    directory's, issue 13 item 11); None when absent.
    """

    format: str
    generation: str | None
    install: str | None = None


class Blank(msgspec.Struct, frozen=True):
    """An empty or all-whitespace line: skipped, not bad (rule 3)."""


class Invalid(msgspec.Struct, frozen=True):
    """A bad line (rule 4), with a short reason a person can act on."""

    reason: str


class BadLine(msgspec.Struct, frozen=True):
    """Where a bad line is and why (rule 4): reported, never propagated, never dropped."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


Parsed = Record | Header | Blank | Invalid

BLANK = Blank()


BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark: ignored at the very start of a file, part of its line
anywhere else (rule 1)."""


def without_bom(line: bytes) -> bytes:
    """The first line of a file without a leading byte order mark (rule 1). Only for a
    file's first line: anywhere else a BOM is part of its line (and makes it bad)."""
    return line.removeprefix(BOM)


def split_complete(data: bytes, *, at_start: bool = False) -> tuple[list[bytes], int]:
    """Split `data` into its complete lines and say how many bytes they span (rule 1).

    Returns the lines without their "\\n" and the offset just past the last "\\n": bytes
    after it are a write in progress (a torn last line), neither read nor reported.
    `at_start`: `data` starts at the start of the file, so a byte order mark there is
    not part of the first line (rule 1).
    """
    end = data.rfind(b"\n") + 1
    if end == 0:
        return [], 0
    lines = data[: end - 1].split(b"\n")
    if at_start:
        lines[0] = without_bom(lines[0])
    return lines, end


LONG_LINE_KEPT = MAX_LINE_BYTES + 2
"""How much of a line over the limit a `LineSplitter` keeps: enough that it is still over
the limit, CRLF terminator aside, so that it is reported as the bad line it is (rule 4)."""


class LineSplitter:
    """Splits a stream of blocks into complete lines (rule 1), in time linear in the bytes
    and memory bounded by the blocks, not by the lines.

    A line over `MAX_LINE_BYTES` is a bad line (rule 4): it is kept cut to
    `LONG_LINE_KEPT` bytes, so a 200 MB line costs 64 KiB, is reported as too long, and
    counts as one line. `keep_long=True` keeps every line whole (compaction sets bad lines
    aside as they are); its time stays linear. `at_start`: the stream starts at the start
    of the file, so a byte order mark there is not part of the first line (rule 1);
    `bom` then says how many bytes were left out (3 or 0), once the first line is out.
    """

    def __init__(self, *, keep_long: bool = False, at_start: bool = False) -> None:
        self._parts: list[bytes] = []  # the incomplete last line so far (maybe cut)
        self._held = 0
        self._keep_long = keep_long
        self._first = at_start
        self.bom = 0
        self.pending = 0
        """The length in the stream of the incomplete last line (a write in progress, or
        a line not yet read to its end): the stream position minus this is the offset
        just past the last complete line."""

    def feed(self, block: bytes) -> tuple[list[bytes], bytes]:
        """The lines that `block` completes (without their "\\n"), and the bytes they were
        split from, as `split_complete` gives them (a long line cut as above)."""
        last = block.rfind(b"\n")
        if last < 0:
            if self._keep_long or self._held < LONG_LINE_KEPT:
                self._parts.append(block)
                self._held += len(block)
            self.pending += len(block)
            return [], b""
        cut_long = not self._keep_long and self._held >= LONG_LINE_KEPT
        data = b"".join((*self._parts, block)) if self._parts else block
        lines, cut = split_complete(data)
        if self._first:
            self._first = False
            if lines[0].startswith(BOM):
                lines[0], self.bom = lines[0][len(BOM) :], len(BOM)
        if cut_long:
            lines[0] = lines[0][:LONG_LINE_KEPT]
        rest = data[cut:]
        self._parts, self._held, self.pending = ([rest] if rest else []), len(rest), len(rest)
        return lines, data[:cut]


class _Fields(msgspec.Struct, gc=False):
    """The fields rule 3 gives a type to, decoded and type-checked in one pass by msgspec.

    Unknown fields are ignored here and kept in the raw bytes (rules 3 and 5). Which
    fields are required depends on `deleted`, so that is checked in `_record`. A field
    left out is UNSET (its default applies), so that `classify` can count the fields a
    line holds: when those are all its keys, no unknown field needs a second decode.
    """

    id: str
    created_at: msgspec.Raw  # decoded by `_instant`, which also sees how it is written
    deleted: bool | UnsetType = UNSET
    kind: Literal["preference", "lesson", "fact", "source", "avoid"] | UnsetType | None = UNSET
    text: str | UnsetType | None = UNSET
    scope: str | UnsetType = UNSET
    tags: list[str] | UnsetType = UNSET
    source: str | UnsetType | None = UNSET
    confidence: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] | UnsetType = UNSET
    expires_at: msgspec.Raw | UnsetType = UNSET
    supersedes: str | UnsetType | None = UNSET

    def strings(self) -> int:
        """How many JSON strings, keys and values, the known fields are written with.

        `created_at` counts as a string: when it is not one the line is bad anyway (its
        check comes later). Written flat: it runs once per line read.
        """
        n = 4  # "id" and its value, "created_at" and its value
        if self.deleted is not UNSET:
            n += 1
        if self.kind is not UNSET:
            n += 1 if self.kind is None else 2
        text = self.text
        if text is not UNSET:
            n += 1 if text is None else 2
        if self.scope is not UNSET:
            n += 2
        tags = self.tags
        if tags is not UNSET:
            n += 1 + len(tags)
        source = self.source
        if source is not UNSET:
            n += 1 if source is None else 2
        if self.confidence is not UNSET:
            n += 1
        raw = self.expires_at
        if raw is not UNSET:
            n += 1 if raw == _NULL else 2 - (bytes(raw)[:1] != b'"')
        supersedes = self.supersedes
        if supersedes is not UNSET:
            n += 1 if supersedes is None else 2
        return n

    def count(self) -> int:
        """How many of the known fields the line holds."""
        return (
            2
            + (self.deleted is not UNSET)
            + (self.kind is not UNSET)
            + (self.text is not UNSET)
            + (self.scope is not UNSET)
            + (self.tags is not UNSET)
            + (self.source is not UNSET)
            + (self.confidence is not UNSET)
            + (self.expires_at is not UNSET)
            + (self.supersedes is not UNSET)
        )


_NULL = msgspec.Raw(b"null")
_decode_fields = msgspec.json.Decoder(_Fields).decode
_decode_any = msgspec.json.Decoder().decode


def classify(raw: bytes, *, source: str = "<bytes>", line_no: int = 0) -> Parsed:
    """Classify one complete line (without its "\\n") as a record, header, blank or bad line
    (`classify_described` without the entry's kind, scope and confidence)."""
    return classify_described(raw, source=source, line_no=line_no)[0]


def classify_described(
    raw: bytes, *, source: str = "<bytes>", line_no: int = 0
) -> tuple[Parsed, str, str, float]:
    """Classify one complete line (without its "\\n") as a record, header, blank or bad line,
    with an entry's kind, scope and confidence (rule 3's defaults: "global", 1.0), read in
    the same decode: the persistent view keeps them (issue 20), without reading the line
    again. ("", "", 1.0) for anything but an entry. `classify_fields`, a record as a
    `Record`: raises UnsupportedFormat as it does (rule 2).
    """
    parsed = classify_fields(raw, source=source, line_no=line_no)
    if not isinstance(parsed, tuple):
        return parsed, "", "", 1.0
    rid, ts, deleted, user, supersedes, expires, kind, scope, confidence = parsed
    return Record(raw, rid, ts, deleted, user, supersedes, expires), kind, scope, confidence


RecordFields: TypeAlias = tuple[str, int, bool, bool, str | None, int | None, str, str, float]
"""A record line's fields: id, created_at and expires_at (microseconds; None: none),
deleted, user (`source` is "user"), supersedes (None: none), and an entry's kind, scope
and confidence (rule 3's defaults: "global", 1.0; "", "", 1.0 for a tombstone)."""


def classify_fields(
    raw: bytes, *, source: str = "<bytes>", line_no: int = 0
) -> RecordFields | Header | Blank | Invalid:
    """Classify one complete line (without its "\\n") as a record (its `RecordFields`: a
    reader that keeps less than the line builds no `Record`, issue 20), header, blank or
    bad line. The one place that decides.

    Rules 2 to 4: a record is an entry or a tombstone with the fields and types rule 3 lists;
    unknown extra fields are allowed; anything else is `Invalid`.

    Raises:
        UnsupportedFormat: a header names a format other than agent-memory/0.x (rule 2).
            `source` and `line_no` only serve this message.
    """
    if len(raw) > MAX_LINE_BYTES and len(raw) - raw.endswith(b"\r") > MAX_LINE_BYTES:
        return Invalid(f"line longer than {MAX_LINE_BYTES} bytes")  # the CRLF "\r" aside
    try:
        f = _decode_fields(raw)
    except msgspec.DecodeError as exc:
        return _not_a_record(raw, str(exc), source, line_no)
    except RecursionError:  # msgspec's own depth limit, far past MAX_DEPTH
        return Invalid(f"nested deeper than {MAX_DEPTH} levels")
    if b"\\" in raw or raw.count(b'"') != 2 * f.strings():  # else the common line (below)
        problem = _structure_problem(raw, f)
        if problem is not None:
            return Invalid(problem)
    rid = f.id
    usual = rid.isascii() and rid.isprintable() and 0 < len(rid) <= MAX_ID_CHARS
    if not usual and not valid_id(rid):
        return Invalid("'id' is empty, too long or holds control characters")
    ts = _instant(f.created_at)
    if type(ts) is str:
        return Invalid(f"'created_at' {ts}")
    if f.deleted is True:
        return rid, ts, True, False, None, None, "", "", 1.0  # type: ignore[return-value]
    kind, scope, supersedes, expires_at = f.kind, f.scope, f.supersedes, f.expires_at
    if kind is None or kind is UNSET:
        return Invalid(f"missing 'kind' (one of {', '.join(KINDS)})")
    if f.text is None or f.text is UNSET:
        return Invalid("missing 'text'")
    if scope == "":
        return Invalid("'scope' is empty")
    expires: int | str | None = None
    if expires_at is not UNSET and expires_at != _NULL:
        expires = _instant(expires_at)
        if type(expires) is str:
            return Invalid(f"'expires_at' {expires}")
    if supersedes == "":
        return Invalid("'supersedes' is empty")
    return (  # type: ignore[return-value]  # `ts` and `expires` are instants here
        rid,
        ts,
        False,
        f.source == "user",
        None if supersedes is UNSET else supersedes,
        expires,
        kind,
        "global" if scope is UNSET else scope,
        1.0 if f.confidence is UNSET else f.confidence,
    )


_decode_instant = msgspec.json.Decoder(Timestamp).decode


def valid_id(rid: str) -> bool:
    """Whether `rid` has the shape rule 3 gives an id: 1 to `MAX_ID_CHARS` characters,
    none a control character."""
    if rid.isascii() and rid.isprintable():  # the usual id; a tab is the regex's to judge
        return 0 < len(rid) <= MAX_ID_CHARS
    return bool(rid) and len(rid) <= MAX_ID_CHARS and _ID_CONTROL.search(rid) is None


def _instant(value: msgspec.Raw) -> int | str:
    """Microseconds since the epoch of a JSON timestamp, or why it is not one (rule 3).

    msgspec's RFC 3339 parser (in C) does the work; two things are checked around it: the
    zone offset has its colon (msgspec also takes ISO 8601's "+0100", RFC 3339 does not),
    and the instant falls within the years 1 to 9999 in UTC (an offset can push
    "9999-12-31T23:59:59-01:00" past them, where no datetime can represent it).
    """
    text = bytes(value)
    try:
        dt = _decode_instant(text)
    except msgspec.DecodeError:
        return "is not an RFC 3339 timestamp with a zone"
    # (A decoded timestamp's text is "..." around 20 characters at least: indexable.)
    if text[-2] != 90 and text[-2] != 122 and text[-4] != 58:  # "Z", "z", ":"
        return "needs a colon in its zone offset (RFC 3339: +01:00)"
    # Whole microseconds: `// timedelta(microseconds=1)` gives the same, at twice the cost.
    td = dt - EPOCH
    us = (td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds
    if not _FIRST_US <= us <= _LAST_US:
        return "is outside the years 1 to 9999 in UTC"
    return us


def _structure_problem(raw: bytes, fields: _Fields | None) -> str | None:
    """Why a line that decodes as JSON is still a bad line under rule 4, or None.

    Three shapes on which two JSON readers can disagree: an object with a duplicate key
    (one keeps the first value, another the last), a number that is not finite as a double
    (`1e999`, or an integer of 309 digits), and nesting deeper than `MAX_DEPTH` (one
    reader recurses, another fails). `raw` must be valid JSON syntax; `fields` are its
    fields of rule 3, decoded and type-checked already (None: not known).

    Cost: a few C-level passes over the line; a second, full decode only when the line
    holds more than those fields (unknown ones, or a key written twice); no Python loop
    over its characters unless the line holds more than `MAX_DEPTH` brackets.
    """
    if fields is not None and b"\\" not in raw and raw.count(b'"') == 2 * fields.strings():
        # The common line, checked without a copy: with no escape, every '"' delimits a
        # string. Its known fields, typed and checked, account for so many strings (keys
        # and values); any other key (unknown, or a known one written twice) would add
        # at least its own. So these are all the keys, each once: none of the shapes.
        return None
    # The text outside string literals: drop escaped backslashes, then escaped quotes, so
    # that every '"' left delimits a string; the even pieces of a split on '"' are then
    # exactly the JSON outside strings: punctuation, numbers, true, false, null.
    text = raw.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in raw else raw
    outside = b"".join(text.split(b'"')[::2])
    opens = outside.count(b"{")
    # Outside strings, a ':' only ever ends a key: their count is the number of keys as
    # written. One object whose keys are exactly the known fields (typed and checked:
    # finite numbers, a list of strings at most) can hide none of the three shapes.
    if fields is not None and opens == 1 and outside.count(b":") == fields.count():
        return None
    if opens + outside.count(b"[") > MAX_DEPTH and _depth(outside) > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    try:
        obj = _decode_any(raw)
    except msgspec.DecodeError:  # msgspec: "Number out of range" (1e999 and the like)
        return "holds a number that is not finite (out of a double's range)"
    if len(outside) >= 309 and _HUGE_INTEGER.search(outside) is not None:
        return "holds a number that is not finite (out of a double's range)"
    # The keys as written equal the distinct keys unless one repeats.
    distinct = len(obj) if opens == 1 and type(obj) is dict else _count_keys(obj)
    if outside.count(b":") != distinct:
        return "an object has a duplicate key"
    return None


def _depth(outside: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON text that has no strings left."""
    depth = deepest = 0
    for byte in outside:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


def _count_keys(value: object) -> int:
    """The number of keys over every object in a decoded JSON value (nesting is bounded)."""
    if type(value) is dict:
        return len(value) + sum(_count_keys(v) for v in value.values())
    if type(value) is list:
        return sum(_count_keys(v) for v in value)
    return 0


def _not_a_record(raw: bytes, error: str, source: str, line_no: int) -> Header | Blank | Invalid:
    """The slow path: a blank line, a header, or a bad line with its reason."""
    if not raw.strip():
        return BLANK
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return Invalid("not valid UTF-8")
    try:
        obj = _decode_any(raw)
    except msgspec.ValidationError:  # "Number out of range"; the typed decode says where
        return Invalid(_reason(error))
    except msgspec.DecodeError:
        return Invalid(f"not valid JSON ({error.removeprefix('JSON is malformed: ')})")
    except RecursionError:  # msgspec's own depth limit, far past MAX_DEPTH
        return Invalid(f"nested deeper than {MAX_DEPTH} levels")
    problem = _structure_problem(raw, None)
    if problem is not None:
        return Invalid(problem)
    if type(obj) is not dict:
        return Invalid("not a JSON object")
    if "id" not in obj and "format" in obj:
        return _header(obj, source, line_no)
    return Invalid(_reason(error))


def _reason(error: str) -> str:
    """msgspec's message, in memsync's words where they read better."""
    return error.replace("Object missing required field", "missing field")


def _header(obj: dict[str, object], source: str, line_no: int) -> Header:
    fmt = obj["format"]
    if type(fmt) is not str or _SUPPORTED_FORMAT.match(fmt) is None:
        where = f"{source}:{line_no}" if line_no else source
        raise UnsupportedFormat(where, str(fmt))
    gen, install = obj.get("generation"), obj.get("install")
    return Header(fmt, gen if type(gen) is str else None, install if type(install) is str else None)


def is_header(raw: bytes) -> bool:
    """Whether a line is a header (rule 2), supported or not."""
    try:
        return type(classify(raw)) is Header
    except UnsupportedFormat:
        return True  # a header all the same: reading it raises, as rule 2 says
