"""Hypothesis strategies for memory-file lines, as BYTES (the form every rule starts from).

The generated soups are built to make the hard cases common rather than lucky: a small id
alphabet so ids collide; creation times on a small grid so versions, tombstones and twins
meet at the same instant; the same record written again in another form (`...Z`,
`....000Z`, a `+01:00` offset, other key order, other spacing, `1` vs `1.0`); twins (same
id and instant, different text); tombstones and re-adds; supersession of another id;
expiry around `NOW`; bad lines, blank lines, stray headers, and a torn last line.

Speed: a soup of two dozen lines would cost hundreds of fine-grained draws (about 40 ms
per example). Instead Hypothesis draws one integer per line, and a plain function builds
the line from a `random.Random` seeded with it: one draw per line, a few ms per example,
and shrinking still works (fewer lines, smaller seeds, and seed 0 is a plain entry).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, timedelta, timezone
from typing import Any, TypeVar

from hypothesis import strategies as st

from memsync.core.records import KINDS
from memsync.core.timestamps import MS, SECOND, parse_ts, to_datetime

__all__ = [
    "BAD_LINES",
    "BLANK_LINES",
    "HEADER",
    "IDS",
    "NOW",
    "T0",
    "FileSoup",
    "RecordObject",
    "file_soups",
    "instants",
    "line_soups",
    "record_objects",
    "rewritten",
    "twin_sets",
]

IDS = ("a1a1a1a1a1a1", "b2b2b2b2b2b2", "c3c3c3c3c3c3", "d4d4d4d4d4d4")
"""Four ids: enough for supersession between ids, few enough that versions collide."""

_T0 = parse_ts("2026-11-01T00:00:00Z")
assert _T0 is not None
T0: int = _T0
MINUTE = 60 * SECOND
NOW = T0 + 6 * MINUTE
"""The `now` of the properties: inside the grid of creation and expiry times."""

HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-11-01T00:00:00Z"}'

_CREATED = b'"created_at": "2026-11-01T00:00:00Z"'
BAD_LINES = (
    b'{"id": "a1a1a1a1a1a1", "kind": "lesson", "text": "unterminated',
    b'{"id": "a1a1a1a1a1a1", "kind": "fact", "text": "\xff\xfe", ' + _CREATED + b"}",
    b"[1, 2, 3]",
    b'{"id": "a1a1a1a1a1a1", "kind": "fact", "text": "t", "confidence": "0.9", ' + _CREATED + b"}",
    b'{"id": "b2b2b2b2b2b2", "kind": "opinion", "text": "t", ' + _CREATED + b"}",
    b'{"id": "b2b2b2b2b2b2", "kind": "fact", "text": "t", "created_at": "yesterday"}',
    b'{"id": "c3c3c3c3c3c3", "kind": "fact", "text": "t", "created_at": "2026-11-01T00:00:00"}',
    b'{"id": "c3c3c3c3c3c3", "deleted": "yes", "created_at": "2026-11-01T00:05:00Z"}',
    b'{"kind": "fact", "text": "no id", ' + _CREATED + b"}",
    b'{"id": "d4d4d4d4d4d4", "kind": "fact", "text": "t", "confidence": NaN, ' + _CREATED + b"}",
)
"""Lines that must be bad (rule 4); several name a real id, so a reader that half-parsed
them would change the view."""

BLANK_LINES = (b"", b"   ", b"\r", b"\t ")

_TEXTS = ("x", "y", "zebra", "apple", "naïve café", "two\nlines", 'say "hi"')
_SOURCES: tuple[str | None, ...] = ("user", "user", "session:x", "session:y", None)
_SCOPES = ("global", "github.com", "project:x")


_T = TypeVar("_T")
_SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def instants() -> st.SearchStrategy[int]:
    """Creation and expiry instants on a small grid around `NOW` (so they collide), some
    with a millisecond part."""
    return st.builds(
        lambda m, ms: T0 + m * MINUTE + ms * MS,
        st.integers(min_value=0, max_value=10),
        st.sampled_from([0, 0, 0, 250]),
    )


def _instant(rng: random.Random) -> int:
    return T0 + rng.randint(0, 10) * MINUTE + rng.choice([0, 0, 0, 250]) * MS


_ZONES = (
    UTC,
    timezone(timedelta(hours=1)),
    timezone(timedelta(hours=-5, minutes=-30)),
    timezone(timedelta(hours=9)),
)


def _ts_text(rng: random.Random, us: int) -> str:
    """One of the many RFC 3339 spellings of the instant `us` (rule 6)."""
    zone = rng.choice(_ZONES)
    dt = to_datetime(us).astimezone(zone)
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    frac_digits = rng.choice([0, 3, 6])
    if dt.microsecond and frac_digits == 0:
        frac_digits = 3
    frac = "" if frac_digits == 0 else "." + f"{dt.microsecond:06d}"[:frac_digits]
    if zone is UTC and rng.random() < 0.5:
        suffix = "Z"
    else:
        off = dt.strftime("%z")  # "+0100": RFC 3339 wants "+01:00"
        suffix = off[:3] + ":" + off[3:]
    return base + frac + suffix


@dataclass(frozen=True)
class RecordObject:
    """A record object before rendering, with its instants kept as numbers so that it can
    be written again in another form."""

    fields: dict[str, Any]
    created: int
    expires: int | None

    @property
    def is_tombstone(self) -> bool:
        return self.fields.get("deleted") is True


_OPTIONAL: dict[str, tuple[Any, ...]] = {
    "scope": _SCOPES,
    "tags": ([], ["git"], ["a", "b"]),
    "source": _SOURCES,
    "confidence": (0, 0.5, 0.9, 1, 1.0),
    "supersedes": (None, *IDS),
    "x-unknown": (1, "kept", {"nested": [True]}),
}


def _entry(rng: random.Random) -> RecordObject:
    """An entry (rule 3), with optional fields sometimes absent and sometimes explicit."""
    fields: dict[str, Any] = {
        "id": rng.choice(IDS),
        "kind": rng.choice(KINDS),
        "text": rng.choice(_TEXTS),
    }
    for name, values in _OPTIONAL.items():
        if rng.random() < 0.5:
            fields[name] = rng.choice(values)
    expires = _instant(rng) if rng.random() < 0.3 else None
    if expires is None and rng.random() < 0.3:
        fields["expires_at"] = None
    return RecordObject(fields, _instant(rng), expires)


def _tombstone(rng: random.Random) -> RecordObject:
    """A tombstone (rule 3), sometimes with an unknown extra field."""
    fields: dict[str, Any] = {"id": rng.choice(IDS), "deleted": True}
    if rng.random() < 0.2:
        fields["reason"] = "user asked"
    return RecordObject(fields, _instant(rng), None)


def _record(rng: random.Random) -> RecordObject:
    return _tombstone(rng) if rng.random() < 0.25 else _entry(rng)


def _render(rng: random.Random, obj: RecordObject) -> bytes:
    """One line (no "\\n") for `obj`: any timestamp spelling, key order, spacing and
    escaping; `confidence` 1 and 1.0 interchangeably. All are the same record (rule 7)."""
    fields = dict(obj.fields)
    fields["created_at"] = _ts_text(rng, obj.created)
    if obj.expires is not None:
        fields["expires_at"] = _ts_text(rng, obj.expires)
    if fields.get("confidence") in (1, 1.0):
        fields["confidence"] = rng.choice([1, 1.0])
    keys = list(fields)
    order = rng.choice(["as-is", "sorted", "reversed", "shuffled"])
    if order == "sorted":
        keys.sort()
    elif order == "reversed":
        keys.reverse()
    elif order == "shuffled":
        rng.shuffle(keys)
    text = json.dumps(
        {k: fields[k] for k in keys},
        separators=rng.choice([(", ", ": "), (",", ":"), (" ,  ", " : ")]),
        ensure_ascii=rng.random() < 0.5,
    )
    return text.encode("utf-8")


def _twin_of(rng: random.Random, base: RecordObject) -> RecordObject:
    return RecordObject({**base.fields, "text": rng.choice(_TEXTS)}, base.created, base.expires)


def _seeded(build: Callable[[random.Random], _T]) -> st.SearchStrategy[_T]:
    return _SEEDS.map(lambda seed: build(random.Random(seed)))


def record_objects() -> st.SearchStrategy[RecordObject]:
    """Entries three times as often as tombstones."""
    return _seeded(_record)


def rewritten(obj: RecordObject, count: int) -> st.SearchStrategy[list[bytes]]:
    """`count` renderings of the same record (rule 7)."""
    return _seeded(lambda rng: [_render(rng, obj) for _ in range(count)])


def _twins(rng: random.Random) -> list[bytes]:
    base = _entry(rng)
    lines: list[bytes] = []
    for text in rng.sample(_TEXTS, rng.randint(2, 4)):
        twin = RecordObject({**base.fields, "text": text}, base.created, base.expires)
        lines += [_render(rng, twin) for _ in range(rng.randint(1, 2))]
    return lines


def twin_sets() -> st.SearchStrategy[list[bytes]]:
    """2 to 4 entries with one id and one instant but different texts (rule 7's twins),
    all of one source class, each written once or twice."""
    return _seeded(_twins)


_ACTIONS = ("new", "new", "new", "tomb", "twin", "again", "bad", "blank")


def _soup(seeds: list[int]) -> list[bytes]:
    objs: list[RecordObject] = []
    lines: list[bytes] = []
    for seed in seeds:
        rng = random.Random(seed)
        action = _ACTIONS[seed % len(_ACTIONS)]
        if action == "bad":
            lines.append(rng.choice(BAD_LINES))
            continue
        if action == "blank":
            lines.append(rng.choice(BLANK_LINES))
            continue
        if action == "tomb":
            obj = _tombstone(rng)
        elif action == "twin" and objs and not (base := rng.choice(objs)).is_tombstone:
            obj = _twin_of(rng, base)
        elif action == "again" and objs:
            obj = rng.choice(objs)
        else:
            obj = _entry(rng)
        objs.append(obj)
        lines.append(_render(rng, obj))
    return lines


def line_soups(max_lines: int = 24) -> st.SearchStrategy[list[bytes]]:
    """A list of complete lines (no "\\n"): entries, later versions, tombstones, re-adds,
    twins, the same record written differently, bad and blank lines."""
    return st.lists(_SEEDS, min_size=1, max_size=max_lines).map(_soup)


@dataclass(frozen=True)
class FileSoup:
    """The bytes of 1 to 3 files holding some lines between them."""

    files: list[bytes]


_TORN = (b'{"id": "a1a1a1a1a1a1", "kind": "fa', b"{", b"  ")


def _split(lines: list[bytes], rng: random.Random) -> FileSoup:
    order = lines[:]
    rng.shuffle(order)
    n_files = rng.randint(1, 3)
    cuts = sorted(rng.randint(0, len(order)) for _ in range(n_files - 1))
    bounds = [0, *cuts, len(order)]
    files = []
    for a, b in itertools.pairwise(bounds):
        part = order[a:b]
        if rng.random() < 0.5:
            part.insert(0, HEADER)
        if rng.random() < 0.3:
            part.insert(rng.randint(0, len(part)), HEADER)  # as `cat a b` leaves (rule 2)
        data = b"".join(line + b"\n" for line in part)
        if rng.random() < 0.25:
            data += rng.choice(_TORN)  # a write in progress (rule 1)
        files.append(data)
    return FileSoup(files)


def file_soups(lines: list[bytes]) -> st.SearchStrategy[FileSoup]:
    """`lines` in any order, split over 1 to 3 files; a file may start with a header, hold
    another one inside, and end in a torn line."""
    return _seeded(lambda rng: _split(lines, rng))
