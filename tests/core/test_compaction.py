"""plan_compaction (SEMANTICS rule 15): what a compacted file keeps, and that no later merge
can tell it from the original.

Pure: lines in memory, `memsync.core.compaction.compact_lines`, the view of
`memsync.core.view` and the real merge planner `memsync.core.merge.plan_merge`. The named
resurrection cases merge a stale replica's lines into the compacted file with that
planner, as a sync would.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from memsync.core.compaction import DROP_REASONS, CompactionPlan, Rejected, compact_lines
from memsync.core.lines import classify
from memsync.core.merge import plan_merge
from memsync.core.records import Record
from memsync.core.timestamps import SECOND, parse_ts
from memsync.core.view import Index, build_view
from tests.helpers.paths import SHARED
from tests.helpers.records import DAY, T0, at, entry, tomb

NOW = T0 + 400 * DAY
NEVER = 1 << 62
"""A horizon no tombstone is older than: nothing is dropped for age."""

HEADER = b'{"format": "agent-memory/0.1", "created_at": "2026-01-01T00:00:00Z"}'


def view(lines: list[bytes], now: int = NOW) -> list[bytes]:
    """The view (rule 12) of a set of lines: the raw bytes of the live current versions."""
    index = Index()
    index.fold_lines(lines, source="test")
    return [rec.raw for rec in build_view(index, now).live]


def ids(lines: list[bytes], now: int = NOW) -> list[str]:
    out = []
    for raw in view(lines, now):
        rec = classify(raw)
        assert isinstance(rec, Record)
        out.append(rec.id)
    return out


def plan_of(
    lines: list[bytes],
    *,
    horizon: int = NEVER,
    now: int = NOW,
    acked: bool = True,
) -> tuple[CompactionPlan, list[Rejected]]:
    # None: every tombstone is acknowledged; an empty set: none is.
    return compact_lines(lines, now=now, horizon=horizon, acknowledged=None if acked else set())


def compact(
    lines: list[bytes], *, horizon: int = NEVER, now: int = NOW, acked: bool = True
) -> list[bytes]:
    """The compacted file's lines (its new header left out)."""
    plan, _ = plan_of(lines, horizon=horizon, now=now, acked=acked)
    return [rec.raw for rec in plan.keep]


def merge(dest: list[bytes], incoming: list[bytes], now: int = NOW) -> list[bytes]:
    """`dest` after the real merge planner appended what it lacks of `incoming` (rule 14)."""
    plan = plan_merge(dest, [("stale", 1, incoming)], now)
    return dest + [rec.raw for rec in plan.append]


# What is kept, what is dropped, and why


def test_keeps_the_latest_version_and_counts_the_rest() -> None:
    lines = [HEADER, entry("a", 1), entry("a", 2), entry("a", 3), entry("b", 1)]
    plan, bad = plan_of(lines)
    assert [r.raw for r in plan.keep] == [entry("b", 1), entry("a", 3)]
    assert plan.dropped == {"header": 1, "older version": 2}
    assert bad == []
    assert view(lines) == view([r.raw for r in plan.keep])


def test_tombstone_is_kept_and_the_versions_it_deleted_go() -> None:
    lines = [entry("a", 1), entry("a", 2, user=True), tomb("a", 3), tomb("a", 1.5)]
    plan, _ = plan_of(lines)
    assert [r.raw for r in plan.keep] == [tomb("a", 3)]
    assert plan.dropped == {"deleted version": 2, "replaced tombstone": 1}


def test_readd_after_tombstone_keeps_both() -> None:
    lines = [entry("a", 1), tomb("a", 2), entry("a", 3)]
    assert compact(lines) == [tomb("a", 2), entry("a", 3)]
    assert ids(compact(lines)) == ["a"]


def test_exact_and_rewritten_duplicates_are_dropped() -> None:
    same_instant = entry("a", 1).replace(at(1).encode(), b"2026-01-01T01:00:01+01:00")
    assert same_instant != entry("a", 1)
    lines = [entry("a", 1), entry("a", 1), same_instant, tomb("b", 1), tomb("b", 1)]
    plan, _ = plan_of(lines)
    assert len(plan.keep) == 2
    assert plan.dropped == {"duplicate": 3}


def test_twins_at_the_current_position_are_all_kept() -> None:
    """Same key, different content (rule 7): the tie-break needs every twin; dropping one
    would only make the next merge append it again."""
    twins = [entry("a", 5, text="one"), entry("a", 5, text="two"), entry("a", 5, text="three")]
    older = [entry("a", 1, text="x"), entry("a", 1, text="y")]
    lines = older + twins + [entry("a", 5, text="two")]
    plan, _ = plan_of(lines)
    assert sorted(r.raw for r in plan.keep) == sorted(twins)
    assert plan.dropped == {"older version": 2, "duplicate": 1}
    assert view(lines) == view([r.raw for r in plan.keep])


