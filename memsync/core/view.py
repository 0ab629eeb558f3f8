"""The view of a set of records (SEMANTICS rules 7 to 12): pure, order-independent.

`Index` folds records one at a time into a small per-id summary: the latest tombstone, the
best user version, the best inferred version, and who superseded the id. That summary is
all the view needs (rule 8: a tombstone at T deletes every version at or before T, so the
best version of a class either survives or none of that class does), and it is the same
whatever order the records arrive in. `build_view` then applies rules 9 to 12 at `now`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from itertools import islice
from operator import attrgetter, eq
from typing import Any

import msgspec

from memsync.core.lines import BadLine, Header, Invalid, classify
from memsync.core.prompt import scope_matches
from memsync.core.records import Record, canonical_line

__all__ = [
    "SUPERSEDED_BY_INFERRED",
    "SUPERSEDED_BY_USER",
    "Index",
    "View",
    "build_view",
    "distinct_twins",
    "selector",
    "sort_by_key",
    "wins",
]

SUPERSEDED_BY_USER = 1
SUPERSEDED_BY_INFERRED = 2

_RAW: Callable[[Record], bytes] = attrgetter("raw")


def wins(new: Record, old: Record, line: Callable[[Record], bytes] = _RAW) -> bool:
    """Whether `new` beats `old` within one class (rule 9): later wins; an exact tie goes to
    the greater canonical JSON text. Equal canonical content is the same record (rule 7).

    `line(record)` gives a record's line: its `raw`, unless its line is not held
    (`Located`); it is called only on a tie.
    """
    if new.ts != old.ts:
        return new.ts > old.ts
    a, b = line(new), line(old)
    if a == b:
        return False
    return canonical_line(a) > canonical_line(b)


# A slots class, not a msgspec Struct (as View is): the fold reads its attributes for
# every record, and CPython 3.11 reads a slot about 25% faster than a Struct field. Written
# out, not a `@dataclass(slots=True)`: creating that class cost every warm `prompt`,
# `forget` and `recall` about 0.4 ms at import (issue 20); the same fields, defaults,
# equality (and so no hash) and repr.
class Index:
    """Per-id summary of every record seen (rules 8 to 10), built in any order.

    Attributes:
        tombs: the latest tombstone of each id.
        user: the best `source: "user"` version of each id.
        inferred: the best other version of each id.
        superseded: for each id some entry supersedes, SUPERSEDED_BY_USER and/or
            SUPERSEDED_BY_INFERRED bits (rule 10: every entry ever seen counts).
        twins: pairs of records with the same key and different content (rule 7) met
            while folding; the pair's first item is the one that wins rule 9's tie-break.
        records: how many records were added.
        line: gives a record's line, to settle a tie (rule 7 and 9): its `raw` by
            default; a reader of `Located` records passes one that reads the line again.
    """

    __slots__ = ("inferred", "line", "records", "superseded", "tombs", "twins", "user")
    __match_args__ = ("tombs", "user", "inferred", "superseded", "twins", "records", "line")
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    tombs: dict[str, Record]
    user: dict[str, Record]
    inferred: dict[str, Record]
    superseded: dict[str, int]
    twins: list[tuple[Record, Record]]
    records: int
    line: Callable[[Record], bytes]

    def __init__(
        self,
        tombs: dict[str, Record] | None = None,
        user: dict[str, Record] | None = None,
        inferred: dict[str, Record] | None = None,
        superseded: dict[str, int] | None = None,
        twins: list[tuple[Record, Record]] | None = None,
        records: int = 0,
        line: Callable[[Record], bytes] = _RAW,
    ) -> None:
        self.tombs = {} if tombs is None else tombs
        self.user = {} if user is None else user
        self.inferred = {} if inferred is None else inferred
        self.superseded = {} if superseded is None else superseded
        self.twins = [] if twins is None else twins
        self.records = records
        self.line = line

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Index)
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__match_args__)
        return f"Index({inner})"

    def add(self, rec: Record) -> None:
        """Fold one record into the summary."""
        self.records += 1
        if rec.deleted:
            best = self.tombs
        else:
            best = self.user if rec.user else self.inferred
            if rec.supersedes is not None:
                bit = SUPERSEDED_BY_USER if rec.user else SUPERSEDED_BY_INFERRED
                self.superseded[rec.supersedes] = self.superseded.get(rec.supersedes, 0) | bit
        if not rec.deleted:
            other = (self.inferred if rec.user else self.user).get(rec.id)
            if other is not None and other.ts == rec.ts and not self._same(other, rec):
                # Same key, different source class: twins too (rule 7); rule 9 ranks the
                # user one first, so the view needs nothing more.
                self.twins.append((other, rec) if other.user else (rec, other))
        old = best.get(rec.id)
        if old is None:
            best[rec.id] = rec
        elif wins(rec, old, self.line):
            if old.ts == rec.ts and not rec.deleted:
                self.twins.append((rec, old))
            best[rec.id] = rec
        elif old.ts == rec.ts and not rec.deleted and not self._same(old, rec):
            self.twins.append((old, rec))

    def _same(self, a: Record, b: Record) -> bool:
        """Whether two records of one key have the same content (rule 7)."""
        line_a, line_b = self.line(a), self.line(b)
        return line_a == line_b or canonical_line(line_a) == canonical_line(line_b)

    def fold_lines(
        self, lines: list[bytes], *, source: str, first_line: int = 1
    ) -> tuple[list[BadLine], list[Header]]:
        """Classify complete lines and fold their records in; return the bad lines (with
        file and line number) and the headers met. Raises UnsupportedFormat (rule 2)."""
        bad: list[BadLine] = []
        headers: list[Header] = []
        add = self.add
        for n, raw in enumerate(lines, first_line):
            parsed = classify(raw, source=source, line_no=n)
            if type(parsed) is Record:
                add(parsed)
            elif type(parsed) is Invalid:
                bad.append(BadLine(source, n, parsed.reason))
            elif type(parsed) is Header:
                headers.append(parsed)
        return bad, headers

    def ids(self) -> set[str]:
        """Every id that has a record."""
        return set(self.tombs) | set(self.user) | set(self.inferred)

    def current(self, rid: str) -> Record | None:
        """The current version of `rid` (rules 8 and 9), before supersession and expiry;
        None when every version is deleted or there is none."""
        tomb = self.tombs.get(rid)
        floor = tomb.ts if tomb is not None else None
        for best in (self.user, self.inferred):
            rec = best.get(rid)
            if rec is not None and (floor is None or rec.ts > floor):
                return rec
        return None

    def is_superseded(self, rid: str, current: Record) -> bool:
        """Rule 10: superseded for good, except that an inferred record cannot supersede an
        id whose current version is from the user."""
        bits = self.superseded.get(rid, 0)
        if bits & SUPERSEDED_BY_USER:
            return True
        return bool(bits & SUPERSEDED_BY_INFERRED) and not current.user

    def alive(self, rid: str, now: int) -> Record | None:
        """The live current version of `rid` at `now` (rules 8 to 11), or None."""
        cur = self.current(rid)
        if cur is None or self.is_superseded(rid, cur):
            return None
        if cur.expires is not None and cur.expires <= now:
            return None
        return cur


def distinct_twins(
    pairs: Iterable[tuple[Record, Record]], index: Index
) -> list[tuple[Record, Record]]:
    """The conflicts (rule 7) among `pairs`, twins met by the fold into `index` (records
    holding their lines), each once and the same whatever order the fold read: for each
    key, the record that wins there (rule 9: the user one, then the greater canonical
    text) paired with each other content met there, keys by (id, instant), a key's
    others greatest text first.

    Only the keys of current versions: a pair of one class where that class's best
    version of the id lies, a pair across the classes where both classes' do. A fold
    keeps the best version of each class (`Index.add`), so it meets every content at
    those keys whatever the order, and a twin at an older key only when it reads it
    before a later version: reported so, `check` would answer by the order of the lines.
    And a fold meets a pair once per line it reads (a merge repeats lines, rule 14)."""
    contents: dict[tuple[str, int], dict[bytes, Record]] = {}
    for pair in pairs:
        if all(_at_current_key(rec, index) for rec in pair):
            for rec in pair:
                key = (rec.id, rec.ts)
                contents.setdefault(key, {}).setdefault(canonical_line(rec.raw), rec)
    found: list[tuple[Record, Record]] = []
    for key in sorted(contents):
        met = sorted(contents[key].items(), key=lambda c: (c[1].user, c[0]), reverse=True)
        found += [(met[0][1], other) for _, other in met[1:]]
    return found


def _at_current_key(rec: Record, index: Index) -> bool:
    """Whether `rec` has the key of its class's best version in `index` (rule 9)."""
    best = (index.user if rec.user else index.inferred).get(rec.id)
    return best is not None and best.ts == rec.ts


