"""A peer's receipt is untrusted input (issue 21): whatever a faulty or hostile replica
puts in `<replica>.receipt.json`, another machine's sync pass and `memsync status` go on,
and the receipt counts as none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsync.core.receipts import RECEIPT_SUFFIX, parse_receipt
from tests.helpers.receipts import receipt_path
from tests.helpers.sync import MEMORY, make_replica


def _forged(hub: Path, of: str, doc: dict[str, object]) -> bytes:
    """`of`'s receipt with the fields of `doc` replaced."""
    good = json.loads((hub / MEMORY / f"{of}{RECEIPT_SUFFIX}").read_bytes())
    good.update(doc)
    return json.dumps(good).encode()


# Instants RFC 3339 can write but Python's dates cannot hold once taken to UTC.
OUT_OF_RANGE = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"]


@pytest.mark.parametrize("when", OUT_OF_RANGE)
def test_a_receipt_time_no_date_can_hold_is_no_receipt(
    tmp_path: Path, hub: Path, when: str
) -> None:
    a, b = (make_replica(tmp_path, name, str(hub)) for name in "ab")
    a.memory().add("fact", "The staging bucket is eu-west-1.")
    a.sync()
    data = _forged(hub, a.replica_id, {"time": when})
    assert parse_receipt(a.replica_id, data) is None
    doc = json.loads(data)
    doc["time"] = "2026-11-01T00:00:00Z"
    doc["view"]["valid_until"] = when
    assert parse_receipt(a.replica_id, json.dumps(doc).encode()) is None
    receipt_path(hub, a).write_bytes(data)
    b.sync()  # reads a's receipt: no traceback
    status = b.cli("status")
    assert "Traceback" not in status.err
    assert status.rc in (0, 1), status.err


def test_a_deeply_nested_receipt_is_no_receipt(tmp_path: Path, hub: Path) -> None:
    a, b = (make_replica(tmp_path, name, str(hub)) for name in "ab")
    a.memory().add("fact", "The staging bucket is eu-west-1.")
    a.sync()
    nested = b"[" * 200_000 + b"]" * 200_000
    assert parse_receipt(a.replica_id, nested) is None
    receipt_path(hub, a).write_bytes(nested)
    b.sync()
    status = b.cli("status")
    assert "Traceback" not in status.err
    assert status.rc in (0, 1), status.err


@pytest.mark.parametrize("version", ["1.0\x1b[2J\x1b]0;owned\x07", "1.0\nREADY=1", "v" * 5000])
def test_a_receipt_version_that_is_no_version_is_not_printed(
    tmp_path: Path, hub: Path, version: str
) -> None:
    """`memsync status` prints a peer's version when views differ (rule 17: what another
    machine wrote never drives the terminal, nor starts a line)."""
    a = make_replica(tmp_path, "a", str(hub))
    a.memory().add("fact", "The staging bucket is eu-west-1.")
    a.sync()
    receipt = parse_receipt(a.replica_id, _forged(hub, a.replica_id, {"version": version}))
    assert receipt is not None
    assert receipt.version == "?"
