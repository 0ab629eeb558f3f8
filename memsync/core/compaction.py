"""Compaction planning (SEMANTICS rule 15): which lines a rewritten file must keep.

Pure: records in, a `CompactionPlan` out; the shell (`memsync.local.compaction`) reads the file
and writes the result. Two passes over the file, so that memory stays that of one `Index`:
`Survey.fold` takes every line once (pass 1), `plan_compaction` decides, and
`CompactionPlan.account` takes every line again (pass 2) only to count what is dropped and
why, and to hand back the bad lines for the side file (rule 4).

What "invisible to every future merge" requires
------------------------------------------------
The view of a set of records depends, for each id X, only on (see `memsync.core.view`):
T(X), the instant of its latest tombstone; U(X) and I(X), its best user and best inferred
versions; and S(X), whether some user entry, and whether some inferred entry, ever
superseded X. Adding lines L joins these summaries (max, max, max, or), so a compacted
file C, a subset of O, satisfies view(C + L) == view(O + L) for every L and every `now`
when, per id:

1. C holds the latest tombstone of X (rule 8). An older one is redundant: T is a max.
2. C holds U(X) when it is later than T(X): any tombstone L brings either deletes it or
   not, and then it is current; a user version at or before T(X) is dead in every future
   union, and so is every lower one, so they all go ("deleted version").
3. C holds I(X) when it is later than T(X) and not older than a live U(X). An inferred
   version older than U(X) never becomes current: whatever deletes U(X) deletes it too,
   and while U(X) lives it outranks it (rule 9); the merge skips it for the same reason
   (rule 14). One at the very instant of U(X) is dead as well, but the merge would append
   it again, so it stays (no churn).
4. Versions are kept whatever their `expires_at` (rule 11): dropping an expired current
   version would let a stale older version, held by a replica, become current again.
5. Twins at a kept position (same key, different content, rule 7) are all kept: the
   tie-break takes the greatest canonical text among every twin ever seen, and dropping a
   loser would only make the merge append it again (churn).
6. S(X) is forever, whatever happens to the superseding record (rule 10), so for each
   superseded id C keeps one user superseding record when there is one, else one
   inferred. (When a user one exists the inferred one adds nothing: the user bit alone
   removes X.) That record is preferably one kept anyway; else one still later than its
   own id's tombstone; else a dead one, and then its own id's tombstone is **pinned**:
   kept forever, horizon or not. Without the pin the superseder, once its tombstone ages
   out, would come back to life as the current version of its id (the resurrection bug
   rule 15 warns about). A tombstone for the *superseded* id would not do: it is not
   forever, a later re-add of X would come alive, where supersession keeps X out. The
   versions of a superseded id are kept like any other: invisible, but dropping them
   would make every merge from a replica that holds them append them again.
7. A tombstone past the horizon and acknowledged (every replica read past it) may go,
   unless pinned; the versions it deleted went already (2, 3). Then the equality holds
   only for the L that replicas can still hold: none holds a version of X at or before
   the dropped tombstone without a tombstone as late (the acknowledgement), and nothing
   written from now on is dated that far back (the horizon).
8. Everything else goes: older versions, older tombstones, duplicates (same key, same
   canonical content, rule 7), headers (the shell writes a new one) and blank lines. Each
   dropped record is one the merge would judge beaten or duplicate (rule 14), so merging
   the original file into the compacted one appends nothing, with one harmless exception:
   a twin of a superseding record kept below its id's best version (a conflict only a
   broken writer leaves) is appended again, as the merge appends every twin.

Bad lines are not in the plan: `account` hands them back and the shell moves them, byte for
byte, to the side file (rule 4). Kept lines are copied byte for byte (rule 5), in
(`created_at`, `id`) order, so a reader that lets later lines win agrees with the view.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from operator import attrgetter

from memsync.core.compaction_limits import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_HORIZON_DAYS,
    DEFAULT_MAX_POSTPONE_SECONDS,
    DEFAULT_QUIET_SECONDS,
    MAX_HORIZON_DAYS,
    MAX_POSTPONE_SECONDS,
    MAX_WAIT_SECONDS,
    Rejected,
)
from memsync.core.lines import Blank, Header, Invalid, classify
from memsync.core.records import Record, canonical
from memsync.core.view import Index

__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_HORIZON_DAYS",
    "DEFAULT_MAX_POSTPONE_SECONDS",
    "DEFAULT_QUIET_SECONDS",
    "DROP_REASONS",
    "MAX_HORIZON_DAYS",
    "MAX_POSTPONE_SECONDS",
    "MAX_WAIT_SECONDS",
    "Candidate",
    "CompactionPlan",
    "PartPlan",
    "Rejected",
    "Survey",
    "compact_lines",
    "expiring_tombstones",
    "pick_superseders",
    "plan_compaction",
    "plan_part",
]

DROP_REASONS = (
    "duplicate",
    "older version",
    "deleted version",
    "replaced tombstone",
    "old tombstone",
    "header",
    "blank",
)
"""Why a line was dropped, in the order reports list them."""

Acknowledged = Container[bytes]
"""The lines of the tombstones every replica has read past (rule 15): data the shell looks
up (for the tombstones `expiring_tombstones` names), never a callback into its storage."""


def expiring_tombstones(survey: Survey, *, now: int, horizon: int) -> list[Record]:
    """The tombstones past the horizon: the only ones whose acknowledgement a plan asks
    about, so the only ones the shell needs to look up."""
    cutoff = now - horizon
    return [t for t in survey.index.tombs.values() if t.ts < cutoff]


@dataclass(slots=True)
class Survey:
    """Pass 1: what compaction must know of every record, folded in any order.

    Attributes:
        index: the per-id summary of the view (`memsync.core.view.Index`).
        superseding: for each superseded id, the distinct entries that supersede it
            (rule 10 counts every entry ever seen, live or not; about 1% of records).
    """

    index: Index = field(default_factory=Index)
    superseding: dict[str, dict[bytes, Record]] = field(default_factory=dict)

    def add(self, rec: Record) -> None:
        """Fold one record."""
        self.index.add(rec)
        if rec.supersedes is not None and not rec.deleted:
            self.superseding.setdefault(rec.supersedes, {}).setdefault(rec.raw, rec)

    def fold(self, lines: Iterable[bytes], *, source: str = "<bytes>", first_line: int = 1) -> None:
        """Fold complete lines (without their "\\n"); headers, blank and bad lines are left
        for pass 2. Raises UnsupportedFormat (rule 2)."""
        add = self.add
        for n, raw in enumerate(lines, first_line):
            parsed = classify(raw, source=source, line_no=n)
            if type(parsed) is Record:
                add(parsed)


@dataclass(slots=True)
class _Decisions:
    """What the plan decided, per id, for `account` to tell why a line was dropped."""

    index: Index
    floors: dict[str, int]
    expired: frozenset[str]

    def kept_best(self, best: Record) -> bool:
        """Whether the best version of its class (or a copy of it) is kept (rules 2, 3)."""
        if best.user:
            tomb = self.index.tombs.get(best.id)
            return tomb is None or best.ts > tomb.ts
        floor = self.floors.get(best.id)
        return floor is None or best.ts > floor


@dataclass(slots=True)
class CompactionPlan:
    """What the compacted file holds, and (once every line went through `account`) what
    was dropped: `dropped`, by reason (`DROP_REASONS`).

    Attributes:
        keep: the records to write, byte for byte, in (`created_at`, `id`) order.
        pinned: ids whose tombstone is past the horizon and acknowledged, yet kept because
            a kept superseding record of that id is dead without it (rule 15).
        rejected: how many bad lines `account` handed back for the side file.
    """

    keep: list[Record]
    pinned: set[str]
    _decisions: _Decisions = field(repr=False)
    rejected: int = 0
    _kept: frozenset[bytes] | None = field(default=None, repr=False)
    _counts: dict[str, int] = field(default_factory=dict, repr=False)
    _matched: int = field(default=0, repr=False)

    @property
    def dropped(self) -> dict[str, int]:
        """How many lines were dropped, by reason (bad lines not included)."""
        counts = dict(self._counts)
        copies = self._matched - len(self.keep)
        if copies > 0:  # every kept line occurs once in the file; more copies are duplicates
            counts["duplicate"] = counts.get("duplicate", 0) + copies
        return counts

    def data(self) -> Iterable[bytes]:
        """The kept lines, each with its "\\n", in batches (for streaming writes)."""
        batch: list[bytes] = []
        for rec in self.keep:
            batch.append(rec.raw)
            if len(batch) == 8192:
                yield b"\n".join(batch) + b"\n"
                batch = []
        if batch:
            yield b"\n".join(batch) + b"\n"

    def account(
        self, lines: Iterable[bytes], *, source: str = "<bytes>", first_line: int = 1
    ) -> list[Rejected]:
        """Pass 2: count the dropped lines among `lines` by reason; return the bad ones.

        Every line of the surveyed file must go through here exactly once for `dropped`
        to be complete. A line byte-equal to a kept record is cheap (a set lookup); only
        the others are classified again.
        """
        return self.account_numbered(enumerate(lines, first_line), source=source)

    def account_numbered(
        self, numbered: Iterable[tuple[int, bytes]], *, source: str = "<bytes>"
    ) -> list[Rejected]:
        """`account` for lines given with their line numbers (a partition of the file)."""
        if self._kept is None:
            self._kept = frozenset(rec.raw for rec in self.keep)
        kept = self._kept
        bad: list[Rejected] = []
        dropped = self._counts
        pairs = numbered if isinstance(numbered, list) else list(numbered)
        rest = [(n, raw) for n, raw in pairs if raw not in kept]
        self._matched += len(pairs) - len(rest)
        for n, raw in rest:
            parsed = classify(raw, source=source, line_no=n)
            if type(parsed) is Record:
                reason = self._reason(parsed)
            elif type(parsed) is Invalid:
                bad.append(Rejected(n, raw, parsed.reason))
                continue
            elif type(parsed) is Header:
                reason = "header"
            else:
                assert type(parsed) is Blank
                reason = "blank"
            dropped[reason] = dropped.get(reason, 0) + 1
        self.rejected += len(bad)
        return bad

    def _reason(self, rec: Record) -> str:
        """Why a record that is not kept was dropped (see the module docstring)."""
        decisions = self._decisions
        index = decisions.index
        tomb = index.tombs.get(rec.id)
        if rec.deleted:
            if rec.id in decisions.expired:
                return "old tombstone"
            if tomb is not None and tomb.ts == rec.ts:
                return "duplicate"
            return "replaced tombstone"
        if tomb is not None and rec.ts <= tomb.ts:
            return "deleted version"
        best = (index.user if rec.user else index.inferred).get(rec.id)
        if best is not None and best.ts == rec.ts and decisions.kept_best(best):
            return "duplicate"
        return "older version"


def plan_compaction(
    survey: Survey,
    *,
    now: int,
    horizon: int,
    acknowledged: Acknowledged | None = None,
) -> CompactionPlan:
    """Decide what the compacted file keeps (rule 15; the module docstring says why).

    Args:
        survey: every record of the file, folded (pass 1).
        now: the instant of the compaction, in microseconds.
        horizon: how old, in microseconds, a tombstone must be before it may go.
        acknowledged: the lines of the tombstones every replica known in the hub has
            read past (see `expiring_tombstones`); None means every tombstone is (a file
            with no hub).

    Returns:
        The plan; call `account` on every line of the file to fill its counts.
    """
    part = plan_part(survey, now=now, horizon=horizon, acknowledged=acknowledged)
    return part.finish(pick_superseders(part.candidates))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A record superseding `target`, as rule 6 of the module docstring ranks it: `cost`
    orders the candidates of one target (the least is kept), `kept` says whether its own id
    keeps it anyway, `pin` whether its id's tombstone must stay if it is chosen."""

    target: str
    rec: Record
    cost: tuple[int, int, bytes]
    kept: bool
    pin: bool


