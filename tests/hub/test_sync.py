"""Three replicas on one machine (three configs, three state directories) sharing one
folder hub, driven through `memsync sync` in this process: convergence, idempotence, and a
lost state directory costing a re-read and nothing else. test_sync_ssh.py runs the same
scenarios over the real sshd; `BOTH_CODECS` runs a scenario over an encrypted hub too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.crypto import BOTH_CODECS, ReplicaFactory
from tests.helpers.sync import (
    MEMORY,
    Replica,
    assert_converged,
    converge,
    entry_line,
    forget_state_costs_a_reread,
    hub_file,
    record_lines,
)

SEEDS = [1, 2, 3]


@pytest.fixture
def replicas(tmp_path: Path, hub: Path, new_replica: ReplicaFactory) -> list[Replica]:
    # Three url spellings of the same folder: a path, a file:// url, and a path again.
    urls = [str(hub), f"file://{hub}", str(hub)]
    return [new_replica(tmp_path, name, url) for name, url in zip("abc", urls, strict=True)]


@pytest.mark.slow
@BOTH_CODECS
@pytest.mark.parametrize("seed", SEEDS)
def test_three_replicas_converge_and_a_further_round_is_a_no_op(
    replicas: list[Replica], hub: Path, seed: int
) -> None:
    converge(replicas, hub, seed)


@pytest.mark.slow
@BOTH_CODECS
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_a_deleted_state_directory_costs_a_reread_and_nothing_else(
    replicas: list[Replica], hub: Path, seed: int
) -> None:
    converge(replicas, hub, seed, rounds=3)
    forget_state_costs_a_reread(replicas, hub, seed)


def test_every_record_reaches_every_replica_exactly_once(
    replicas: list[Replica], hub: Path
) -> None:
    a, b, _ = replicas
    added = {r.name: r.memory().add("fact", f"Learned on {r.name}.").id for r in replicas}
    for r in replicas:
        r.sync()
    a.sync()
    b.sync()
    for r in replicas:
        ids = [rec.id for rec in r.view().records]
        assert sorted(ids) == sorted(added.values()), r.name
    # Each replica's hub file holds its own record once (and only its own).
    for r in replicas:
        lines = record_lines(hub_file(hub, r))
        assert len(lines) == 1
        assert added[r.name].encode() in lines[0]
    assert sorted(p.name for p in (hub / MEMORY).glob("*.jsonl")) == [
        "a.jsonl",
        "b.jsonl",
        "c.jsonl",
    ]
    assert_converged(replicas)


def test_plain_appends_are_synced_byte_for_byte(replicas: list[Replica], hub: Path) -> None:
    """Lines an agent appended without memsync travel as they are: unknown fields, key
    order and spacing kept (SEMANTICS rule 5)."""
    a, b, c = replicas
    a.memory()
    line = entry_line(
        "handwritten1", "2026-01-02T03:04:05.678+01:00", "Spacing  and  order kept.", x={"y": 1}
    )
    with open(a.path, "ab") as f:
        f.write(line + b"\n")
    a.sync()
    b.sync()
    assert line in record_lines(b.path)
    assert line in record_lines(hub_file(hub, a))
    c.sync()
    assert_converged(replicas)


@pytest.mark.slow
@BOTH_CODECS
def test_a_fourth_replica_joining_late_catches_up(
    tmp_path: Path, replicas: list[Replica], hub: Path, new_replica: ReplicaFactory
) -> None:
    converge(replicas, hub, seed=7, rounds=2)
    late = new_replica(tmp_path, "late", str(hub))
    (report,) = late.sync()
    assert report["peers"] == 3
    assert report["pushed_records"] == 0  # it holds nothing of its own
    assert not hub_file(hub, late).exists()
    assert_converged([*replicas, late])
