"""`handoff` through the source's persistent view (issue 20): the same lines appended to
the destination, byte for byte, as a handoff that folds the whole source, whatever the
source holds (supersessions of ids the destination has, by records since deleted or
beaten; tombstones; twins; expired entries; bad lines) and when it grew since the store
was written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memsync.local.handoff
from memsync.core.handoff import HandoffFilter
from memsync.local.handoff import handoff
from memsync.local.located import located_view
from memsync.local.merge import MergeResult
from memsync.local.reading import view_of
from memsync.local.statedir import StateDir
from memsync.local.storage import open_for_reading
from memsync.local.viewstore import ViewStore
from tests.helpers.examples import examples
from tests.helpers.records import T0, deciding_file, entry
from tests.helpers.strategies import HEADER, IDS, NOW, line_soups

SELECTIONS = st.builds(
    HandoffFilter,
    scopes=st.sampled_from([(), ("github.com",), ("project:x", "global")]),
    kinds=st.sampled_from([(), ("fact",), ("lesson", "avoid")]),
    min_confidence=st.sampled_from([None, 0.5, 1.0]),
    since=st.sampled_from([None, NOW - 3 * 60 * 10**6]),
)


def _write(path: Path, lines: list[bytes]) -> None:
    with open(path, "ab") as f:
        f.write(b"".join(raw + b"\n" for raw in lines))


def _handoffs(
    tmp: Path, src: Path, dest_lines: list[bytes], selection: HandoffFilter, store: ViewStore
) -> tuple[bytes, bytes, dict[str, object], dict[str, object]]:
    """DEST's bytes and the result after a handoff through `store`, and after one that
    folds the whole source."""
    stored, whole = tmp / "stored.jsonl", tmp / "whole.jsonl"
    for dest in (stored, whole):
        dest.unlink(missing_ok=True)
        if dest_lines:
            _write(dest, [HEADER, *dest_lines])
    a = handoff(src, stored, selection, now=NOW, store=store)
    b = handoff(src, whole, selection, now=NOW)
    ja, jb = a.to_json(), b.to_json()
    ja.pop("dest"), jb.pop("dest")
    return stored.read_bytes(), whole.read_bytes(), ja, jb


def _warm(src: Path, store: ViewStore) -> bool:
    fd = open_for_reading(src)
    try:
        return store.resume(src, fd, str(src)) is not None
    finally:
        os.close(fd)


@pytest.mark.slow
@settings(
    max_examples=examples(0.5),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    before=line_soups(16),
    after=line_soups(8),
    dest=line_soups(6),
    held=st.lists(st.sampled_from(IDS), max_size=3),
    selection=SELECTIONS,
)
def test_a_handoff_through_a_warm_store_appends_what_the_whole_fold_does(
    tmp_path: Path,
    before: list[bytes],
    after: list[bytes],
    dest: list[bytes],
    held: list[str],
    selection: HandoffFilter,
) -> None:
    src = tmp_path / "src.jsonl"
    src.unlink(missing_ok=True)
    _write(src, [HEADER, *before])
    state = tmp_path / "state"
    store = ViewStore(StateDir(state), min_bytes=0, save_after=1 << 30)
    dest_lines = dest + [entry(rid, 0.5) for rid in held]  # ids DEST holds: all decide
    # The store is written by the first handoff, then SRC grows past it (not saved again):
    # the second reads the store and folds what was appended.
    got, want, ja, jb = _handoffs(tmp_path, src, dest_lines, selection, store)
    assert (got, ja) == (want, jb)
    assert _warm(src, store)
    _write(src, after)
    got, want, ja, jb = _handoffs(tmp_path, src, dest_lines, selection, store)
    assert _warm(src, store)
    assert (got, ja) == (want, jb)


@pytest.mark.parametrize(
    "selection",
    [HandoffFilter(), HandoffFilter(scopes=("github.com",)), HandoffFilter(kinds=("lesson",))],
)
def test_a_large_source_handed_off_from_its_store(tmp_path: Path, selection: HandoffFilter) -> None:
    """A source of a few thousand records (tombstones, supersessions, expiry: what decides
    is in the stored bytes) to a destination holding some of the superseded and deleted
    ids: the same bytes, from a warm store and from a store the source outgrew."""
    src = deciding_file(tmp_path / "src.jsonl", 3000)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0, save_after=1 << 30)
    now = T0 + 10**12
    held = [entry(f"e{i:05d}", 0.1) for i in range(0, 3000, 5)]
    for grown in (False, True):
        if grown:
            _write(src, [entry("late00000001", 5000, supersedes="e00010"), entry("e00015", 5001)])
        outs = []
        for name, with_store in (("a", store), ("b", None)):
            dest = tmp_path / f"{name}{grown}.jsonl"
            _write(dest, [HEADER, *held])
            handoff(src, dest, selection, now=now, store=with_store)
            outs.append(dest.read_bytes())
        assert outs[0] == outs[1]
        assert _warm(src, store)


def test_a_source_over_the_partition_size_is_handed_off_in_partitions_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory stays bounded (issue 14): a view of every id, even from a valid store, is
    not; the partitions' lines give the whole-file handoff's view."""
    src = deciding_file(tmp_path / "src.jsonl", 3000)
    store = ViewStore(StateDir(tmp_path / "state"), min_bytes=0)
    now = T0 + 10**12
    held = [entry(f"e{i:05d}", 0.1) for i in range(0, 3000, 5)]
    selection = HandoffFilter(scopes=("github.com",))
    located_view([src], now, store).close()  # a valid store
    for name in ("whole", "parted"):
        dest = tmp_path / f"{name}.jsonl"
        _write(dest, [HEADER, *held])
    handoff(src, tmp_path / "whole.jsonl", selection, now=now)
    parts: list[int] = []
    real = memsync.local.handoff._handoff_partitioned

    def counted(*args: Any) -> MergeResult:
        parts.append(1)
        return real(*args)

    monkeypatch.setattr(memsync.local.handoff, "_handoff_partitioned", counted)
    monkeypatch.setattr(memsync.local.handoff, "PARTITION_BYTES", src.stat().st_size // 2)
    handoff(src, tmp_path / "parted.jsonl", selection, now=now, store=store)
    assert parts == [1]
    assert _keys(tmp_path / "parted.jsonl", now) == _keys(tmp_path / "whole.jsonl", now)


def _keys(path: Path, now: int) -> list[tuple[str, int]]:
    return [(r.id, r.ts) for r in view_of([path], now).records]
