"""Compaction's side of the hub (rule 15): a tombstone goes only once every replica in the
hub has read past it, and a replica's own hub file is compacted so that peers notice.

Real replicas (config files, state directories) sharing a folder hub, synced through the
CLI; compaction through the same calls the daemon makes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from memsync.core.lines import Header, classify
from memsync.core.records import Record
from memsync.core.timestamps import SECOND
from memsync.hub.compaction import acknowledged_for
from memsync.hub.transports.localdir import LocalDirTransport
from memsync.local.compaction import compact_file
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir
from tests.helpers.crypto import (
    BOTH_CODECS,
    ReplicaFactory,
    compact_own_hub_file_as_configured,
    readable_in_hub,
    replica_factory,
)
from tests.helpers.sync import MEMORY, Replica, assert_converged, hub_file

DAY = 86_400 * SECOND


def _tombstones(path: Path) -> list[Record]:
    out = []
    for raw in path.read_bytes().splitlines():
        rec = classify(raw)
        if isinstance(rec, Record) and rec.deleted:
            out.append(rec)
    return out


def _deleted_entry(
    tmp_path: Path, names: list[str], new_replica: ReplicaFactory
) -> tuple[Path, list[Replica], str]:
    """Replicas sharing a hub; the first adds an entry, everyone syncs, the first forgets it."""
    hub = tmp_path / "hub"
    hub.mkdir()
    reps = [new_replica(tmp_path, n, str(hub)) for n in names]
    rid = reps[0].memory().add("fact", "The staging bucket moved.").id
    for r in reps:
        r.sync()
    reps[0].memory().forget(rid)
    return hub, reps, rid


def _weigh_own_hub_file(replica: Replica, hub: Path) -> None:
    """Compact the replica's own hub file against its local file, as `compact_memory`
    does before the local file (every tombstone kept: only the weighing matters here)."""
    compact_own_hub_file_as_configured(
        memory=MEMORY,
        remote="hub",
        transport=LocalDirTransport(hub),
        replica=replica.replica_id,
        state_dir=StateDir(replica.state_dir),
        horizon=DAY,
        acknowledged=None,
        local=replica.path,
    )


@pytest.mark.slow
@BOTH_CODECS
def test_a_tombstone_every_replica_read_is_acknowledged_and_may_go(
    tmp_path: Path, new_replica: ReplicaFactory
) -> None:
    hub, (a, b), rid = _deleted_entry(tmp_path, ["a", "b"], new_replica)
    a.sync()  # pushes the tombstone
    b.sync()  # reads it, and publishes that it did
    a.sync()  # reads b's watermarks
    ack = acknowledged_for(StateDir(a.state_dir), MEMORY, ["hub"], "a")
    assert ack is not None
    [tomb] = _tombstones(a.path)
    # Read by everyone, but our own hub file was not compacted against the local file
    # since: it may hold what the tombstone deletes (issue 24, residual (b)).
    assert not ack(tomb)
    _weigh_own_hub_file(a, hub)
    ack = acknowledged_for(StateDir(a.state_dir), MEMORY, ["hub"], "a")
    assert ack is not None
    assert ack(tomb)
    later = now_us() + 2 * DAY
    result = compact_file(a.path, now=later, horizon_days=1, quiet_seconds=0, acknowledged=ack)
    assert result.rewritten
    assert _tombstones(a.path) == []
    assert rid not in a.path.read_text()  # the deleted entry went with its tombstone
    assert all(rec.id != rid for rec in a.view().records)


@pytest.mark.slow
@BOTH_CODECS
def test_a_replica_that_has_not_read_a_tombstone_holds_it_back(
    tmp_path: Path, new_replica: ReplicaFactory
) -> None:
    _hub, (a, b, c), rid = _deleted_entry(tmp_path, ["a", "b", "c"], new_replica)
    a.sync()
    b.sync()  # b reads the tombstone; c does not sync again
    a.sync()
    ack = acknowledged_for(StateDir(a.state_dir), MEMORY, ["hub"], "a")
    assert ack is not None
    [tomb] = _tombstones(a.path)
    assert not ack(tomb)
    later = now_us() + 2 * DAY
    compact_file(a.path, now=later, horizon_days=1, quiet_seconds=0, acknowledged=ack)
    assert [t.id for t in _tombstones(a.path)] == [rid]  # kept for c
    # c still holds the entry; when it syncs, the entry stays deleted everywhere.
    c.sync()
    a.sync()
    assert all(rec.id != rid for rec in c.view().records)
    assert_converged([a, b, c])


@pytest.mark.slow
@BOTH_CODECS
def test_a_retired_replica_no_longer_holds_tombstones_back(
    tmp_path: Path, new_replica: ReplicaFactory
) -> None:
    hub, (a, b, _c), _ = _deleted_entry(tmp_path, ["a", "b", "c"], new_replica)
    a.sync()
    b.sync()
    a.sync()
    _weigh_own_hub_file(a, hub)
    assert a.cli("forget-replica", "c").rc == 0
    ack = acknowledged_for(StateDir(a.state_dir), MEMORY, ["hub"], "a")
    assert ack is not None
    [tomb] = _tombstones(a.path)
    assert ack(tomb)


def test_a_file_with_no_remote_needs_no_acknowledgement(tmp_path: Path) -> None:
    assert acknowledged_for(StateDir(tmp_path), MEMORY, [], "a") is None


@pytest.mark.slow
@BOTH_CODECS
def test_own_hub_file_compaction_is_noticed_by_peers(
    tmp_path: Path, new_replica: ReplicaFactory
) -> None:
    hub, (a, b), _rid = _deleted_entry(tmp_path, ["a", "b"], new_replica)
    mem = a.memory()
    for i in range(20):  # versions that compaction can drop
        mem.supersede(mem.add("lesson", f"Version {i}.").id, f"Version {i}, revised.")
    a.sync()
    b.sync()
    a.sync()
    own = hub_file(hub, a)
    before = own.read_bytes()
    header_before = classify(before.splitlines()[0])
    ack = acknowledged_for(StateDir(a.state_dir), MEMORY, ["hub"], "a")
    sizes = compact_own_hub_file_as_configured(
        memory=MEMORY,
        remote="hub",
        transport=LocalDirTransport(hub),
        replica="a",
        state_dir=StateDir(a.state_dir),
        horizon=DAY,
        acknowledged=ack,
        now=now_us() + 2 * DAY,
    )
    assert sizes is not None
    assert sizes[1] < sizes[0] == len(before)
    after = own.read_bytes()
    assert len(after) == sizes[1]
    header_after = classify(after.splitlines()[0])
    assert isinstance(header_before, Header)
    assert isinstance(header_after, Header)
    assert header_after.generation != header_before.generation
    # Peers re-read it; a keeps pushing at the right place; nothing is lost or duplicated.
    a.memory().add("fact", "Written after the hub file was compacted.")
    for r in (b, a, b):
        r.sync()
    assert_converged([a, b])
    assert any("after the hub file" in rec.raw.decode() for rec in b.view().records)


@pytest.mark.slow
def test_own_hub_file_compacted_stays_encrypted(tmp_path: Path) -> None:
    new_replica = replica_factory("encrypted")
    hub, (a, b), _rid = _deleted_entry(tmp_path, ["a", "b"], new_replica)
    mem = a.memory()
    for i in range(10):
        mem.supersede(mem.add("lesson", f"Version {i}.").id, f"Version {i}, revised.")
    for r in (a, b, a):
        r.sync()
    sizes = compact_own_hub_file_as_configured(
        memory=MEMORY,
        remote="hub",
        transport=LocalDirTransport(hub),
        replica="a",
        state_dir=StateDir(a.state_dir),
        horizon=DAY,
        acknowledged=None,
        now=now_us() + 2 * DAY,
    )
    assert sizes is not None
    assert sizes[1] < sizes[0]
    lines = hub_file(hub, a).read_bytes().splitlines()
    assert json.loads(lines[0])["encryption"] == "aes-siv-256/1"
    assert all(line.startswith(b'{"c":"') for line in lines[1:])
    assert readable_in_hub(hub, [a, b]) == []
    a.memory().add("fact", "After the compaction.")
    for r in (b, a, b):
        r.sync()
    assert_converged([a, b])


@pytest.mark.slow
def test_our_hub_file_with_a_terminated_torn_line_is_still_weighed(tmp_path: Path) -> None:
    """A torn write of ours that an S3 pass terminated stays in our hub file as a bad line,
    and its compaction then keeps the file as it is; when nothing in it is deleted by the
    local file, it counts as weighed all the same, or the local file would keep its
    acknowledged tombstones for good."""
    # b wrote the entry and forgot it; a's own hub file holds a record of its own only.
    hub, (b, a), _rid = _deleted_entry(tmp_path, ["b", "a"], replica_factory("plain"))
    a.memory().add("fact", "Written by a.")
    for r in (b, a, b, a):
        r.sync()
    own = hub_file(hub, a)
    torn = b'{"id": "torn00000000", "kind": "fa\n'
    with own.open("ab") as f:
        f.write(torn)
    path = a.state_dir / "sync" / MEMORY / "hub.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    data = own.read_bytes()
    doc["own_size"], doc["own_tail"] = len(data), base64.b64encode(data[-1024:]).decode()
    path.write_text(json.dumps(doc), encoding="utf-8")  # as the pass that terminated it left it
    [tomb] = _tombstones(a.path)
    ack = acknowledged_for(StateDir(a.state_dir), MEMORY, ["hub"], "a")
    assert ack is not None
    assert not ack(tomb)
    _weigh_own_hub_file(a, hub)
    assert own.read_bytes() == data  # kept as it is
    ack = acknowledged_for(StateDir(a.state_dir), MEMORY, ["hub"], "a")
    assert ack is not None
    assert ack(tomb)
