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

Two kinds of beaten record still travel (a tombstone older than the id's current version,
a superseding entry beaten in its own id); after them the plan repeats, byte for byte, the
line the view ends on for that id (its current version, or its latest tombstone), so that
a reader letting later lines win still agrees with the view (rule 14, amended).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Generator, Iterable
from dataclasses import dataclass, field

from memsync.core.clock import MAX_FUTURE
from memsync.core.lines import BadLine, Invalid, SourceLines, classify
from memsync.core.records import Record, canonical
from memsync.core.scan import line_digest, relevant_index
from memsync.core.secrets import record_secrets
from memsync.core.view import SUPERSEDED_BY_INFERRED, SUPERSEDED_BY_USER, Index, wins

__all__ = [
    "DEFAULT_MAX_FUTURE",
    "Ask",
    "DigestSet",
    "Held",
    "Incoming",
    "Known",
    "MergePlan",
    "MergeSteps",
    "Relevant",
    "Withheld",
    "collect_incoming",
    "judge",
    "merge_steps",
    "plan_merge",
    "supersession_targets",
]

DEFAULT_MAX_FUTURE = MAX_FUTURE
"""Records dated more than this (microseconds) ahead of `now` are held, not merged yet."""


@dataclass(frozen=True, slots=True)
class Held:
    """A record dated too far ahead of the local clock: held, reported, merged later."""

    source: str
    line: int
    record: Record


@dataclass(frozen=True, slots=True)
class Withheld:
    """An incoming record that looks like it holds a credential (issue 13, item 6): not
    merged, reported with what it looks like. It stays where it came from (a peer's file,
    a hub file) for its author to remove; the spec says never to store secrets in a memory
    file, so one must not spread from machine to machine."""

    source: str
    line: int
    id: str
    kinds: tuple[str, ...]


@dataclass(slots=True)
class MergePlan:
    """What a merge would append, and what it saw.

    Attributes:
        append: the records to append, in (`created_at`, `id`) order, then the `repeated`
            ones, so that a reader letting later lines win agrees with the view (rule 14).
        repeated: records of `append` that the file or `append` already holds: the line an
            id's view ends on, repeated after a beaten record that travels (rule 14).
        duplicates: incoming records the file already holds (byte for byte or rule 7).
        beaten: incoming records older than something the file holds (rule 14).
        held: records dated more than `max_future` ahead: not merged yet.
        withheld: records that look like they hold a credential: never merged.
        bad: bad lines of the sources: reported, never merged (rule 4).
        twins: (file's record, incoming record) pairs with one key, different content.
    """

    append: list[Record] = field(default_factory=list)
    repeated: list[Record] = field(default_factory=list)
    duplicates: int = 0
    beaten: int = 0
    held: list[Held] = field(default_factory=list)
    withheld: list[Withheld] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    twins: list[tuple[Record, Record]] = field(default_factory=list)

    def data(self) -> bytes:
        """The bytes to append: each record's line exactly as read (rule 5). One join of the
        lines as they are (no copy of each with its "\\n"): a batch's bytes are made once."""
        if not self.append:
            return b""
        return b"\n".join([*(r.raw for r in self.append), b""])

    @property
    def empty(self) -> bool:
        return not self.append


def _later(a: Record | None, b: Record | None) -> Record | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a.ts >= b.ts else b


@dataclass(slots=True)
class Incoming:
    """The incoming lines a destination does not hold byte for byte, classified.

    `ids` names what the destination must be asked about (see `relevant_index`).
    """

    candidates: list[Record] = field(default_factory=list)
    batch: Index = field(default_factory=Index)
    known: int = 0
    held: list[Held] = field(default_factory=list)
    withheld: list[Withheld] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)

    @property
    def ids(self) -> set[str]:
        return {r.id for r in self.candidates}


DigestSet = set[int] | frozenset[int]
"""The destination's line digests, as data. (The persistent index is not one: it answers
the `Known` asks of `merge_steps` instead, so that the core never calls into SQLite.)"""


def collect_incoming(
    known: DigestSet,
    incoming: Iterable[SourceLines],
    now: int,
    max_future: int = DEFAULT_MAX_FUTURE,
) -> Incoming:
    """First half of a merge: drop the lines whose digest is `known` (the destination's
    lines: the fast path, no parsing), classify the rest, hold the future-dated (more than
    `max_future` ahead of `now`), and report bad lines (rule 4).

    `incoming` yields chunks: (source name, line number of the first line, lines).
    """
    inc = Incoming()
    seen: set[int] = set()
    limit = now + max_future
    for source, first_line, lines in incoming:
        digests = list(map(line_digest, lines))
        _collect_chunk(
            inc, seen, limit, source, first_line, lines, digests, known.intersection(digests)
        )
    return inc