def test_headers_blank_and_bad_lines() -> None:
    lines = [HEADER, b"", b"   ", entry("a", 1), HEADER, b"{not json", b'{"id": 3}', b"\r"]
    plan, bad = plan_of(lines)
    assert [r.raw for r in plan.keep] == [entry("a", 1)]
    assert plan.dropped == {"header": 2, "blank": 3}
    assert [(b.line, b.raw) for b in bad] == [(6, b"{not json"), (7, b'{"id": 3}')]
    assert all(b.reason for b in bad)
    assert plan.rejected == 2


def test_kept_lines_are_byte_for_byte_in_time_order() -> None:
    crlf = entry("c", 2, unknown_field={"kept": True}) + b"\r"
    lines = [entry("b", 3), crlf, entry("a", 3), entry("z", 1)]
    assert compact(lines) == [entry("z", 1), crlf, entry("a", 3), entry("b", 3)]


def test_result_does_not_depend_on_line_order() -> None:
    lines = [
        entry("a", 1),
        entry("a", 2, text="t1"),
        entry("a", 2, text="t2"),
        tomb("b", 4),
        entry("b", 3),
        entry("c", 5, supersedes="a"),
        entry("d", 6, supersedes="a", user=True),
        tomb("d", 7),
        entry("d", 5, user=True, supersedes="a"),
    ]
    first = compact(lines)
    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(lines)
        assert compact(lines) == first


def test_inferred_version_older_than_a_live_user_version_goes() -> None:
    """Rule 9: while the user version lives it outranks the inferred one, and whatever
    deletes it deletes the older inferred one too."""
    lines = [entry("a", 1), entry("a", 2, user=True)]
    plan, _ = plan_of(lines)
    assert [r.raw for r in plan.keep] == [entry("a", 2, user=True)]
    assert plan.dropped == {"older version": 1}


def test_inferred_version_later_than_the_user_version_stays() -> None:
    """A later tombstone may delete the user version and not the inferred one."""
    lines = [entry("a", 1, user=True), entry("a", 3)]
    assert compact(lines) == lines
    later = merge(compact(lines), [tomb("a", 2)])
    assert view(later) == [entry("a", 3)]


def test_expired_current_version_is_kept() -> None:
    lines = [entry("a", 1), entry("a", 2, expires=3)]
    assert compact(lines) == [entry("a", 2, expires=3)]
    assert view(compact(lines)) == []


def test_superseding_record_is_kept_even_as_an_older_version() -> None:
    lines = [entry("x", 1), entry("y", 2, supersedes="x"), entry("y", 3)]
    assert compact(lines) == [entry("x", 1), entry("y", 2, supersedes="x"), entry("y", 3)]
    assert ids(compact(lines)) == ["y"]


def test_one_superseding_record_per_superseded_id() -> None:
    """A user supersession removes the id whatever its current version is (rule 10), so an
    inferred one beside it adds nothing; one kept record per id is enough."""
    lines = [
        entry("x", 1, user=True),
        entry("y", 2, supersedes="x"),
        entry("y", 3),
        entry("z", 2, supersedes="x", user=True),
        entry("z", 3, user=True),
        entry("w", 4, supersedes="x", user=True),
        tomb("w", 5),
    ]
    kept = compact(lines)
    # z's is live (no pin needed), so it is preferred over w's, which is deleted.
    assert entry("z", 2, supersedes="x", user=True) in kept
    assert sum(b'"supersedes": "x"' in raw for raw in kept) == 1
    assert view(kept) == view(lines)


def test_inferred_supersession_of_a_user_entry_keeps_a_user_superseder_too() -> None:
    """An inferred supersession does not apply to a user current version (rule 10)."""
    lines = [
        entry("x", 1, user=True),
        entry("y", 2, supersedes="x"),
        entry("y", 3),
        entry("u", 4, user=True, supersedes="x"),
        entry("u", 5, user=True),
    ]
    kept = compact(lines)
    assert entry("u", 4, user=True, supersedes="x") in kept
    assert "x" not in ids(kept)
    assert "x" not in ids(merge(kept, [entry("x", 9, user=True)]))


# Tombstones at the horizon


