"""Properties of the merge engine (SEMANTICS rules 5, 6, 7, 13 and 14).

Replicas are 2 to 5 files holding random records between them (entries, later versions,
tombstones, re-adds, supersessions, superseders deleted later, twins, the same record
written two ways, expiry, user and inferred sources) with bad lines, blank lines, headers
and torn tails. They are merged pairwise in a random order, then once more in a final
round in which every ordered pair exchanges.

Most properties work on in-memory lines through `plan_merge` (a merge is "plan, then append
`plan.data()`", which `apply` below does the way `append_bytes` does); two go through real
files, one with `merge_files` and one with `merge_indexed` and its SQLite index.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsync.core.lines import Header, classify, split_complete
from memsync.core.merge import MergePlan, plan_merge
from memsync.core.records import Record, canonical
from memsync.core.timestamps import SECOND, parse_ts
from memsync.core.view import Index, build_view
from memsync.local.merge import MergeResult, merge_files, merge_indexed
from memsync.local.statedir import StateDir
from tests.helpers.examples import examples
from tests.helpers.strategies import (
    BAD_LINES,
    BLANK_LINES,
    HEADER,
    IDS,
    NOW,
    T0,
    RecordObject,
    line_soups,
)

# The strategies module builds records from a seeded `random.Random` (one draw per line);
# its record builders are reused here so that both suites generate the same shapes.
from tests.helpers.strategies import _entry as random_entry
from tests.helpers.strategies import _render as render
from tests.helpers.strategies import _tombstone as random_tombstone

MINUTE = 60 * SECOND
NOWS = (T0, NOW, T0 + 11 * MINUTE)
"""Instants the views are compared at: before, inside and after the grid of expiries."""

Key = list[tuple[str, int, bytes]]


# --- replicas -------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """Replica files (bytes) and the order of the merges: `pairs` of (source, destination)
    at random, then `final`, in which every ordered pair appears once."""

    files: list[bytes]
    pairs: list[tuple[int, int]]
    final: list[tuple[int, int]]


def _torn_tail(rng: random.Random, lines: list[bytes]) -> bytes:
    """A write in progress (rule 1): a record line cut short (never valid JSON, since its
    closing brace is missing), or a lone brace or spaces."""
    records = [raw for raw in lines if raw.startswith(b"{") and raw.endswith(b"}")]
    if records and rng.random() < 0.7:
        raw = rng.choice(records)
        return raw[: rng.randint(1, len(raw) - 1)]
    return rng.choice([b"{", b"  ", b'{"id": "a1a1a1a1a1a1", "kind": "fa'])


def _files(parts: list[list[bytes]], rng: random.Random) -> list[bytes]:
    files = []
    for part in parts:
        lines = [HEADER, *part] if rng.random() < 0.6 else part
        data = b"".join(raw + b"\n" for raw in lines)
        if rng.random() < 0.25:
            data += _torn_tail(rng, part)
        files.append(data)
    return files


def _spread(lines: list[bytes], n: int, seed: int) -> list[bytes]:
    """`lines` spread over `n` files, in any order, some lines held by two files."""
    rng = random.Random(seed)
    parts: list[list[bytes]] = [[] for _ in range(n)]
    for raw in lines:
        holders = {rng.randrange(n)}
        if rng.random() < 0.2:
            holders.add(rng.randrange(n))
        for i in holders:
            parts[i].append(raw)
    for part in parts:
        rng.shuffle(part)
    return _files(parts, rng)


@st.composite
def schedules(draw: st.DrawFn, files: list[bytes]) -> Scenario:
    n = len(files)
    ordered = [(s, d) for s in range(n) for d in range(n) if s != d]
    pairs = draw(st.lists(st.sampled_from(ordered), max_size=8))
    final = draw(st.permutations(ordered))
    return Scenario(files, pairs, list(final))


@st.composite
def scenarios(draw: st.DrawFn, max_replicas: int = 5, max_lines: int = 30) -> Scenario:
    """Random lines (tests/strategies.py's soups) spread over 2 to `max_replicas` files."""
    lines = draw(line_soups(max_lines))
    n = draw(st.integers(2, max_replicas))
    files = _spread(lines, n, draw(st.integers(0, 2**32 - 1)))
    return draw(schedules(files))


_SEEDS = st.integers(min_value=0, max_value=2**32 - 1)
_INFERRED_SOURCES = (None, "session:x", "session:y")


def _ordered(seeds: list[int], n: int, user: bool | None, many_writers: bool) -> list[bytes]:
    """Records in strictly increasing `created_at` (one global clock, 30 s apart, so no two
    share an instant), bad and blank lines anywhere. `user` True or False: one source class
    for all; None: each entry user or inferred at random. Without `many_writers` each id is
    written by one replica only (its owner); with it, any replica writes any id. Sometimes
    a replica also holds a copy of an id's whole history, spelled differently (as an
    earlier exchange might have left it)."""
    rng = random.Random(seeds[0])
    owner = {rid: rng.randrange(n) for rid in IDS}
    copy = {rid: rng.randrange(n) if rng.random() < 0.3 else None for rid in IDS}
    parts: list[list[bytes]] = [[] for _ in range(n)]
    for i, seed in enumerate(seeds):
        rng = random.Random(seed)
        created = T0 + (i + 1) * 30 * SECOND + rng.choice([0, 0, 250_000])
        roll = rng.random()
        if roll < 0.1:
            parts[rng.randrange(n)].append(rng.choice(BAD_LINES + BLANK_LINES))
            continue
        base = random_tombstone(rng) if roll < 0.35 else random_entry(rng)
        fields = dict(base.fields)
        if not base.is_tombstone:
            is_user = rng.random() < 0.4 if user is None else user
            fields["source"] = "user" if is_user else rng.choice(_INFERRED_SOURCES)
        obj = RecordObject(fields, created, base.expires)
        rid = fields["id"]
        parts[rng.randrange(n) if many_writers else owner[rid]].append(render(rng, obj))
        if (other := copy[rid]) is not None:
            parts[other].append(render(rng, obj))
    return _files(parts, random.Random(seeds[0]))


@st.composite
def ordered_scenarios(draw: st.DrawFn) -> Scenario:
    seeds = draw(st.lists(_SEEDS, min_size=1, max_size=24))
    n = draw(st.integers(2, 5))
    user = draw(st.sampled_from([True, False, None]))
    files = _ordered(seeds, n, user, many_writers=draw(st.booleans()))
    return draw(schedules(files))


# --- reading --------------------------------------------------------------------------


def complete(data: bytes) -> list[bytes]:
    lines, _ = split_complete(data)
    return lines


def index_of(files: Iterable[bytes]) -> Index:
    index = Index()
    for data in files:
        index.fold_lines(complete(data), source="f")
    return index


def view_key(index: Index, now: int) -> Key:
    """The view as (id, created_at instant, canonical content) of each live record, in
    order. Canonical rather than raw: one record written two ways in two replicas stays
    two spellings (a merge keeps the one its file has, rule 7), so replicas agree on the
    record, not necessarily on its bytes. That the bytes are copies is checked apart."""
    return [(r.id, r.ts, canonical(r)) for r in build_view(index, now).live]


def naive_view(data: bytes, now: int) -> Key:
    """The spec's reader that simply lets later lines win (rule 14): per id the last line
    wins (a tombstone deletes), except that a user version is not replaced by an inferred
    one; an entry line with `supersedes` removes that id for good (an inferred one only
    when the id does not end on a user version, rule 10); an expired last version is
    skipped. It knows nothing of created_at order or of twins."""
    last: dict[str, Record] = {}
    by_user: set[str] = set()
    by_inferred: set[str] = set()
    for raw in complete(data):
        rec = classify(raw)
        if type(rec) is not Record:
            continue
        old = last.get(rec.id)
        if rec.deleted or old is None or old.deleted or not old.user or rec.user:
            last[rec.id] = rec
        if not rec.deleted and rec.supersedes is not None:
            (by_user if rec.user else by_inferred).add(rec.supersedes)
    live = [
        r
        for rid, r in last.items()
        if not r.deleted
        and rid not in by_user
        and (rid not in by_inferred or r.user)
        and (r.expires is None or r.expires > now)
    ]
    live.sort(key=lambda r: (r.ts, r.id))
    return [(r.id, r.ts, canonical(r)) for r in live]


# --- merging in memory ------------------------------------------------------------------


def apply(dest: bytes, plan: MergePlan) -> bytes:
    """Append a plan the way `append_bytes` does: a new file starts with a header; a torn
    last line is terminated first (rule 1)."""
    data = plan.data()
    if not data:
        return dest
    if not dest:
        return HEADER + b"\n" + data
    if not dest.endswith(b"\n"):
        dest += b"\n"
    return dest + data


def merge_in_memory(files: list[bytes], src: int, dest: int, now: int = NOW) -> MergePlan:
    """Merge file `src` into file `dest` of `files` (in place), checking what is appended:
    copies of the source's own lines, byte for byte (rule 5), valid records only (rule 4),
    none of them already in the destination, and no line twice."""
    dest_lines = complete(files[dest])
    src_lines = complete(files[src])
    plan = plan_merge(dest_lines, [(f"r{src}", 1, src_lines)], now)
    n_new = len(plan.append) - len(plan.repeated)
    appended = [r.raw for r in plan.append[:n_new]]
    assert set(appended) <= set(src_lines)
    assert len(set(appended)) == len(appended)
    assert not set(appended) & set(dest_lines)
    # Rule 14: the lines repeated after them are copies of lines the file then holds.
    assert all(r.raw in set(dest_lines) | set(appended) for r in plan.repeated)
    for raw in [r.raw for r in plan.append]:
        assert type(classify(raw)) is Record
    before = files[dest]
    files[dest] = apply(before, plan)
    return plan


# --- properties -----------------------------------------------------------------------


@pytest.mark.slow
@settings(
    max_examples=examples(0.6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_replicas_converge_on_the_view_of_the_union(scenario: Scenario) -> None:
    """Once every pair of replicas has exchanged (whatever merges came before, in whatever
    order), every replica's view equals the view of the union of all original lines, at
    any `now`; every live record is a byte-exact copy of an original line; and merging
    again appends nothing anywhere (idempotence)."""
    files = list(scenario.files)
    originals = set().union(*(complete(data) for data in scenario.files))
    union = index_of(scenario.files)
    for src, dest in scenario.pairs + scenario.final:
        merge_in_memory(files, src, dest)
    for now in NOWS:
        expected = view_key(union, now)
        for data in files:
            index = index_of([data])
            assert view_key(index, now) == expected
            assert all(r.raw in originals for r in build_view(index, now).live)
    settled = list(files)
    for src, dest in scenario.final:
        plan = merge_in_memory(files, src, dest)
        assert plan.append == []
    assert files == settled


@pytest.mark.slow
@settings(
    max_examples=examples(0.6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenario=scenarios(max_replicas=3))
def test_merge_order_does_not_matter(scenario: Scenario) -> None:
    """Merging the same replicas into an empty file in two different orders (one source at
    a time, or all in one batch) gives the same view, and merging a source twice in a row
    appends nothing the second time."""
    forward: list[bytes] = [*scenario.files, b""]
    target = len(scenario.files)
    for src in range(target):
        merge_in_memory(forward, src, target)
        assert merge_in_memory(forward, src, target).append == []
    backward: list[bytes] = [*scenario.files, b""]
    for src in reversed(range(target)):
        merge_in_memory(backward, src, target)
    chunks = [(f"r{i}", 1, complete(data)) for i, data in enumerate(scenario.files)]
    batch = apply(b"", plan_merge([], chunks, NOW))
    union = index_of(scenario.files)
    for now in NOWS:
        expected = view_key(union, now)
        for data in (forward[target], backward[target], batch):
            assert view_key(index_of([data]), now) == expected


@pytest.mark.slow
@settings(
    max_examples=examples(0.6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenario=ordered_scenarios())
def test_time_ordered_files_read_naively_agree_with_the_view(scenario: Scenario) -> None:
    """Rule 14 (amended): where each replica's own writer kept time order, the spec's
    reader that lets later lines win (`naive_view`: a user version is not replaced by an
    inferred one) agrees with the view of every file, before and after every merge, over
    histories of user and inferred versions, tombstones and supersessions, with one writer
    or many per id. One restriction stays: all instants distinct (twins' tie-break is by
    content, not position)."""
    files = list(scenario.files)
    for data in files:
        assert naive_view(data, NOW) == view_key(index_of([data]), NOW)
    for src, dest in scenario.pairs + scenario.final:
        merge_in_memory(files, src, dest)
        for now in NOWS:
            assert naive_view(files[dest], now) == view_key(index_of([files[dest]]), now)


# The two shapes that broke rule 14's promise before it was amended: two files, each
# written in time order, one source class, distinct instants, two writers of one id.


def _line(rid: str, minute: int, **extra: object) -> bytes:
    obj = {"id": rid, "created_at": f"2026-11-01T00:{minute:02d}:00Z", **extra}
    if "deleted" not in obj:
        obj = {"kind": "fact", "text": f"{rid} at {minute}", **obj}
    return json.dumps(obj).encode()


def test_an_old_tombstone_appended_after_a_newer_version() -> None:
    x = "a1a1a1a1a1a1"
    files = [
        HEADER + b"\n" + _line(x, 2) + b"\n",  # this writer re-added x at 00:02
        HEADER + b"\n" + _line(x, 0) + b"\n" + _line(x, 1, deleted=True) + b"\n",
    ]
    plan = merge_in_memory(files, 1, 0)
    # The old tombstone travels (it deletes older versions still to come), and the
    # current version at 00:02 is repeated after it.
    assert [r.ts for r in plan.append] == [_ts(1), _ts(2)]
    assert plan.append[-1].raw == _line(x, 2)
    assert plan.repeated == [plan.append[-1]]
    assert naive_view(files[0], NOW) == view_key(index_of([files[0]]), NOW)


def _ts(minute: int) -> int:
    us = parse_ts(f"2026-11-01T00:{minute:02d}:00Z")
    assert us is not None
    return us


def test_a_beaten_superseder_appended_after_its_tombstone() -> None:
    x, y = "a1a1a1a1a1a1", "b2b2b2b2b2b2"
    deleted = _line(x, 2, deleted=True)
    files = [
        HEADER + b"\n" + _line(y, 0) + b"\n" + deleted + b"\n",
        HEADER + b"\n" + _line(x, 1, supersedes=y) + b"\n" + deleted + b"\n",
    ]
    plan = merge_in_memory(files, 1, 0)
    # The superseding entry travels (rule 10), and the tombstone that beats it follows.
    assert [r.raw for r in plan.append] == [_line(x, 1, supersedes=y), deleted]
    assert naive_view(files[0], NOW) == view_key(index_of([files[0]]), NOW)
    assert naive_view(files[0], NOW) == []


# --- through real files -------------------------------------------------------------------


def check_append(before: bytes, after: bytes, sources: set[bytes], result: MergeResult) -> None:
    """A merge's effect on its destination's bytes: the old bytes are a prefix of the new
    ones (a torn last line terminated first, rule 1; a new file starts with a header), and
    what follows is `result.appended` lines, each a byte-exact copy of a source line
    (rule 5) and a valid record (rule 4)."""
    if result.appended == 0:
        assert after == before
        return
    if before:
        base = before if before.endswith(b"\n") else before + b"\n"
        assert after.startswith(base)
        added = complete(after[len(base) :])
    else:
        header, *added = complete(after)
        assert isinstance(classify(header), Header)
    assert after.endswith(b"\n")
    assert len(added) == result.appended
    assert sum(len(raw) + 1 for raw in added) == result.bytes_appended
    # Copies of source lines, and (rule 14) of lines the file held, repeated after them.
    assert set(added) <= sources | set(complete(before))
    assert all(type(classify(raw)) is Record for raw in added)


def final_rounds(scenario: Scenario) -> list[int]:
    """The destinations of the final round, in the order they first appear there."""
    return list(dict.fromkeys(dest for _, dest in scenario.final))


@pytest.mark.slow
@settings(
    max_examples=examples(0.6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenario=scenarios(max_replicas=4, max_lines=24))
def test_merge_files_only_appends_copies_and_converges(scenario: Scenario) -> None:
    """`merge_files` on real files: a merge never changes the destination's existing
    bytes and appends only whole valid lines copied from its sources; once every replica
    has merged all the others (the final round merges all sources in one call), every
    file's view is the view of the union; merging again appends 0 bytes anywhere."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp, f"r{i}.jsonl") for i in range(len(scenario.files))]
        for path, data in zip(paths, scenario.files, strict=True):
            path.write_bytes(data)
        rounds = [(dest, [paths[src]]) for src, dest in scenario.pairs]
        for dest in final_rounds(scenario):
            rounds.append((dest, [p for i, p in enumerate(paths) if i != dest]))
        for dest, sources in rounds:
            before = paths[dest].read_bytes()
            lines = set().union(*(complete(p.read_bytes()) for p in sources))
            result = merge_files(paths[dest], sources, now=NOW)
            check_append(before, paths[dest].read_bytes(), lines, result)
            assert not result.dry_run
        union = index_of(scenario.files)
        for now in NOWS:
            expected = view_key(union, now)
            for path in paths:
                assert view_key(index_of([path.read_bytes()]), now) == expected
        settled = [p.read_bytes() for p in paths]
        for dest, sources in rounds[-len(paths) :]:
            assert merge_files(paths[dest], sources, now=NOW).bytes_appended == 0
        assert [p.read_bytes() for p in paths] == settled


@pytest.mark.slow
@settings(
    max_examples=examples(0.6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenario=scenarios(max_replicas=3, max_lines=24))
def test_merge_indexed_only_appends_copies_and_converges(scenario: Scenario) -> None:
    """`merge_indexed` (a persistent index per destination, cursors per source, in a state
    directory) on real files whose sources keep growing between merges: the same
    guarantees as `merge_files` (prefix, copies, valid lines, convergence to the view of
    the union, idempotence), and a plain `merge_files` afterwards finds nothing to add."""
    with tempfile.TemporaryDirectory() as tmp:
        state = StateDir(Path(tmp, "state"))
        paths = [Path(tmp, f"r{i}.jsonl") for i in range(len(scenario.files))]
        for path, data in zip(paths, scenario.files, strict=True):
            path.write_bytes(data)
        for src, dest in scenario.pairs + scenario.final:
            before = paths[dest].read_bytes()
            lines = set(complete(paths[src].read_bytes()))
            result = merge_indexed(paths[dest], [paths[src]], state, now=NOW)
            check_append(before, paths[dest].read_bytes(), lines, result)
        union = index_of(scenario.files)
        for now in NOWS:
            expected = view_key(union, now)
            for path in paths:
                assert view_key(index_of([path.read_bytes()]), now) == expected
        settled = [p.read_bytes() for p in paths]
        for src, dest in scenario.final:
            assert merge_indexed(paths[dest], [paths[src]], state, now=NOW).bytes_appended == 0
            assert merge_files(paths[dest], [paths[src]], now=NOW).bytes_appended == 0
        assert [p.read_bytes() for p in paths] == settled
