"""Merge planning (SEMANTICS rules 6, 7, 13 and 14): which incoming records a file lacks.

Pure: the destination's summary and the incoming lines in, a `MergePlan` out. Most lines
are byte-identical between replicas, so a line whose digest the destination already holds
is skipped without parsing (the fast path); only the rest is classified and judged.

A record is appended when it is new to the file and not already beaten there (rule 14):
- a tombstone, unless the file (or the same batch) holds a tombstone of that id at least
  as late;
- an entry version, unless a tombstone at or after it is held, or a version of the same
  class (user or inferred) is later, or a user version is later (a user version outranks
  it for as long as it lives, and whatever deletes the user version deletes it too);
- except that a record carrying a `supersedes` the file does not know yet is always
  appended: supersession counts from every entry ever seen, live or not (rule 10).
Same key and same canonical content is a duplicate (rule 7); same key and different content
is a pair of twins: both are kept and reported (rule 9 settles which one wins).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import xxhash

from memsync.core.lines import BadLine, Invalid, classify
from memsync.core.records import Record, canonical
from memsync.core.view import SUPERSEDED_BY_INFERRED, SUPERSEDED_BY_USER, Index

__all__ = ["DEFAULT_MAX_FUTURE", "FileState", "Held", "MergePlan", "line_digest", "plan_merge"]

DEFAULT_MAX_FUTURE = 24 * 3600 * 1_000_000
"""Records dated more than this (microseconds) ahead of `now` are held, not merged yet."""


def line_digest(raw: bytes) -> int:
    """A 128-bit digest of a line's bytes: equal digests mean byte-identical lines (the
    chance of two different lines colliding is about 2**-128 a pair)."""
    return xxhash.xxh3_128_intdigest(raw.rstrip(b"\r"))


@dataclass(slots=True)
class FileState:
    """What a merge needs to know of its destination: the index of its records and the
    digests of its lines. Built by folding the file's lines with `add_lines`."""

    index: Index = field(default_factory=Index)
    digests: set[int] = field(default_factory=set)
    bad: list[BadLine] = field(default_factory=list)

    def add_lines(self, lines: Iterable[bytes], *, source: str, first_line: int = 1) -> None:
        """Fold complete lines of the destination (rule 2 headers and blank lines included)."""
        add_digest = self.digests.add
        add = self.index.add
        for n, raw in enumerate(lines, first_line):
            add_digest(line_digest(raw))
            parsed = classify(raw, source=source, line_no=n)
            if type(parsed) is Record:
                add(parsed)
            elif type(parsed) is Invalid:
                self.bad.append(BadLine(source, n, parsed.reason))


@dataclass(frozen=True, slots=True)
class Held:
    """A record dated too far ahead of the local clock: held, reported, merged later."""

    source: str
    line: int
    record: Record


@dataclass(slots=True)
class MergePlan:
    """What a merge would append, and what it saw.

    Attributes:
        append: the records to append, in (`created_at`, `id`) order so that a reader
            letting later lines win agrees with the view (rule 14).
        duplicates: incoming records the file already holds (byte for byte or rule 7).
        beaten: incoming records older than something the file holds (rule 14).
        held: records dated more than `max_future` ahead: not merged yet.
        bad: bad lines of the sources: reported, never merged (rule 4).
        twins: (file's record, incoming record) pairs with one key, different content.
    """

    append: list[Record] = field(default_factory=list)
    duplicates: int = 0
    beaten: int = 0
    held: list[Held] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    twins: list[tuple[Record, Record]] = field(default_factory=list)

    def data(self) -> bytes:
        """The bytes to append: each record's line exactly as read (rule 5)."""
        return b"".join(r.raw + b"\n" for r in self.append)

    @property
    def empty(self) -> bool:
        return not self.append


def _later(a: Record | None, b: Record | None) -> Record | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a.ts >= b.ts else b


