"""Rule 7 inside a merge: one record written two ways is appended once, also when the
destination holds a twin of it (same key, other content). Found with the git merge
driver's property (issue 22, item 6): THEIRS held a record in two spellings, OURS its twin,
and both spellings were appended."""

from __future__ import annotations

from memsync.core.merge import plan_merge
from memsync.core.timestamps import parse_ts

_NOW = parse_ts("2026-12-01T00:00:00Z")
assert _NOW is not None
NOW: int = _NOW
R = b'{"id": "a1a1a1a1a1a1", "kind": "fact", "text": "r", "created_at": "2026-11-01T00:01:00Z"}'
T = b'{"id": "a1a1a1a1a1a1", "kind": "fact", "text": "t", "created_at": "2026-11-01T00:01:00Z"}'
T_AGAIN = b'{"created_at":"2026-11-01T00:01:00.000Z","id":"a1a1a1a1a1a1","kind":"fact","text":"t"}'


def test_a_record_in_two_spellings_beside_a_twin_in_the_file_is_appended_once() -> None:
    for incoming in ([T, T_AGAIN], [T_AGAIN, T]):
        plan = plan_merge([R], [("s", 1, incoming)], NOW)
        assert [r.raw for r in plan.append] == [incoming[0]]
        assert plan.repeated == []
        assert len(plan.twins) == 1
        assert plan.duplicates == 1


def test_merging_again_appends_nothing() -> None:
    plan = plan_merge([R], [("s", 1, [T, T_AGAIN])], NOW)
    dest = [R, *(r.raw for r in plan.append)]
    assert plan_merge(dest, [("s", 1, [T, T_AGAIN])], NOW).append == []
