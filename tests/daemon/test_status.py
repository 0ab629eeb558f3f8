"""`memsync status` against real status files: written by `memsync.daemon.status.write_status`
(the daemon's own writer), the daemon's PID lock held (or not) by this test with filelock,
and the command run as a process. It exits 1 when the daemon is not running, when its
status is stale, or when a remote has been failing for more than 10 minutes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from memsync.core.timestamps import SECOND
from memsync.daemon.status import (
    FAILING_TOO_LONG,
    STALE_AFTER,
    DaemonStatus,
    MemoryStatus,
    RemoteStatus,
    evaluate,
    returns,
    write_pid,
    write_status,
)
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir
from tests.helpers.daemons import memsync

MINUTE = 60 * SECOND
NAS_ERROR = "hub folder missing or unreadable: /mnt/nas/memsync (is the share mounted?)"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nreplica = "laptop"\n\n'
        f'[[memory]]\nname = "me"\npath = "{tmp_path / "me.jsonl"}"\n\n'
        f'[[remote]]\nname = "nas"\nurl = "{tmp_path / "hub"}"\n'
    )
    (tmp_path / "state").mkdir()
    return path


@pytest.fixture
def state(config: Path) -> Path:
    return config.parent / "state"


@pytest.fixture
def daemon_lock(state: Path) -> Iterator[int]:
    """Hold the PID lock as a running daemon does (and write the pid file it writes)."""
    lock = FileLock(StateDir(state).daemon_lock, mode=0o600)
    lock.acquire(timeout=0)
    write_pid(StateDir(state))
    try:
        yield int((state / "daemon.pid").read_text())
    finally:
        lock.release()


def _status(
    *, updated_ago: int = 0, failing_for: int | None = None, pid: int = 4242
) -> DaemonStatus:
    now = now_us()
    remote = RemoteStatus(last_success=now - 20 * MINUTE, records_in=3, records_out=5)
    if failing_for is not None:
        remote.failing_since = now - failing_for
        remote.last_error = NAS_ERROR
    return DaemonStatus(
        pid=pid,
        replica="laptop",
        started_at=now - 60 * MINUTE,
        updated_at=now - updated_ago,
        config="config.toml",
        memories={"me": MemoryStatus(path="/home/me/me.jsonl", remotes={"nas": remote})},
    )


def test_all_well_exits_0(config: Path, state: Path, daemon_lock: int) -> None:
    write_status(StateDir(state), _status(pid=daemon_lock))
    done = memsync("status", "--config", str(config))
    assert done.returncode == 0, done.stdout
    assert f"daemon: running (pid {daemon_lock}), replica 'laptop'" in done.stdout
    row = next(ln for ln in done.stdout.splitlines() if ln.startswith("me "))
    assert row.split()[1] == "nas"
    assert row.endswith("ok")
    assert "problem" not in done.stdout


@pytest.mark.slow
def test_a_remote_failing_for_11_minutes_exits_1_and_names_it(
    config: Path, state: Path, daemon_lock: int
) -> None:
    write_status(StateDir(state), _status(failing_for=11 * MINUTE, pid=daemon_lock))
    done = memsync("status", "--config", str(config))
    assert done.returncode == 1, done.stdout
    assert "daemon: running" in done.stdout
    problems = [ln for ln in done.stdout.splitlines() if ln.startswith("problem:")]
    assert problems == [f"problem: me <-> nas: failing for 11 min: {NAS_ERROR}"]
    assert f"FAILING: {NAS_ERROR}" in done.stdout

    as_json = memsync("status", "--config", str(config), "--json")
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert doc["ok"] is False
    assert doc["running"] is True
    assert doc["stale"] is False
    assert doc["problems"] == [problems[0].removeprefix("problem: ")]
    assert doc["status"]["memories"]["me"]["remotes"]["nas"]["last_error"] == NAS_ERROR


@pytest.mark.slow
def test_a_remote_failing_for_9_minutes_is_shown_but_not_yet_a_problem(
    config: Path, state: Path, daemon_lock: int
) -> None:
    write_status(StateDir(state), _status(failing_for=9 * MINUTE, pid=daemon_lock))
    done = memsync("status", "--config", str(config))
    assert done.returncode == 0, done.stdout
    assert f"FAILING: {NAS_ERROR}" in done.stdout
    assert "problem" not in done.stdout


def test_a_stopped_daemon_is_not_running(config: Path, state: Path) -> None:
    write_status(StateDir(state), _status())  # the last status of a daemon that stopped
    write_pid(StateDir(state))
    lock = FileLock(StateDir(state).daemon_lock, mode=0o600)
    lock.acquire(timeout=0)  # the lock file is there, as a stopped daemon leaves it,
    lock.release()  # and nobody holds it
    assert StateDir(state).daemon_lock.exists()
    done = memsync("status", "--config", str(config))
    assert done.returncode == 1
    assert "daemon: NOT RUNNING" in done.stdout
    assert "problem: the daemon is not running (start it: memsync daemon)" in done.stdout
    assert "status written:" in done.stdout  # the last status is still shown


@pytest.mark.slow
def test_no_status_and_no_daemon(config: Path) -> None:
    done = memsync("status", "--config", str(config))
    assert done.returncode == 1
    assert "daemon: NOT RUNNING" in done.stdout
    assert "problem: no status has been written yet" in done.stdout


def test_a_stale_status_of_a_running_daemon_says_stale(
    config: Path, state: Path, daemon_lock: int
) -> None:
    write_status(StateDir(state), _status(updated_ago=5 * MINUTE, pid=daemon_lock))
    done = memsync("status", "--config", str(config))
    assert done.returncode == 1, done.stdout
    assert "daemon: running" in done.stdout
    assert "(STALE)" in done.stdout
    assert "problem: the status is stale: last written 5 min ago" in done.stdout


@pytest.mark.slow
def test_an_unreadable_status_counts_as_none(config: Path, state: Path, daemon_lock: int) -> None:
    (state / "status.json").write_text("{not json")
    done = memsync("status", "--config", str(config))
    assert done.returncode == 1
    assert "problem: no status has been written yet" in done.stdout


# The verdict itself, at its boundaries (pure: a document and `now`).


def test_evaluate_boundaries() -> None:
    now = 1_800_000_000 * SECOND
    st = _status()
    st.updated_at = now - STALE_AFTER
    st.memories["me"].remotes["nas"].failing_since = now - FAILING_TOO_LONG
    st.memories["me"].remotes["nas"].last_error = "x"
    assert evaluate(st, 1, now).ok  # exactly at the limits: not yet
    late = evaluate(st, 1, now + 1)
    assert late.stale
    assert len(late.problems) == 2
    stopped = evaluate(st, None, now + 1)
    assert not stopped.running
    assert all("stale" not in p for p in stopped.problems)  # not running says it all
    assert stopped.problems[0].startswith("the daemon is not running")


def test_a_replica_clash_is_a_problem_at_once_and_gone_after_a_pass() -> None:
    """Issue 13: a clash stops pushes until the user acts, so no grace period."""
    now = 1_800_000_000 * SECOND
    st = _status()
    st.updated_at = now
    remote = st.memories["me"].remotes["nas"]
    clash = "nas:me/laptop.jsonl: another machine uses ..."
    remote.note_failure(clash, now, "replica-clash")
    assert evaluate(st, 1, now).problems == [
        f"me <-> nas: replica id clash, stopped until fixed: {clash}"
    ]
    remote.note_failure(NAS_ERROR, now, None)  # the cause changed: a failure that may pass
    assert evaluate(st, 1, now).ok
    remote.note_failure("clash again", now, "replica-clash")
    assert not evaluate(st, 1, now).ok
    from memsync.hub.sync import SyncReport

    remote.note_pass(SyncReport("me", "nas"), now)  # the user gave this machine a new id
    assert remote.error_kind is None
    assert evaluate(st, 1, now).ok


def test_a_status_file_of_an_earlier_version_still_reads(tmp_path: Path) -> None:
    """Fields added later (the error kind, the compaction record) default when absent."""
    from memsync.daemon.status import read_status

    doc = json.loads(_status().model_dump_json())
    remote = doc["memories"]["me"]["remotes"]["nas"]
    del remote["error_kind"]
    for key in ("postponed_since", "last_postponed", "postponements"):
        del doc["memories"]["me"][key]
    del doc["max_postpone_seconds"]
    remote["failing_since"], remote["last_error"] = doc["updated_at"], NAS_ERROR
    StateDir(tmp_path).daemon_status.write_text(json.dumps(doc))
    st = read_status(StateDir(tmp_path))
    assert st is not None
    assert st.memories["me"].remotes["nas"].error_kind is None
    assert (st.memories["me"].postponed_since, st.memories["me"].postponements) == (None, 0)
    assert evaluate(st, 1, doc["updated_at"]).ok


QUIET = "/home/me/me.jsonl: changed 3 s ago; quiet period is 60 s"


@pytest.mark.slow
def test_a_postponed_compaction_is_shown_then_a_problem_past_the_bound(
    config: Path, state: Path, daemon_lock: int
) -> None:
    """Issue 13: compaction postponed again and again (agents never stop writing) is
    shown with why and since when; past `max_postpone_seconds` (and the 10 minutes the
    forced compaction has to run) it is a problem: something else keeps it off."""
    st = _status(pid=daemon_lock)
    mem = st.memories["me"]
    now = st.updated_at
    start = now - 3 * 3600 * SECOND
    for i in range(3):
        mem.note_postponed(QUIET, start + i * MINUTE)
    write_status(StateDir(state), st)
    done = memsync("status", "--config", str(config))
    assert done.returncode == 0, done.stdout  # within the bound (a day): shown only
    assert f"compaction of me: last run never; postponed 3 time(s) over 180 min: {QUIET}" in (
        done.stdout.splitlines()
    )

    st.max_postpone_seconds = 3600.0
    write_status(StateDir(state), st)
    done = memsync("status", "--config", str(config))
    assert done.returncode == 1, done.stdout
    problem = (
        "problem: me: compaction postponed 3 time(s) over 3.0 h (max_postpone_seconds = "
        f"3600), the file grows: {QUIET}"
    )
    assert [ln for ln in done.stdout.splitlines() if ln.startswith("problem:")] == [problem]

    mem.note_compacted(now, forced=True)  # the forced compaction ran
    assert mem.last_compaction_note == (
        "done, forced after 3 postponement(s) over 3.0 h (the file was never quiet)"
    )
    write_status(StateDir(state), st)
    done = memsync("status", "--config", str(config))
    assert done.returncode == 0, done.stdout
    assert "compaction of me: last run " in done.stdout
    assert "(done, forced after 3 postponement(s)" in done.stdout


def test_postponement_boundaries() -> None:
    now = 1_800_000_000 * SECOND
    st = _status()
    st.updated_at = now
    st.max_postpone_seconds = 60.0
    mem = st.memories["me"]
    assert not mem.overdue(now, 60.0)  # never postponed
    mem.note_postponed(QUIET, now - 60 * SECOND)
    mem.note_postponed(QUIET, now - 30 * SECOND)
    assert mem.postponed_since == now - 60 * SECOND  # the run's first
    assert mem.last_postponed == now - 30 * SECOND
    assert not mem.overdue(now - 1, 60.0)
    assert mem.overdue(now, 60.0)  # the daemon forces the next attempt
    late = now - 60 * SECOND + 60 * SECOND + FAILING_TOO_LONG
    st.updated_at = late  # a fresh status
    assert evaluate(st, 1, late).ok  # the forced attempt still has time to run
    assert not evaluate(st, 1, late + 1).ok
    mem.note_compacted(now, forced=False)
    after = st.memories["me"]  # (not `mem`: mypy keeps its narrowing past the call)
    assert (after.postponed_since, after.postponements, after.last_compaction) == (None, 0, now)
    assert mem.last_compaction_note == "done"
    assert evaluate(st, 1, late + 1).ok


@pytest.mark.slow
def test_the_status_written_from_two_threads_at_once_stays_whole(tmp_path: Path) -> None:
    """Issue 13, item 12: the main loop and the heartbeat both write the status; with one
    temp name per process one thread renamed the other's half-written file and the other
    failed with ENOENT. Every write now succeeds and the file is always one whole JSON."""
    import threading

    from memsync.local.storage import atomic_replace

    target = tmp_path / "status.json"
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        try:
            for i in range(300):
                atomic_replace(target, json.dumps({"who": tag, "i": i, "pad": "x" * 4000}).encode())
        except BaseException as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("main", "heartbeat")]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if target.exists():
            json.loads(target.read_bytes())  # never a torn file
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads(target.read_bytes())["i"] == 299
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temp file left


def test_a_failed_status_write_names_the_path_and_leaves_no_temp_file(tmp_path: Path) -> None:
    from memsync.local.storage import atomic_replace

    target = tmp_path / "missing-dir" / "status.json"
    with pytest.raises(OSError, match=r"missing-dir/status\.json"):
        atomic_replace(target, b"{}")


def test_a_replica_back_after_the_horizon_is_said_loudly() -> None:
    """The daemon's warnings when a replica silent past the horizon publishes again: a
    retired one may bring deleted entries back; another one had its tombstones kept."""
    day = 86_400 * SECOND
    now = 1_000 * day
    before = {"old": now - 100 * day, "gone": now - 100 * day, "fresh": now - day, "new": None}
    after: dict[str, int | None] = {"old": now, "gone": now, "fresh": now, "new": now}
    said = returns("notes", "nas", before, after, now, 90 * day, {"gone"})
    assert said == [
        (
            "notes <-> nas: replica 'old' is back after 100 days (longer than the tombstone "
            "horizon); every tombstone it had not read was kept, so what it brings is merged "
            "against them"
        ),
        (
            "notes <-> nas: retired replica 'gone' is back after 100 days: tombstones it never "
            "read may be gone, so entries deleted meanwhile may come back from it; check "
            "`memsync show` (and `memsync forget-replica --undo gone`)"
        ),
    ]
    assert returns("notes", "nas", before, before, now, 90 * day, set()) == []
