"""Properties of compaction (SEMANTICS rule 15), with Hypothesis.

1. Compaction is invisible to any later merge: for random original lines O and random
   lines L held elsewhere, view(compact(O) + L) == view(O + L), at several instants, by the
   union and by the real merge planner; and merging O into compact(O) appends nothing but
   twins of kept records.
2. The same after tombstones are dropped at the horizon, for the L that replicas which have
   read past every tombstone can hold.
3. A stateful test over 2 to 4 replica files: appends (entries, versions, tombstones,
   re-adds, supersessions, expiry, user and inferred), merges of one replica into another
   (`merge_files`), and compactions (`compact_file`), with a horizon no tombstone reaches,
   or with horizon 0 for the tombstones every replica held at the last full exchange. After
   every step each replica's view equals the view of the lines it was given; after a final
   full exchange every replica's view equals the view of everything ever written.

Views are compared by canonical content (rule 7): which of two byte-different copies of
one record a file shows depends on line order, and is not a difference.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from memsync.core.compaction import compact_lines
from memsync.core.lines import classify
from memsync.core.merge import plan_merge
from memsync.core.records import Record, canonical
from memsync.core.timestamps import SECOND, format_ts
from memsync.core.view import Index, build_view
from memsync.local.compaction import compact_file
from memsync.local.fresh import header_line
from memsync.local.merge import merge_files
from memsync.local.reading import view_of
from memsync.local.storage import append_bytes
from tests.helpers.examples import examples

EXAMPLES = examples(0.5)

T0 = 1_767_225_600 * SECOND  # 2026-01-01T00:00:00Z
VIEW_NOWS = (T0 + 12 * SECOND, T0 + 27 * SECOND, T0 + 10**6 * SECOND)
"""Instants the views are compared at: expiry (rule 11) differs between them."""
LATER = T0 + 10**7 * SECOND
"""The compactions' and merges' `now`: after every record (none is held as future-dated,
and with horizon 0 every acknowledged tombstone is old enough to go)."""
FOREVER_DAYS = 1e6
IDS = ("a", "b", "c", "d")
HEADER = header_line(T0, "0000000000000000")


@dataclass(frozen=True)
class Spec:
    """A record to write, `dt` seconds after a floor."""

    rid: str
    dt: int
    deleted: bool
    user: bool
    text: str
    supersedes: str | None
    expires_in: int | None
    offset_form: bool

    def line(self, floor: int = 0) -> bytes:
        t = floor + self.dt
        obj: dict[str, object] = {"id": self.rid, "created_at": _ts(t, self.offset_form)}
        if self.deleted:
            obj["deleted"] = True
        else:
            obj.update(kind="fact", text=self.text)
            if self.user:
                obj["source"] = "user"
            if self.supersedes is not None:
                obj["supersedes"] = self.supersedes
            if self.expires_in is not None:
                obj["expires_at"] = _ts(t + self.expires_in, False)
        return json.dumps(obj).encode()


def _ts(seconds: int, offset_form: bool) -> str:
    """RFC 3339 for T0 + seconds, as UTC or (the same instant) at +01:00 (rule 6)."""
    us = T0 + seconds * SECOND
    if not offset_form:
        return format_ts(us)
    return format_ts(us + 3600 * SECOND).replace("Z", "+01:00")


specs = st.builds(
    Spec,
    rid=st.sampled_from(IDS),
    dt=st.integers(0, 30),
    deleted=st.integers(0, 4).map(lambda n: n == 0),
    user=st.booleans(),
    text=st.sampled_from(["one", "two"]),
    supersedes=st.one_of(st.none(), st.none(), st.none(), st.sampled_from(IDS)),
    expires_in=st.one_of(st.none(), st.none(), st.integers(-3, 25)),
    offset_form=st.integers(0, 5).map(lambda n: n == 0),
)


def view(lines: list[bytes], now: int) -> list[bytes]:
    """The view of a set of lines, as canonical JSON of each live record."""
    index = Index()
    index.fold_lines(lines, source="set")
    return [canonical(rec) for rec in build_view(index, now).live]


def file_view(path: Path, now: int) -> list[bytes]:
    result = view_of([path], now)
    assert result.bad == []
    return [canonical(rec) for rec in result.records]


def tombstone_keys(lines: list[bytes]) -> set[tuple[str, int]]:
    keys = set()
    for raw in lines:
        rec = classify(raw)
        if isinstance(rec, Record) and rec.deleted:
            keys.add(rec.key)
    return keys


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None)
@given(original=st.lists(specs, max_size=25), later=st.lists(specs, max_size=15))
def test_compaction_is_invisible_to_any_later_merge(
    original: list[Spec], later: list[Spec]
) -> None:
    """Rule 15: for any O and L, view(compact(O) + L) == view(O + L), at every instant,
    whether L is folded in as a set or merged by the real planner; and merging O itself into
    compact(O) appends no new key (no churn)."""
    o = [HEADER.rstrip(b"\n"), *(s.line() for s in original)]
    lines = [s.line() for s in later]
    plan, bad = compact_lines(o, now=LATER, horizon=LATER)
    assert bad == []
    c = [rec.raw for rec in plan.keep]
    assert len(c) + sum(plan.dropped.values()) == len(o)
    merged = c + [rec.raw for rec in plan_merge(c, [("L", 1, lines)], LATER).append]
    for now in VIEW_NOWS:
        expected = view(o + lines, now)
        assert view(c + lines, now) == expected
        assert view(merged, now) == expected
    # No churn: merging O into compact(O) appends nothing but, at most, twins of kept
    # records (same key, other content), which the merge always appends (rule 7).
    kept_keys = {rec.key for rec in plan.keep}
    assert [r for r in plan_merge(c, [("O", 1, o)], LATER).append if r.key not in kept_keys] == []


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None)
@given(
    original=st.lists(specs, max_size=25),
    held=st.lists(st.booleans(), max_size=25),
    compacted=st.booleans(),
    later=st.lists(specs, max_size=10),
)
def test_dropping_acknowledged_tombstones_is_invisible_to_replicas_that_read_them(
    original: list[Spec], held: list[bool], compacted: bool, later: list[Spec]
) -> None:
    """With every tombstone past the horizon and acknowledged, compaction is invisible to
    what replicas that have read past those tombstones can hold: any subset of O with all
    its tombstones, as it is or itself compacted the same way (the tombstones gone), plus
    records written since (dated after every line of O)."""
    o = [s.line() for s in original]
    floor = 1 + max((s.dt for s in original), default=0) + 30
    plan, _ = compact_lines(o, now=LATER, horizon=0)
    c = [rec.raw for rec in plan.keep]
    tombs = tombstone_keys(o)
    replica = [raw for raw, keep in zip(o, held, strict=False) if keep]
    replica += [raw for raw in o if _key(raw) in tombs]
    if compacted:
        replica = [rec.raw for rec in compact_lines(replica, now=LATER, horizon=0)[0].keep]
    replica += [s.line(floor) for s in later]
    for now in VIEW_NOWS:
        assert view(c, now) == view(o, now)
        assert view(c + replica, now) == view(o + replica, now)


def _key(raw: bytes) -> tuple[str, int] | None:
    rec = classify(raw)
    return rec.key if isinstance(rec, Record) and rec.deleted else None


# The stateful test: replica files, merges and compactions


def _fast_tmp() -> str | None:
    """tmpfs where there is one: fsync is free there, and these tests check semantics, not
    durability (test_compaction_kill.py does that on the real disk)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