class View(msgspec.Struct, frozen=True):
    """Live current versions ordered by (`created_at`, `id`) (rule 12), and the twins met."""

    live: list[Record]
    twins: list[tuple[Record, Record]]

    def __len__(self) -> int:
        return len(self.live)


def build_view(index: Index, now: int) -> View:
    """The view of the records folded into `index`, at `now` in microseconds (rules 8 to 12).

    Equivalent to calling `index.alive(rid, now)` for every id, written for a file that
    may hold a million: most ids have versions of one class and nothing else, so the few
    that also have a tombstone, a version of the other class or a supersession are found
    with set operations (in C) and judged one by one; the others are live unless expired.
    """
    tombs, user, inferred, superseded = index.tombs, index.user, index.inferred, index.superseded
    dead_user: set[str] = set()  # ids whose user version is not current and live
    for rid in user.keys() & tombs.keys():
        if user[rid].ts <= tombs[rid].ts:
            dead_user.add(rid)  # every user version is deleted (rule 8)
    for rid in user.keys() & superseded.keys():
        if superseded[rid] & SUPERSEDED_BY_USER:
            dead_user.add(rid)  # rule 10
    dead_inferred = inferred.keys() & superseded.keys()  # rule 10: by either class
    for rid in inferred.keys() & tombs.keys():
        if inferred[rid].ts <= tombs[rid].ts:
            dead_inferred.add(rid)
    for rid in inferred.keys() & user.keys():
        tomb = tombs.get(rid)
        if tomb is None or user[rid].ts > tomb.ts:
            dead_inferred.add(rid)  # the user version is current (rule 9)
    live = _unexpired(user, dead_user, now)
    live += _unexpired(inferred, dead_inferred, now)
    sort_by_key(live)
    return View(live, list(index.twins))