def _collect_chunk(
    inc: Incoming,
    seen: set[int],
    limit: int,
    source: str,
    first_line: int,
    lines: list[bytes],
    digests: list[int],
    held: Collection[int],
) -> None:
    """`collect_incoming` for one chunk whose digests the destination holds are `held`."""
    fresh = [i for i, d in enumerate(digests) if d not in held] if held else range(len(lines))
    inc.known += len(lines) - len(fresh)
    for i in fresh:
        digest = digests[i]
        if digest in seen:
            inc.known += 1
            continue
        seen.add(digest)
        line_no = first_line + i
        parsed = classify(lines[i], source=source, line_no=line_no)
        if type(parsed) is Record:
            secrets = record_secrets(parsed.raw)
            if secrets:
                inc.withheld.append(Withheld(source, line_no, parsed.id, tuple(secrets)))
            elif parsed.ts > limit:
                inc.held.append(Held(source, line_no, parsed))
            else:
                inc.batch.add(parsed)
                inc.candidates.append(parsed)
        elif type(parsed) is Invalid:
            inc.bad.append(BadLine(source, line_no, parsed.reason))


def supersession_targets(inc: Incoming, dest: Index) -> set[str]:
    """The ids superseded by candidates that `judge` would find beaten: only for those does
    it need to know whether the destination already records the supersession (rule 10),
    so only for those is the destination searched for superseding entries."""
    scratch = MergePlan()
    return {
        rec.supersedes
        for rec in inc.candidates
        if rec.supersedes is not None and _judge(rec, dest, inc.batch, scratch) == "beaten"
    }


def judge(inc: Incoming, dest: Index) -> MergePlan:
    """Second half of a merge: decide each candidate against `dest`, an index holding (at
    least) every destination record for which `dest_relevant` is true (rules 7, 10, 14)."""
    plan = MergePlan(duplicates=inc.known, held=inc.held, withheld=inc.withheld, bad=inc.bad)
    superseded = dict(dest.superseded)
    chosen: list[Record] = []
    # What was chosen of each key. One record written two ways is judged "append" in both
    # spellings whenever the best it is compared with is a twin (in the batch or in the
    # file: the file's twin is not its copy); only the first spelling is kept (rule 7).
    chosen_keys: dict[tuple[str, int], list[Record]] = {}
    for rec in inc.candidates:
        verdict = _judge(rec, dest, inc.batch, plan)
        if verdict == "append" or (verdict == "beaten" and _new_supersession(rec, superseded)):
            kept = chosen_keys.setdefault(rec.key, [])
            if kept and _has_copy(kept, rec):
                plan.duplicates += 1
                if plan.twins and plan.twins[-1][1] is rec:
                    plan.twins.pop()  # reported once, with its first spelling
                continue
            kept.append(rec)
            chosen.append(rec)
            _note_supersession(rec, superseded)
        elif verdict == "beaten":
            plan.beaten += 1
        else:
            plan.duplicates += 1
    # At one instant a tombstone goes after the entries it deletes (rule 8).
    chosen.sort(key=lambda r: (r.ts, r.id, r.deleted))
    plan.repeated = _repeats(chosen, dest, inc.batch)
    plan.append = chosen + plan.repeated
    plan.twins.extend(inc.batch.twins)
    return plan


def _read_later_wins(state: Record | None, rec: Record) -> Record:
    """One step of the spec's naive reader (rule 14): later lines win, a tombstone deletes,
    but a user version is not replaced by an inferred one."""
    if rec.deleted or state is None or state.deleted or not state.user or rec.user:
        return rec
    return state


def _ends_on(rid: str, dest: Index, batch: Index) -> tuple[Record | None, Record | None]:
    """The id's latest tombstone and current version (rules 8, 9) once the batch is in."""
    tomb = _later(dest.tombs.get(rid), batch.tombs.get(rid))
    floor = None if tomb is None else tomb.ts
    for a, b in ((dest.user, batch.user), (dest.inferred, batch.inferred)):
        x, y = a.get(rid), b.get(rid)
        best = x if y is None or (x is not None and not wins(y, x)) else y
        if best is not None and (floor is None or best.ts > floor):
            return tomb, best
    return tomb, None


def _repeats(chosen: list[Record], dest: Index, batch: Index) -> list[Record]:
    """The lines to repeat after `chosen` so that a later-lines-win reader ends, for every
    id `chosen` touches, where the view does (rule 14): the id's current version, or a
    tombstone when it has none. Starting from the file's own state for the id (the view's,
    where the file's writers kept time order), the reader is run over `chosen`; where it
    ends elsewhere (an old tombstone, or a beaten superseding entry, travelled last), the
    winning line is repeated, after the latest tombstone when the reader sits on a user
    version the view has deleted."""
    state: dict[str, Record | None] = {}
    for rec in chosen:
        rid = rec.id
        if rid not in state:
            state[rid] = dest.current(rid) or dest.tombs.get(rid)
        state[rid] = _read_later_wins(state[rid], rec)
    out: list[Record] = []
    for rid, last in state.items():
        if last is None:  # unreachable: `chosen` holds a record of rid
            continue
        tomb, current = _ends_on(rid, dest, batch)
        if current is None:
            if not last.deleted and tomb is not None:
                out.append(tomb)
        elif last.deleted or last.key != current.key or not _same(last, current):
            if not last.deleted and last.user and not current.user and tomb is not None:
                out.append(tomb)
            out.append(current)
    return out


