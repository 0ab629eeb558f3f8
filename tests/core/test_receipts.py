"""Receipts as data (issue 21): a round trip, and a receipt from another machine read
defensively: anything that is not a whole receipt of the replica it is named for is none."""

from __future__ import annotations

import json

import pytest

from memsync.core.digest import view_digest
from memsync.core.receipts import (
    BUCKETS,
    Receipt,
    ViewSummary,
    bucket_of,
    parse_receipt,
    summarize,
)
from tests.helpers.sync import entry_line

_LINES = [entry_line(f"{i:012x}", 1_700_000_000_000_000 + i) for i in range(50)]


def _receipt() -> Receipt:
    view = summarize((f"{i:012x}", raw, None) for i, raw in enumerate(_LINES))
    return Receipt(
        "laptop",
        1_800_000_000_000_000,
        "0.1.0",
        view,
        "ab" * 8,
        {"vm.jsonl": (812, "g1")},
        (400, "g2"),
        3,
    )


def test_a_receipt_reads_back_as_written() -> None:
    r = _receipt()
    back = parse_receipt("laptop", r.encode())
    assert back == r
    digest = view_digest(_LINES)
    assert (r.view.digest, r.view.entries) == (digest.value, digest.entries)
    assert sum(r.view.buckets) % (1 << 64) == r.view.digest
    assert all(0 <= bucket_of(f"{i:x}") < BUCKETS for i in range(1000))


def _mutated(change: dict[str, object]) -> bytes:
    doc = json.loads(_receipt().encode())
    for key, value in change.items():
        where = doc
        *path, last = key.split(".")
        for part in path:
            where = where[part]
        where[last] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        _mutated({"format": "memsync-receipt/2"}),
        _mutated({"replica": "desktop"}),  # another replica's receipt under this name
        _mutated({"time": "yesterday"}),
        _mutated({"view.digest": "xyz"}),
        _mutated({"view.entries": -1}),
        _mutated({"view.buckets": "AAAA"}),  # truncated
        _mutated({"view.valid_until": "soon"}),
        _receipt().encode() + b" " * (1 << 20),  # valid JSON, over the size bound
    ],
)
def test_anything_but_a_whole_receipt_of_that_replica_is_none(data: bytes) -> None:
    assert parse_receipt("laptop", data) is None


def test_bad_positions_are_left_out_not_trusted() -> None:
    data = _mutated(
        {"read": {"vm.jsonl": {"offset": -5}, "../x": {"offset": 1}, "ok.jsonl": {"offset": 7}}}
    )
    r = parse_receipt("laptop", data)
    assert r is not None
    assert r.read == {"ok.jsonl": (7, None)}


def test_an_empty_view_has_zero_digest() -> None:
    assert summarize([]) == ViewSummary()
