"""The view digest (`memsync.core.digest`, issue 20): equal for equal views whatever the
order of the lines and the bytes that carry each record (rule 7), different when one live
record differs."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.core.digest import ViewDigest, record_hash, view_digest
from memsync.core.view import Index, build_view
from tests.helpers.strategies import NOW, line_soups


def _digest(lines: list[bytes], now: int = NOW) -> ViewDigest:
    index = Index()
    index.fold_lines(lines, source="m.jsonl")
    return view_digest(rec.raw for rec in build_view(index, now).live)


@pytest.mark.slow
@given(line_soups(), st.randoms(use_true_random=False))
def test_the_digest_does_not_depend_on_the_order_of_the_lines(
    lines: list[bytes], rng: random.Random
) -> None:
    shuffled = lines[:]
    rng.shuffle(shuffled)
    assert _digest(shuffled) == _digest(lines)


@pytest.mark.slow
@given(line_soups())
def test_the_digest_counts_the_live_entries(lines: list[bytes]) -> None:
    index = Index()
    index.fold_lines(lines, source="m.jsonl")
    assert _digest(lines).entries == len(build_view(index, NOW).live)


def _line(**fields: object) -> bytes:
    base = {"id": "a1b2c3d4e5f6", "kind": "fact", "text": "The NAS is at 10.0.0.5."}
    return json.dumps({**base, "created_at": "2026-03-01T10:00:00Z", **fields}).encode()


def test_a_record_written_in_other_bytes_hashes_the_same() -> None:
    one = b'{"id":"a1b2c3d4e5f6","kind":"fact","text":"x","created_at":"2026-03-01T10:00:00Z"}'
    other = (
        b'{ "created_at": "2026-03-01T10:00:00Z", "text": "x",\t"kind": "fact", '
        b'"id": "a1b2c3d4e5f6" }'
    )
    assert record_hash(one) == record_hash(other)


def test_one_different_record_changes_the_digest() -> None:
    shared = [_line(id=f"{n:012x}", text=f"Fact {n}.") for n in range(50)]
    a = _digest([*shared, _line(id="ffffffffffff", text="Only here.")])
    b = _digest([*shared, _line(id="ffffffffffff", text="Only here!")])
    c = _digest(shared)
    assert a.value != b.value
    assert a.entries == b.entries == 51
    assert c.entries == 50
    assert len({a.value, b.value, c.value}) == 3


def test_a_forgotten_record_leaves_the_digest_as_if_never_written() -> None:
    shared = [_line(id=f"{n:012x}", text=f"Fact {n}.") for n in range(5)]
    tomb = json.dumps(
        {"id": "ffffffffffff", "deleted": True, "created_at": "2026-03-02T10:00:00Z"}
    ).encode()
    assert _digest([*shared, _line(id="ffffffffffff"), tomb]) == _digest(shared)


def test_the_digest_prints_as_16_hex_digits_and_a_count() -> None:
    assert str(ViewDigest(0xABC, 3)) == "0000000000000abc 3 entries"