def _same(a: Record, b: Record) -> bool:
    return a.raw == b.raw or canonical(a) == canonical(b)


@dataclass(frozen=True, slots=True)
class Known:
    """What the merge sequence asks of its caller for each chunk of incoming lines: which
    of these line digests the destination holds (the fast path: those are not parsed)."""

    digests: list[int]


@dataclass(frozen=True, slots=True)
class Relevant:
    """What the merge sequence asks of its caller between its steps: an index of the
    destination's records that bear on `incoming` (its ids), and, when `targets` is not
    empty (rare: a second ask), also of the entries superseding those ids (rule 10)."""

    incoming: Incoming
    targets: set[str]


Ask = Known | Relevant
MergeSteps = Generator[Ask, Collection[int] | Index, MergePlan]
"""`merge_steps`: yields what it needs to know (`Known`: answered with the digests held;
`Relevant`: answered with an `Index`), returns the plan."""


def merge_steps(
    incoming: Iterable[SourceLines],
    now: int,
    max_future: int = DEFAULT_MAX_FUTURE,
) -> MergeSteps:
    """The merge sequence (rule 14), written once: collect the incoming lines the
    destination lacks (a `Known` ask per chunk), ask for the destination's relevant
    records, ask again for supersession targets when there are any, judge.

    Sans-I/O, like h11: the caller drives it and does the reading, from memory
    (`plan_merge`), a streamed file or the persistent index (`memsync.local.destination`).
    """
    inc = Incoming()
    seen: set[int] = set()
    limit = now + max_future
    for source, first_line, lines in incoming:
        digests = list(map(line_digest, lines))
        held = yield Known(digests)
        assert not isinstance(held, Index)
        _collect_chunk(inc, seen, limit, source, first_line, lines, digests, held)
    index = yield Relevant(inc, set())
    assert isinstance(index, Index)
    targets = supersession_targets(inc, index)
    if targets:
        index = yield Relevant(inc, targets)
        assert isinstance(index, Index)
    return judge(inc, index)


def plan_merge(
    dest: Iterable[bytes],
    incoming: Iterable[SourceLines],
    now: int,
    max_future: int = DEFAULT_MAX_FUTURE,
) -> MergePlan:
    """Plan the merge of `incoming` (chunks of source lines) into a destination
    whose complete lines are `dest` (`merge_steps` driven in memory; the file merge
    streams the destination instead)."""
    lines = list(dest)
    known = {line_digest(raw) for raw in lines}
    index = Index()
    steps = merge_steps(incoming, now, max_future)
    ask = next(steps)
    try:
        while True:
            if isinstance(ask, Known):
                ask = steps.send(known.intersection(ask.digests))
            elif ask.targets:
                ask = steps.send(relevant_index(lines, set(), ask.targets, into=index))
            else:
                ask = steps.send(relevant_index(lines, ask.incoming.ids, into=index))
    except StopIteration as done:
        plan: MergePlan = done.value
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
        if _has_copy(itertools.chain.from_iterable(dest.twins), rec):
            return "duplicate"  # the file holds it too, as the losing twin (rule 7)
        if _beaten_by_user(rec, dest, batch):
            return "beaten"  # as it is without the twin: a merge again must not append it
        plan.twins.append((same_class, rec))
        return "append"
    batch_best = (batch.user if rec.user else batch.inferred)[rid]
    if batch_best is not rec:
        if batch_best.ts > rec.ts:
            return "beaten"
        if canonical(batch_best) == canonical(rec):
            return "duplicate"  # the same record written two ways in two sources
    if _beaten_by_user(rec, dest, batch):
        return "beaten"
    return "append"


def _beaten_by_user(rec: Record, dest: Index, batch: Index) -> bool:
    """Whether inferred `rec` is older than a user version of its id (rules 9 and 14)."""
    if rec.user:
        return False
    user = _later(dest.user.get(rec.id), batch.user.get(rec.id))
    return user is not None and user.ts > rec.ts


def _has_copy(records: Iterable[Record], rec: Record) -> bool:
    """Whether `records` hold `rec` (its key and canonical content, rule 7), maybe written
    another way. Asked only where twins met: an `Index` keeps the best of each key, so the
    other twin is found only among its `twins`."""
    content: bytes | None = None
    for other in records:
        if other is rec or other.id != rec.id or other.ts != rec.ts:
            continue
        if other.raw == rec.raw:
            return True
        if content is None:
            content = canonical(rec)
        if canonical(other) == content:
            return True
    return False


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
