"""The daemon's word on convergence (issue 21): after each pass, from the receipts that pass
read (no request of its own), into the status file and systemd's STATUS= line."""

from __future__ import annotations

from pathlib import Path

from memsync.daemon.status import DaemonStatus, MemoryStatus, RemoteStatus, status_line
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir
from tests.helpers.sync import Replica, make_replica


def _status_of(r: Replica) -> DaemonStatus:
    remote = RemoteStatus(last_success=now_us())
    remote.note_convergence(StateDir(r.state_dir), "notes", "hub", r.path, r.replica_id, now_us())
    now = now_us()
    memory = MemoryStatus(path=str(r.path), remotes={"hub": remote})
    return DaemonStatus(
        pid=1,
        replica=r.replica_id,
        started_at=now,
        updated_at=now,
        config="c.toml",
        memories={"notes": memory},
    )


def test_the_status_line_says_in_sync_with_n_machines_or_what_is_not(
    tmp_path: Path, hub: Path
) -> None:
    a, b, c = (make_replica(tmp_path, name, str(hub)) for name in "abc")
    for r in (a, b, c):
        r.memory().add("fact", f"From {r.name}.")
    for r in (a, b, c, a, b, a):  # a's last pass reads b's last receipt
        r.sync()
    status = _status_of(a)
    assert status.memories["notes"].remotes["hub"].in_sync is True
    assert status_line(status) == "notes <-> hub: in sync with 2 machine(s)"

    b.memory().add("fact", "c is away.")
    b.sync()
    a.sync()  # a's pass reads b's new receipt; c has not read b's record
    status = _status_of(a)
    assert status.memories["notes"].remotes["hub"].in_sync is False
    assert status_line(status) == "notes <-> hub: agrees with 1 machine(s); behind: c"
    # As written to the status file and read back by `memsync status`.
    assert DaemonStatus.model_validate_json(status.model_dump_json()) == status
