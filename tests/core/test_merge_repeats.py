"""Rule 14's repeated winner, by example: a beaten record that must travel (a tombstone
older than a surviving version of the other class; a superseding entry beaten in its own
id) is appended, and after it, byte for byte, the line that beats it, so that a reader
letting later lines win still ends on the view's winner."""

from __future__ import annotations

from memsync.core.merge import plan_merge
from memsync.core.timestamps import SECOND
from tests.helpers.records import T0, entry, tomb

NOW = T0 + 10 * SECOND


def test_a_beaten_superseding_entry_travels_and_its_ids_winner_is_repeated() -> None:
    """The file's current version of b is b2; b1, older, superseded a: it must travel (its
    supersession is permanent, rule 10), and b2 is repeated after it."""
    a1 = entry("a1a1a1a1a1a1", 1)
    b2 = entry("b2b2b2b2b2b2", 5, text="b, second version")
    b1 = entry("b2b2b2b2b2b2", 3, text="b, first version", supersedes="a1a1a1a1a1a1")
    plan = plan_merge([a1, b2], [("src", 1, [b1])], NOW)
    assert [r.raw for r in plan.append] == [b1, b2]
    assert [r.raw for r in plan.repeated] == [b2]


def test_an_old_tombstone_travels_and_the_surviving_version_is_repeated() -> None:
    """The file's current version of x is an inferred one at 5; a tombstone at 3 is older,
    yet it must travel (it still deletes the person's version at 2, wherever that is), and
    the inferred version is repeated after it."""
    x5 = entry("x1x1x1x1x1x1", 5, text="x, inferred at 5")
    x_tomb = tomb("x1x1x1x1x1x1", 3)
    plan = plan_merge([x5], [("src", 1, [x_tomb])], NOW)
    assert [r.raw for r in plan.append] == [x_tomb, x5]
    assert [r.raw for r in plan.repeated] == [x5]


def test_a_merge_that_beats_nothing_repeats_nothing() -> None:
    """The other side: a newer version is appended alone, no line repeated."""
    x1 = entry("x1x1x1x1x1x1", 1)
    x2 = entry("x1x1x1x1x1x1", 2, text="x, newer")
    plan = plan_merge([x1], [("src", 1, [x2])], NOW)
    assert [r.raw for r in plan.append] == [x2]
    assert plan.repeated == []