def test_old_acknowledged_tombstone_goes_with_what_it_deleted() -> None:
    lines = [entry("a", 1), tomb("a", 2), entry("a", 3), tomb("b", 1)]
    plan, _ = plan_of(lines, horizon=30 * DAY)
    assert [r.raw for r in plan.keep] == [entry("a", 3)]
    assert plan.dropped == {"deleted version": 1, "old tombstone": 2}


def test_tombstone_stays_until_acknowledged() -> None:
    lines = [entry("a", 1), tomb("a", 2)]
    assert compact(lines, horizon=30 * DAY, acked=False) == [tomb("a", 2)]


def test_tombstone_stays_until_past_the_horizon() -> None:
    lines = [entry("a", 1), tomb("a", 2)]
    assert compact(lines, horizon=30 * DAY, now=T0 + 10 * DAY) == [tomb("a", 2)]
    assert compact(lines, horizon=30 * DAY, now=T0 + 31 * DAY) == []


def test_tombstone_of_a_dead_superseder_is_pinned_forever() -> None:
    """Rule 15's classic resurrection bug: keep the superseding record (supersession is
    forever) and therefore its own tombstone, or the superseder comes back to life."""
    lines = [entry("x", 1), entry("y", 2, supersedes="x"), tomb("y", 3)]
    plan, _ = plan_of(lines, horizon=0)
    kept = [r.raw for r in plan.keep]
    assert kept == [entry("x", 1), entry("y", 2, supersedes="x"), tomb("y", 3)]
    assert plan.pinned == {"y"}
    assert view(kept) == []
    assert compact(kept, horizon=0) == kept  # and at every later compaction


def test_a_live_superseder_is_preferred_over_a_pin() -> None:
    lines = [
        entry("x", 1),
        entry("y", 2, supersedes="x"),
        tomb("y", 3),
        entry("z", 1, supersedes="x"),
    ]
    plan, _ = plan_of(lines, horizon=0)
    assert [r.raw for r in plan.keep] == [entry("x", 1), entry("z", 1, supersedes="x")]
    assert plan.pinned == set()


# Resurrection: a stale replica merges into the compacted file (via the real merge planner)


def test_resurrection_a_deleted_entry_stays_deleted() -> None:
    """(a) A tombstone, compaction, then a stale replica still holding the entry."""
    stale = [HEADER, entry("a", 1, text="the deleted one"), entry("b", 1)]
    original = [*stale, tomb("a", 2)]
    compacted = compact(original)
    assert entry("a", 1, text="the deleted one") not in compacted
    after = merge(compacted, stale)
    assert ids(after) == ["b"]
    assert view(after) == view(original + stale)


def test_resurrection_a_deleted_superseder_keeps_its_target_superseded() -> None:
    """(b) A superseding entry that is itself deleted, compacted with every tombstone past
    the horizon, while a stale replica holds the superseded entry."""
    stale = [entry("x", 1, text="the superseded one")]
    original = [HEADER, entry("y", 2, supersedes="x"), tomb("y", 3)]
    assert ids(original + stale) == []
    compacted = compact(original, horizon=0)
    assert compacted == original[1:]  # y's tombstone is past the horizon, yet pinned
    after = merge(compacted, stale)
    assert ids(after) == []
    assert view(after) == view(original + stale)
    again = merge(compact(after, horizon=0), [*stale, entry("x", 9, text="re-added")])
    assert ids(again) == []  # a re-add of a superseded id stays superseded (rule 10)


def test_resurrection_a_later_version_stays_current() -> None:
    """(c) A later version, compaction, then a stale replica holding the earlier one."""
    stale = [entry("a", 1, text="old")]
    original = [*stale, entry("a", 2, text="new")]
    compacted = compact(original)
    assert compacted == [entry("a", 2, text="new")]
    after = merge(compacted, stale)
    assert view(after) == [entry("a", 2, text="new")]
    assert after == compacted  # the stale version is beaten: nothing appended (rule 14)


def test_resurrection_an_expired_current_version_hides_a_stale_older_one() -> None:
    stale = [entry("a", 1, text="no expiry")]
    original = [*stale, entry("a", 2, text="expires", expires=3)]
    compacted = compact(original)
    after = merge(compacted, stale)
    assert view(after) == [] == view(original)
    expiring = entry("a", 2, text="expires", expires=3)
    assert view(after, now=T0) == view(original, now=T0) == [expiring]


