"""`memsync diff REPLICA` (issue 21): the entries that differ between this machine's view
and another replica's, from the buckets of ids that differ in its receipt and the stretches
of hub files one has read and the other not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memsync.core.receipts import bucket_of
from memsync.local.fresh import now_us
from tests.helpers.sync import Replica, entry_line, make_replica


def _diff(replica: Replica, other: str) -> tuple[int, dict[str, Any]]:
    result = replica.cli("diff", other, "--json")
    doc: dict[str, Any] = json.loads(result.out) if result.out else {"err": result.err}
    return result.rc, doc


def _id_in(bucket: int, other_than: int = -1) -> str:
    """An id in `bucket` (or, with `other_than`, in any bucket but that one)."""
    for n in range(1, 1 << 16):
        rid = f"{n:012x}"
        b = bucket_of(rid)
        if (b == bucket and other_than < 0) or (other_than >= 0 and b != other_than):
            return rid
    raise AssertionError("no such id")


def test_diff_names_the_entries_the_other_replica_has_not_read(tmp_path: Path, hub: Path) -> None:
    a, b = (make_replica(tmp_path, name, str(hub)) for name in "ab")
    mem = a.memory()
    for i in range(40):
        mem.add("fact", f"Shared fact {i}.")
    # Both hold X superseded by S of another bucket (rule 10): X is out of both views.
    x = mem.view().records[0]
    s = _id_in(-1, other_than=bucket_of(x.id))
    with a.path.open("ab") as f:
        f.write(entry_line(s, now_us(), "A better shared fact.", supersedes=x.id) + b"\n")
    for r in (a, b, a):
        r.sync()
    assert _diff(a, "b")[0] == 0

    new = _id_in(bucket_of(x.id))  # X's bucket now differs: S must still count there
    with a.path.open("ab") as f:
        f.write(entry_line(new, now_us(), "Only a has this.") + b"\n")
    fresh = mem.add("fact", "This too.")
    gone = next(r for r in mem.view().records if r.id not in (new, fresh.id, s))
    mem.forget(gone.id)
    a.sync()
    rc, doc = _diff(a, "b")
    assert rc == 1
    changed = {d["id"]: (d["here"] is not None, d["there"] is not None) for d in doc["differences"]}
    assert changed == {new: (True, False), fresh.id: (True, False), gone.id: (False, True)}
    assert doc["unresolved"] == []
    assert doc["hub_bytes"] < 8 * 1024  # the receipt and a's new lines, not the files

    result = a.cli("diff", "b")
    assert f"  {new}  only here: " in result.out
    b.sync()
    assert _diff(a, "b") == (0, _diff(a, "b")[1])


def test_diff_of_a_replica_without_a_receipt_is_one_line(tmp_path: Path, hub: Path) -> None:
    a = make_replica(tmp_path, "a", str(hub))
    a.memory().add("fact", "Alone.")
    a.sync()
    result = a.cli("diff", "nobody")
    assert result.rc == 2
    assert result.err.strip().count("\n") == 0
    assert "nobody.receipt.json: no receipt" in result.err