def plan_merge(
    dest: FileState,
    incoming: Iterable[tuple[str, int, bytes]],
    now: int,
    max_future: int = DEFAULT_MAX_FUTURE,
) -> MergePlan:
    """Plan the merge of `incoming` (source name, line number, raw line) into `dest`.

    The plan depends on the set of incoming lines, not on their order, except for the
    order-free choice of which of several byte-different duplicates is kept.
    """
    plan = MergePlan()
    batch = Index()
    candidates: list[Record] = []
    known = dest.digests
    seen: set[int] = set()
    limit = now + max_future
    for source, line_no, raw in incoming:
        digest = line_digest(raw)
        if digest in known or digest in seen:
            plan.duplicates += 1
            continue
        seen.add(digest)
        parsed = classify(raw, source=source, line_no=line_no)
        if type(parsed) is Record:
            if parsed.ts > limit:
                plan.held.append(Held(source, line_no, parsed))
            else:
                batch.add(parsed)
                candidates.append(parsed)
        elif type(parsed) is Invalid:
            plan.bad.append(BadLine(source, line_no, parsed.reason))
    superseded = dict(dest.index.superseded)
    chosen: list[Record] = []
    for rec in candidates:
        verdict = _judge(rec, dest.index, batch, plan)
        if verdict == "append" or (verdict == "beaten" and _new_supersession(rec, superseded)):
            chosen.append(rec)
            _note_supersession(rec, superseded)
        elif verdict == "beaten":
            plan.beaten += 1
        else:
            plan.duplicates += 1
    chosen.sort(key=lambda r: (r.ts, r.id))
    plan.append = chosen
    plan.twins.extend(batch.twins)
    return plan


def _judge(rec: Record, dest: Index, batch: Index, plan: MergePlan) -> str:
    """ "append", "beaten" or "duplicate" for one incoming record (rules 7, 8, 9, 14)."""
    rid = rec.id
    if rec.deleted:
        held = dest.tombs.get(rid)
        if held is not None and held.ts >= rec.ts:
            return "duplicate" if held.ts == rec.ts else "beaten"
        best = batch.tombs[rid]
        if best is not rec and best.ts >= rec.ts:
            return "duplicate" if best.ts == rec.ts else "beaten"
        return "append"
    tomb = _later(dest.tombs.get(rid), batch.tombs.get(rid))
    if tomb is not None and rec.ts <= tomb.ts:
        return "beaten"
    same_class = (dest.user if rec.user else dest.inferred).get(rid)
    if same_class is not None and same_class.ts >= rec.ts:
        if same_class.ts > rec.ts:
            return "beaten"
        if same_class.raw == rec.raw or canonical(same_class) == canonical(rec):
            return "duplicate"
        plan.twins.append((same_class, rec))
        return "append"
    batch_best = (batch.user if rec.user else batch.inferred)[rid]
    if batch_best is not rec:
        if batch_best.ts > rec.ts:
            return "beaten"
        if canonical(batch_best) == canonical(rec):
            return "duplicate"  # the same record written two ways in two sources
    if not rec.user:
        user = _later(dest.user.get(rid), batch.user.get(rid))
        if user is not None and user.ts > rec.ts:
            return "beaten"
    return "append"


def _new_supersession(rec: Record, superseded: dict[str, int]) -> bool:
    """Whether `rec` supersedes an id in a way the file does not record yet (rule 10)."""
    if rec.deleted or rec.supersedes is None:
        return False
    bits = superseded.get(rec.supersedes, 0)
    if rec.user:
        return not bits & SUPERSEDED_BY_USER
    return not bits


def _note_supersession(rec: Record, superseded: dict[str, int]) -> None:
    if not rec.deleted and rec.supersedes is not None:
        bit = SUPERSEDED_BY_USER if rec.user else SUPERSEDED_BY_INFERRED
        superseded[rec.supersedes] = superseded.get(rec.supersedes, 0) | bit
