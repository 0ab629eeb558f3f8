"""Properties of the view (SEMANTICS rules 1 to 12) over generated line soups.

Each test's docstring names its invariant. The view under test is the one every memsync
command uses: records folded into an `Index` with `Index.fold_lines`, then `build_view`.
It is cross-checked against `reference_view`, a direct transcription of rules 8 to 12 over
all records, written from the SEMANTICS text and not from the optimized code.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.core.lines import classify, split_complete
from memsync.core.records import Record, canonical
from memsync.core.view import Index, build_view
from tests.helpers.reference import reference_view
from tests.helpers.strategies import (
    NOW,
    file_soups,
    instants,
    line_soups,
    record_objects,
    rewritten,
    twin_sets,
)

ViewKey = list[tuple[str, int, bytes]]
"""A view as (id, instant, canonical JSON) of each live record, in view order: what a
reader sees, independent of how each record happened to be spelled (rule 7)."""


def fold(files: list[bytes]) -> Index:
    index = Index()
    for i, data in enumerate(files):
        lines, _ = split_complete(data)
        index.fold_lines(lines, source=f"f{i}.jsonl")
    return index


def key_of(live: list[Record]) -> ViewKey:
    return [(r.id, r.ts, canonical(r)) for r in live]


def view_key(files: list[bytes], now: int = NOW) -> ViewKey:
    return key_of(build_view(fold(files), now).live)


def as_file(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


@pytest.mark.slow
@given(st.data())
def test_view_ignores_line_order_and_file_split(data: st.DataObject) -> None:
    """The view is a function of the set of records: the same lines in any order, split
    over any number of files, with or without headers and torn tails, give the same view."""
    lines = data.draw(line_soups())
    first = data.draw(file_soups(lines))
    second = data.draw(file_soups(lines))
    assert view_key(first.files) == view_key(second.files) == view_key([as_file(lines)])


@pytest.mark.slow
@given(lines=line_soups(), now=instants())
def test_view_matches_the_reference(lines: list[bytes], now: int) -> None:
    """The optimized `Index` + `build_view` agree with rules 8 to 12 applied literally to
    every record (tombstones, user first, latest, canonical tie-break, supersession with
    the user exception, expiry at `now`, order by (created_at, id))."""
    assert view_key([as_file(lines)], now) == reference_view(lines, now)


@pytest.mark.slow
@given(lines=line_soups(), now=instants())
def test_build_view_agrees_with_index_alive(lines: list[bytes], now: int) -> None:
    """`build_view`, written out flat for speed, lists exactly the ids for which
    `Index.alive` (the readable form of rules 8 to 11) returns a record, and that record."""
    index = fold([as_file(lines)])
    view = build_view(index, now)
    alive = [rec for rid in index.ids() if (rec := index.alive(rid, now)) is not None]
    assert sorted(key_of(view.live)) == sorted(key_of(alive))


@pytest.mark.slow
@given(st.data())
def test_twins_resolve_the_same_way_in_any_order(data: st.DataObject) -> None:
    """Twins (same id and instant, different content) resolve to the greater canonical JSON
    whatever order they are folded in (rule 9 tie-break), and are reported as twins."""
    lines = data.draw(twin_sets())
    shuffled = data.draw(st.permutations(lines))
    index_a, index_b = fold([as_file(lines)]), fold([as_file(list(shuffled))])
    records = [r for raw in lines if isinstance(r := classify(raw), Record)]
    winner = max(canonical(r) for r in records)
    for index in (index_a, index_b):
        best = index.user or index.inferred
        (kept,) = best.values()
        assert canonical(kept) == winner
        assert index.twins
        assert all(canonical(a) > canonical(b) for a, b in index.twins)
    far_past = min(r.ts for r in records) - 1  # before any expiry: the winner is live
    assert view_key([as_file(lines)], far_past) == view_key([as_file(list(shuffled))], far_past)


@pytest.mark.slow
@given(st.data())
def test_same_record_written_differently_is_one_record(data: st.DataObject) -> None:
    """Rule 7: one record written several ways (`Z`, `.000Z`, an offset, other key order,
    spacing and escaping, `1` vs `1.0`) is one record: no twins, and the view is the view
    of a single copy."""
    obj = data.draw(record_objects())
    copies = data.draw(rewritten(obj, data.draw(st.integers(2, 4))))
    now = data.draw(instants())
    parsed = [classify(raw) for raw in copies]
    assert all(isinstance(p, Record) for p in parsed)
    records = [p for p in parsed if isinstance(p, Record)]
    assert len({r.key for r in records}) == 1
    assert len({canonical(r) for r in records}) == 1
    index = fold([as_file(copies)])
    assert index.twins == []
    assert view_key([as_file(copies)], now) == view_key([as_file(copies[:1])], now)


@pytest.mark.slow
@given(lines=line_soups(), now=instants())
def test_bad_blank_and_header_lines_do_not_change_the_view(lines: list[bytes], now: int) -> None:
    """Bad lines, blank lines and headers are never records: dropping them changes nothing
    (rules 2 to 4)."""
    records_only = [raw for raw in lines if isinstance(classify(raw), Record)]
    assert view_key([as_file(lines)], now) == view_key([as_file(records_only)], now)


@pytest.mark.slow
@given(lines=line_soups())
def test_folding_twice_changes_nothing(lines: list[bytes]) -> None:
    """Reading the same lines twice (a file merged into itself) gives the same view."""
    once = as_file(lines)
    assert view_key([once, once]) == view_key([once])