def pick_superseders(candidates: Iterable[Candidate]) -> list[Candidate]:
    """For each superseded id, the superseding record to keep: a user one when there is
    one, else an inferred one; the least `cost` among those (rule 6)."""
    best: dict[str, Candidate] = {}
    for c in candidates:
        old = best.get(c.target)
        if old is None or (not c.rec.user, c.cost) < (not old.rec.user, old.cost):
            best[c.target] = c
    return list(best.values())


@dataclass(slots=True)
class PartPlan:
    """What compaction decides for a set of ids whose records it has all seen (a whole
    file, or one of its partitions): every rule but the choice of superseding records,
    which may span ids in other partitions (rule 6). `candidates` are this part's
    superseding records, ranked; `finish` takes the ones picked across all parts."""

    keep: list[Record]
    candidates: list[Candidate]
    decisions: _Decisions
    expired: set[str]
    tombs: dict[str, Record]

    def finish(self, picks: Iterable[Candidate]) -> CompactionPlan:
        """The plan, given the candidates picked across all parts (`pick_superseders`;
        those of other parts are ignored): a picked record is kept, and its id's tombstone
        pinned when it is dead without it."""
        keep = list(self.keep)
        own = self.decisions.index
        pinned: set[str] = set()
        for c in picks:
            if c.rec.id not in own.user and c.rec.id not in own.inferred:
                continue  # another part's record (an entry is in one of the two)
            if not c.kept:
                keep.append(c.rec)
            if c.pin:
                pinned.add(c.rec.id)
        expired = self.expired - pinned
        self.decisions.expired = frozenset(expired)
        keep += [tomb for rid, tomb in self.tombs.items() if rid not in expired]
        keep.sort(key=attrgetter("ts", "id", "raw"))
        return CompactionPlan(keep=keep, pinned=pinned, _decisions=self.decisions)


