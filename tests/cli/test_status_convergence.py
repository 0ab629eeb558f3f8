"""`memsync status` says which machines hold the same memory (issue 21): agreement, behind,
ahead, diverged, an expiry between receipts, silent and retired machines."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.core.convergence import SILENT_AFTER
from memsync.core.timestamps import SECOND
from memsync.local.fresh import now_us
from tests.helpers.crypto import BOTH_CODECS, ReplicaFactory
from tests.helpers.receipts import forge_digest, standings, status_json
from tests.helpers.sync import Replica, entry_line

HOUR = 3600 * SECOND


def _three(tmp_path: Path, hub: Path, new_replica: ReplicaFactory) -> list[Replica]:
    a, b, c = (new_replica(tmp_path, name, str(hub)) for name in "abc")
    for r in (a, b, c):
        r.memory().add("fact", f"Written on {r.name}.")
    for r in (a, b, c, a, b):
        r.sync()
    return [a, b, c]


@pytest.mark.slow
@BOTH_CODECS
def test_agreement_behind_and_back_then_ahead(
    tmp_path: Path, hub: Path, new_replica: ReplicaFactory
) -> None:
    a, b, c = _three(tmp_path, hub, new_replica)
    for r in (a, b, c):
        doc = status_json(r)
        (row,) = doc["convergence"]
        assert row["in_sync"], row
        assert row["summary"] == "in sync with 2 machine(s)"
        assert standings(r) == {r.replica_id: "this machine"} | {
            o.replica_id: "agrees" for o in (a, b, c) if o is not r
        }
    text = a.cli("status").out
    assert "convergence of notes through hub: in sync with 2 machine(s)" in text

    # c is offline while a and b write: both see it behind, and agree with each other.
    a.memory().add("fact", "Only a and b know this.")
    a.sync()
    b.memory().add("fact", "This too.")
    b.sync()
    a.sync()
    for r in (a, b):
        assert standings(r) == {r.replica_id: "this machine", "c": "behind"} | {
            o.replica_id: "agrees" for o in (a, b) if o is not r
        }
    (row,) = status_json(a)["convergence"]
    (seen_c,) = [s for s in row["replicas"] if s["replica"] == "c"]
    assert "has not read" in seen_c["detail"]
    assert "replica 'c'" not in " ".join(status_json(a)["problems"])  # not a problem
    c.sync()  # back: it reads everything, and agrees
    for r in (a, b, c):
        assert set(standings(r).values()) == {"this machine", "agrees"}

    # A record only in b's local file, not pushed: b is ahead.
    with b.path.open("ab") as f:
        f.write(entry_line("0000injected", now_us(), "Appended by hand on b.") + b"\n")
    (row,) = status_json(b)["convergence"]
    assert not row["in_sync"]
    (me,) = [s for s in row["replicas"] if s["state"] == "this machine"]
    assert me["detail"].startswith("ahead: ")
    assert "this machine ahead" in row["summary"]
    b.sync()
    a.sync()
    c.sync()
    for r in (a, b, c):
        assert set(standings(r).values()) == {"this machine", "agrees"}


@BOTH_CODECS
def test_a_replica_whose_view_differs_over_the_same_records_is_diverged(
    tmp_path: Path, hub: Path, new_replica: ReplicaFactory
) -> None:
    a, b, c = _three(tmp_path, hub, new_replica)
    c.sync()
    forge_digest(c)  # a fault: c publishes another view of the same records
    result = a.cli("status")
    assert result.rc == 1
    assert "c                    DIVERGED: the same records read, a different view" in result.out
    assert "problem: notes <-> hub: replica 'c' DIVERGED" in result.out
    assert standings(b)["c"] == "DIVERGED"
    assert standings(a)["b"] == "agrees"


def test_a_peer_holding_a_withheld_record_is_ahead(tmp_path: Path, hub: Path) -> None:
    from tests.helpers.sync import make_replica

    a, b = (make_replica(tmp_path, name, str(hub)) for name in "ab")
    a.memory().add("fact", "Shared.")
    with b.path.open("ab") as f:  # a credential: withheld, never pushed (issue 13, item 6)
        line = entry_line("0000secret", now_us(), "aws key AKIAIOSFODNN7EXAMPLE for prod")
        f.write(line + b"\n")
    for r in (a, b, a):
        r.sync()
    assert standings(a)["b"] == "ahead"
    (row,) = status_json(a)["convergence"]
    (seen_b,) = [s for s in row["replicas"] if s["replica"] == "b"]
    assert seen_b["detail"] == "holds 1 live entr(y/ies) the hub does not"


def test_an_expiry_between_receipts_is_not_divergence(tmp_path: Path, hub: Path) -> None:
    """A view taken past an `expires_at` (rule 11) differs from one taken before it, over
    the same records: said as such, not as a divergence."""
    from tests.helpers.sync import make_replica

    start = now_us()
    a, b = (make_replica(tmp_path, name, str(hub)) for name in "ab")
    with a.path.open("ab") as f:
        expiring = entry_line("0000expires", start, "Until noon.", expires_at=_ts(start + HOUR))
        f.write(expiring + b"\n")
    a.memory().add("fact", "Forever.")
    a.sync_config(now=start)
    b.sync_config(now=start + 2 * HOUR)  # b's receipt is taken after the expiry
    assert standings(a)["b"] == "expired between receipts"
    result = a.cli("status")
    assert "DIVERGED" not in result.out


def test_silent_and_retired_machines(tmp_path: Path, hub: Path) -> None:
    from tests.helpers.sync import make_replica

    start = now_us()
    a, b, c = (make_replica(tmp_path, name, str(hub)) for name in "abc")
    b.memory().add("fact", "From b, long ago.")
    b.sync_config(now=start - SILENT_AFTER - HOUR)
    c.sync_config(now=start - SILENT_AFTER - HOUR)
    a.sync()
    (row,) = status_json(a)["convergence"]
    by = {s["replica"]: s for s in row["replicas"]}
    assert by["b"]["state"] == "silent"
    assert "memsync forget-replica b" in by["b"]["detail"]
    assert by["b"]["receipt_time"] is not None
    assert a.cli("forget-replica", "c").rc == 0
    assert standings(a)["c"] == "retired"
    assert row["in_sync"]
    assert row["summary"] == "no other machine to compare with (2 silent or retired: b, c)"


def _ts(us: int) -> str:
    from memsync.core.timestamps import format_ts

    return format_ts(us)