def _unexpired(best: dict[str, Record], dead: set[str], now: int) -> list[Record]:
    """The records of `best` but those of the ids in `dead` and those expired at `now`
    (rule 11), in `best`'s order."""
    records = [r for rid, r in best.items() if rid not in dead] if dead else list(best.values())
    expires = list(map(_EXPIRES, records))
    if expires.count(None) == len(records):  # no expiry at all: nothing more to judge
        return records
    return [r for r, at in zip(records, expires, strict=True) if at is None or at > now]


def sort_by_key(records: list[Record]) -> None:
    """Sort records by (`created_at`, `id`) (rule 12), in place.

    Sorted by the instant alone first (integer keys, no tuple per record: a million records
    sort in a third of the time), then each run of equal instants by id; such runs are rare.
    """
    records.sort(key=_TS)
    stamps = list(map(_TS, records))
    if not any(map(eq, stamps, islice(stamps, 1, None))):
        return
    i, n = 0, len(records)
    while i < n:
        j = i + 1
        while j < n and stamps[j] == stamps[i]:
            j += 1
        if j - i > 1:
            records[i:j] = sorted(records[i:j], key=_ID)
        i = j


_TS = attrgetter("ts")
_EXPIRES = attrgetter("expires")
_ID = attrgetter("id")


def selector(
    *, scope: str | None = None, kinds: Collection[str] = ()
) -> Callable[[dict[str, Any]], bool] | None:
    """`show`'s filter: a test of one record's JSON object, true for records of any of
    `kinds` (all when empty) that belong to a task with scope `scope`
    (`core.prompt.scope_matches`: global entries always do); None when every record is
    kept (no scope and no kinds given)."""
    if scope is None and not kinds:
        return None

    def keep(obj: dict[str, Any]) -> bool:
        if kinds and obj["kind"] not in kinds:
            return False
        return scope is None or scope_matches(obj.get("scope", "global"), scope)

    return keep