def plan_part(
    survey: Survey,
    *,
    now: int,
    horizon: int,
    acknowledged: Acknowledged | None = None,
) -> PartPlan:
    """`plan_compaction` up to the choice of superseding records (see `PartPlan`)."""
    index = survey.index
    tombs = index.tombs

    # Rules 2 and 3: the best versions later than their id's tombstone, and an inferred
    # one only when later than a live user version too. Written as comprehensions: this
    # runs once per id of a file that may hold a million.
    floors = {rid: tomb.ts for rid, tomb in tombs.items()}
    users = [
        best for rid, best in index.user.items() if (t := tombs.get(rid)) is None or best.ts > t.ts
    ]
    # A live user version is later than T; an inferred one at its very instant is kept,
    # as the merge (rule 14) skips only inferred versions strictly older than a user one.
    floors.update((best.id, best.ts - 1) for best in users)
    inferred = [
        best
        for rid, best in index.inferred.items()
        if (f := floors.get(rid)) is None or best.ts > f
    ]
    decisions = _Decisions(index, floors, frozenset())
    keep = users + inferred
    twins = _twins(index, decisions)  # rule 5
    keep += twins
    twin_lines = {rec.raw for rec in twins}

    def kept(rec: Record) -> bool:
        best = (index.user if rec.user else index.inferred).get(rec.id)
        if best is not None and best.raw == rec.raw:
            return decisions.kept_best(best)
        return rec.raw in twin_lines

    # Rule 7: which tombstones could go.
    cutoff = now - horizon
    expired = {
        rid
        for rid, t in tombs.items()
        if t.ts < cutoff and (acknowledged is None or t.raw in acknowledged)
    }

    # Rule 6: each superseding record, ranked: kept anyway, else not deleted, else one
    # whose tombstone stays anyway, else (the latest first) one whose tombstone is pinned.
    candidates: list[Candidate] = []
    for target, found in survey.superseding.items():
        for rec in found.values():
            tomb = tombs.get(rec.id)
            is_kept = kept(rec)
            if is_kept:
                rank = 0
            elif tomb is None or rec.ts > tomb.ts:
                rank = 1
            elif rec.id not in expired:
                rank = 2
            else:
                rank = 3
            pin = tomb is not None and rec.ts <= tomb.ts and rec.id in expired
            candidates.append(Candidate(target, rec, (rank, -rec.ts, rec.raw), is_kept, pin))
    return PartPlan(keep, candidates, decisions, expired, tombs)


def _twins(index: Index, decisions: _Decisions) -> list[Record]:
    """Every canonically distinct twin at a kept best position (rule 7), besides the best
    itself."""
    found: list[Record] = []
    seen: dict[tuple[str, bool], set[bytes]] = {}
    for pair in index.twins:
        for rec in pair:
            best = (index.user if rec.user else index.inferred)[rec.id]
            if rec.ts != best.ts or rec.raw == best.raw or not decisions.kept_best(best):
                continue
            texts = seen.get((rec.id, rec.user))
            if texts is None:
                texts = seen[(rec.id, rec.user)] = {canonical(best)}
            text = canonical(rec)
            if text not in texts:
                texts.add(text)
                found.append(rec)
    return found


def compact_lines(
    lines: Iterable[bytes],
    *,
    now: int,
    horizon: int,
    acknowledged: Acknowledged | None = None,
) -> tuple[CompactionPlan, list[Rejected]]:
    """Plan the compaction of complete lines held in memory (both passes); for tests and
    small files. Returns the plan, with its counts, and the bad lines."""
    held = list(lines)
    survey = Survey()
    survey.fold(held)
    plan = plan_compaction(survey, now=now, horizon=horizon, acknowledged=acknowledged)
    return plan, plan.account(held)