class Replicas(RuleBasedStateMachine):
    """2 to 4 replica files; `holds[r]` is the set of lines replica r was given (its own
    appends, and what it merged from others), whose view its file must show."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="memsync-prop-", dir=_fast_tmp()))
        self.paths: list[Path] = []
        self.holds: list[set[bytes]] = []
        self.written: set[bytes] = set()
        self.floor = 0
        self.acked: set[tuple[str, int]] = set()

    @initialize(n=st.integers(2, 4))
    def make_replicas(self, n: int) -> None:
        for i in range(n):
            path = self.dir / f"r{i}.jsonl"
            path.write_bytes(HEADER)
            self.paths.append(path)
            self.holds.append(set())

    def _pick(self, r: int) -> int:
        return r % len(self.paths)

    @rule(r=st.integers(0, 3), new=st.lists(specs, min_size=1, max_size=4))
    def append(self, r: int, new: list[Spec]) -> None:
        """Entries, versions, tombstones, re-adds, supersessions, expiry; after an
        acknowledgement round, dated after every line written before it."""
        r = self._pick(r)
        lines = [s.line(self.floor) for s in new]
        append_bytes(self.paths[r], b"".join(raw + b"\n" for raw in lines))
        self.holds[r].update(lines)
        self.written.update(lines)

    @rule(src=st.integers(0, 3), dst=st.integers(0, 3))
    def merge(self, src: int, dst: int) -> None:
        src, dst = self._pick(src), self._pick(dst)
        if src == dst:
            return
        merge_files(self.paths[dst], [self.paths[src]], now=LATER)
        self.holds[dst] |= self.holds[src]

    @rule(r=st.integers(0, 3), drop=st.booleans())
    def compact(self, r: int, drop: bool) -> None:
        """With a horizon no tombstone reaches, or with horizon 0 for the tombstones every
        replica held at the last full exchange."""
        path = self.paths[self._pick(r)]
        before = [file_view(path, now) for now in VIEW_NOWS]
        result = compact_file(
            path,
            now=LATER,
            horizon_days=0 if drop else FOREVER_DAYS,
            quiet_seconds=0,
            grace_seconds=0,
            acknowledged=lambda rec: rec.key in self.acked,
        )
        assert [file_view(path, now) for now in VIEW_NOWS] == before
        for reason in result.dropped:
            event(f"compaction dropped: {reason}")
        if result.pinned:
            event("compaction pinned a tombstone past the horizon")

    @rule()
    def exchange_and_acknowledge(self) -> None:
        """A full exchange; then every tombstone is held by every replica: acknowledged.
        Later writes are dated after everything written so far (what the horizon stands
        for: nothing still in flight is older than it)."""
        self._exchange()
        self.acked = tombstone_keys(list(self.written))
        self.floor += 31

    def _exchange(self) -> None:
        first = self.paths[0]
        for i, path in enumerate(self.paths[1:], 1):
            merge_files(first, [path], now=LATER)
            self.holds[0] |= self.holds[i]
        for i, path in enumerate(self.paths[1:], 1):
            merge_files(path, [first], now=LATER)
            self.holds[i] |= self.holds[0]

    @invariant()
    def each_replica_shows_the_view_of_what_it_was_given(self) -> None:
        for path, held in zip(self.paths, self.holds, strict=True):
            for now in VIEW_NOWS:
                assert file_view(path, now) == view(sorted(held), now)

    def teardown(self) -> None:
        try:
            if self.paths:
                self._exchange()
                everything = sorted(self.written)
                for now in VIEW_NOWS:
                    expected = view(everything, now)
                    for path in self.paths:
                        assert file_view(path, now) == expected
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


# Typed here: older hypothesis releases leave run_state_machine_as_test untyped.
run_as_test: Callable[..., None] = run_state_machine_as_test


@pytest.mark.slow
def test_replicas_converge_through_merges_and_compactions() -> None:
    """After any sequence of appends, merges and compactions, and a final full exchange,
    every replica's view equals the view of everything ever written; and at every step
    each replica's view is that of the lines it was given (compaction changes no view)."""
    run_as_test(
        Replicas,
        settings=settings(max_examples=EXAMPLES, deadline=None, stateful_step_count=15),
    )