def test_resurrection_user_and_inferred_with_a_tombstone_between() -> None:
    """A user version, then a tombstone, then an inferred version: the user version is
    gone for good, the inferred one is current; a stale replica changes neither."""
    stale = [entry("a", 1, user=True, text="user, deleted")]
    original = [*stale, tomb("a", 2), entry("a", 3, text="inferred, later")]
    compacted = compact(original)
    assert compacted == [tomb("a", 2), entry("a", 3, text="inferred, later")]
    assert view(merge(compacted, stale)) == [entry("a", 3, text="inferred, later")]


def test_resurrection_a_later_tombstone_deletes_user_but_not_later_inferred() -> None:
    original = [entry("a", 2, user=True), entry("a", 4), entry("a", 1)]
    compacted = compact(original)
    assert compacted == [entry("a", 2, user=True), entry("a", 4)]
    for late in ([tomb("a", 3)], [tomb("a", 3), entry("a", 1)]):
        assert view(merge(compacted, late)) == view(original + late) == [entry("a", 4)]


@pytest.mark.parametrize("horizon", [NEVER, 0])
def test_merging_the_original_into_the_compacted_file_appends_nothing(horizon: int) -> None:
    """Everything compaction drops is what the merge calls beaten or duplicate (rule 14),
    so there is no churn after a compaction; only a tombstone dropped at the horizon comes
    back from a replica that still holds it (and then deletes again what it deleted)."""
    original = [
        HEADER,
        entry("a", 1),
        entry("a", 2, text="t1"),
        entry("a", 2, text="t2"),
        entry("a", 2, text="t1"),
        entry("b", 1, user=True),
        entry("b", 2),
        entry("b", 0.5),
        tomb("b", 1.5),
        entry("c", 1, supersedes="a"),
        entry("c", 2),
        entry("d", 1, supersedes="b", user=True),
        tomb("d", 3),
        entry("e", 1, expires=2),
    ]
    compacted = compact(original, horizon=horizon)
    plan = plan_merge(compacted, [("original", 1, original)], NOW)
    if horizon == NEVER:
        assert plan.append == []
    else:
        # The tombstone travels; b's current version follows it again (rule 14).
        assert [r.raw for r in plan.append] == [tomb("b", 1.5), entry("b", 2)]
        assert [r.raw for r in plan.repeated] == [entry("b", 2)]
    assert view(compacted) == view(original)


def test_every_reason_is_listed() -> None:
    lines = [
        HEADER,
        b"",
        entry("a", 1),
        entry("a", 2),
        entry("a", 2),
        entry("b", 1),
        tomb("b", 2),
        tomb("b", 1),
        tomb("c", 1),
    ]
    plan, _ = plan_of(lines, horizon=0, now=T0 + 3 * SECOND)
    plan_c, _ = plan_of(lines, horizon=NEVER)
    assert set(plan.dropped) | set(plan_c.dropped) <= set(DROP_REASONS)
    assert plan.dropped == {
        "header": 1,
        "blank": 1,
        "duplicate": 1,
        "older version": 1,
        "deleted version": 1,
        "old tombstone": 3,
    }
    assert plan_c.dropped["replaced tombstone"] == 1


# The shared conformance cases: compaction leaves each view unchanged


CASES = SHARED / "conformance" / "cases"
CASE_DIRS = sorted(p for p in CASES.iterdir() if p.is_dir()) if CASES.is_dir() else []


def _case_lines(folder: Path) -> tuple[dict[str, list[bytes]], int] | None:
    meta = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    if meta.get("error"):
        return None
    files = {}
    for name in meta["inputs"]:
        data = (folder / name).read_bytes()
        files[name] = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
    now = parse_ts(meta["now"])
    assert now is not None
    return files, now


@pytest.mark.parametrize("folder", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_conformance_case_survives_compaction(folder: Path) -> None:
    """Compacting all of a case's inputs, or all but one that then merges in, leaves its
    view unchanged (rule 15)."""
    loaded = _case_lines(folder)
    if loaded is None:
        pytest.skip("a case whose reading must fail")
    files, now = loaded
    everything = [raw for lines in files.values() for raw in lines]
    expected = view(everything, now)
    assert view(compact(everything, now=now), now) == expected
    for name, lines in files.items():
        others = [raw for other, ls in files.items() if other != name for raw in ls]
        assert view(merge(compact(others, now=now), lines, now), now) == expected


def test_a_line_repeated_by_rule_14_is_kept_once_after_what_it_beats() -> None:
    """Rule 14's repeat of an id's winning line is the same record: compaction keeps one
    copy, after the older tombstone that travelled, so a later-lines-win reader still ends
    on the winner."""
    original = [HEADER, entry("a", 2), tomb("a", 1), entry("a", 2)]
    assert compact(original) == [tomb("a", 1), entry("a", 2)]
