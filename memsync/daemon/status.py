"""The daemon's status document: written atomically to the state directory by the daemon,
read by `memsync status`, which says plainly when something is wrong (the daemon is not
running, its status is stale, a remote has been failing for more than 10 minutes, or at
once when another machine uses our replica id; compaction postponed for too long).

Silent failure is the most common complaint about the sync tools people use today;
memsync's answer is this file and the exit status of `memsync status`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memsync.core.timestamps import SECOND, format_ts
from memsync.core.watermarks import came_back, standing
from memsync.daemon.bridge_status import BridgeStatus, bridge_problems
from memsync.errors import ReplicaClash
from memsync.local.fresh import now_us
from memsync.local.lock import is_locked
from memsync.local.statedir import StateDir
from memsync.local.storage import atomic_replace

if TYPE_CHECKING:
    from memsync.hub.sync import SyncReport

__all__ = [
    "FAILING_TOO_LONG",
    "STALE_AFTER",
    "DaemonStatus",
    "MemoryStatus",
    "RemoteStatus",
    "Verdict",
    "compaction_line",
    "daemon_running",
    "evaluate",
    "read_status",
    "returns",
    "starting_status",
    "status_line",
    "to_json",
    "write_pid",
    "write_status",
]

FAILING_TOO_LONG = 10 * 60 * SECOND
"""A remote failing for longer than this makes `memsync status` exit 1."""

STALE_AFTER = 3 * 60 * SECOND
"""A status older than this (the daemon rewrites it at least every 30 s) is stale."""

WITHHELD_PROBLEM_DAYS = 7
"""How long a withheld record (it looks like a credential) stays a problem in `status`."""
_WITHHELD_KEPT = 20  # the status file keeps the latest ones only


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RemoteStatus(_Model):
    """One memory's sync with one remote."""

    last_success: int | None = None
    """When a pass last succeeded (microseconds since the epoch)."""
    last_error: str | None = None
    """The error of the last failed pass, cleared when a pass succeeds."""
    failing_since: int | None = None
    """When the current run of failures began; None while the remote works."""
    error_kind: str | None = None
    """What kind of failure `last_error` is: "replica-clash" (another machine uses our
    replica id; pushes are stopped until the user acts, so `memsync status` counts it a
    problem at once), or None (a failure that may pass by itself: a problem only after
    `FAILING_TOO_LONG`). Absent from status files of earlier versions: read as None."""
    records_in: int = 0
    """Records pulled from the hub and merged into the local file, since the start."""
    records_out: int = 0
    """Records pushed to the hub, since the start."""
    held: list[dict[str, object]] = Field(default_factory=list)
    """Records held for being dated more than 24 h ahead of this clock."""
    replicas: dict[str, int | None] = Field(default_factory=dict)
    """The other replicas in the hub and when each last published its watermarks."""
    holding_back: list[str] = Field(default_factory=list)
    """Replicas that have not read everything yet: compaction keeps tombstones for them."""
    skipped: list[str] = Field(default_factory=list)
    """Peer files the last pass could not read, and why (a newer format): the rest syncs."""
    withheld: list[dict[str, object]] = Field(default_factory=list)
    """The latest records neither merged nor pushed because they look like they hold a
    credential (issue 13, item 6), each with `at`, when it was met; a problem for
    `WITHHELD_PROBLEM_DAYS` days."""
    write_mode: str | None = None
    """S3 hubs: "conditional" (If-None-Match PUTs) or "plain" (the store ignores them)."""
    convergence: str | None = None
    """After the last pass: which machines hold the same memory, in words (issue 21)."""
    in_sync: bool | None = None
    """Whether every machine that is neither silent nor retired agrees with this one."""

    def note_convergence(
        self, state_dir: StateDir, memory: str, remote: str, local: Path, replica: str, now: int
    ) -> None:
        """Judge convergence on the receipts the last pass read (no request to the hub)."""
        from memsync.hub.convergence import convergence
        from memsync.hub.state import retired

        verdict, _, _ = convergence(
            memory=memory,
            remote=remote,
            local=local,
            replica=replica,
            state_dir=state_dir,
            now=now,
            retired=retired(state_dir),
        )
        self.convergence, self.in_sync = verdict.summary(), verdict.in_sync

    def note_pass(self, report: SyncReport, now: int) -> None:
        """Take in a pass that succeeded at `now`."""
        self.last_success, self.last_error, self.failing_since = now, None, None
        self.error_kind = None
        self.records_in += report.pulled_records
        self.records_out += report.pushed_records
        self.held = list(report.held)
        self.replicas, self.holding_back = dict(report.replicas), list(report.holding_back)
        self.skipped = list(report.skipped)
        if report.withheld:
            self.withheld = [*self.withheld, *({**w, "at": now} for w in report.withheld)]
            del self.withheld[:-_WITHHELD_KEPT]

    def note_failure(self, error: str | None, now: int, kind: str | None = None) -> None:
        """Take in a pass that failed at `now` with `error`, of `kind` (see `error_kind`)."""
        self.last_error, self.error_kind = error, kind
        self.failing_since = self.failing_since or now


class MemoryStatus(_Model):
    """One local memory file."""

    path: str
    bad_lines: int = 0
    """Bad lines seen in the local file (each is logged once)."""
    last_compaction: int | None = None
    """When a compaction of the file last ran to the end."""
    last_compaction_note: str | None = None
    """How the last attempt went: "done", "done, forced ...", "postponed: <why>",
    "failed: <why>"."""
    postponed_since: int | None = None
    """When the current run of postponements began (the file was never quiet since);
    None once a compaction runs. Absent from earlier status files: read as None."""
    last_postponed: int | None = None
    """When compaction was last postponed (why: `last_compaction_note`)."""
    postponements: int = 0
    """Postponements since the last compaction that ran."""
    remotes: dict[str, RemoteStatus] = Field(default_factory=dict)

    def note_postponed(self, reason: str, now: int) -> None:
        """Take in a compaction postponed at `now` for `reason` (the file is not quiet)."""
        self.last_compaction_note = f"postponed: {reason}"
        self.postponed_since = self.postponed_since or now
        self.last_postponed = now
        self.postponements += 1

    def note_compacted(self, now: int, *, forced: bool) -> None:
        """Take in a compaction that ran at `now` (`forced`: without the quiet period)."""
        note = "done"
        if forced and self.postponed_since is not None:
            hours = (now - self.postponed_since) / SECOND / 3600
            note = (
                f"done, forced after {self.postponements} postponement(s) over {hours:.1f} h "
                "(the file was never quiet)"
            )
        self.last_compaction, self.last_compaction_note = now, note
        self.postponed_since, self.postponements = None, 0

    def carry_compaction(self, old: MemoryStatus) -> None:
        """Take the compaction record of `old`, the same memory in the status of a daemon
        that ran before (restarted or reloaded), when it is the same file."""
        if old.path == self.path:
            self.last_compaction, self.last_compaction_note = (
                old.last_compaction,
                old.last_compaction_note,
            )
            self.postponed_since, self.last_postponed = old.postponed_since, old.last_postponed
            self.postponements = old.postponements

    def overdue(self, now: int, bound_seconds: float) -> bool:
        """Whether compaction has been postponed for `bound_seconds` or more: time to
        compact without waiting for the quiet period (`max_postpone_seconds`)."""
        since = self.postponed_since
        return since is not None and now - since >= bound_seconds * SECOND


class DaemonStatus(_Model):
    """The whole document."""

    horizon_days: float = 90
    """The tombstone horizon: a replica silent for longer holds tombstones back for good."""
    max_postpone_seconds: float = 86_400
    """The config's bound on postponing compaction; past it (and `FAILING_TOO_LONG` for
    the forced attempt to run), `memsync status` counts a postponed compaction a problem."""
    retired: list[str] = Field(default_factory=list)
    pid: int
    replica: str
    started_at: int
    updated_at: int
    config: str
    memories: dict[str, MemoryStatus] = Field(default_factory=dict)
    bridges: dict[str, BridgeStatus] = Field(default_factory=dict)
    """By bridged path (a file, or a project of Claude's auto memory)."""

    def note_bridges(self, done: Mapping[str, tuple[str | None, list[str]]], now: int) -> None:
        """Record the bridges' syncs (`daemon._bridges.Bridges.sync`: by bridged path, why
        each was refused, None if it was not, and its notes)."""
        for path, (refused, notes) in done.items():
            if (bridge := self.bridges.get(path)) is not None:
                bridge.last_sync, bridge.refused, bridge.notes = now, refused, notes


def starting_status(
    *,
    pid: int,
    replica: str,
    config: str,
    horizon_days: float,
    max_postpone_seconds: float,
    retired: list[str],
    memories: Mapping[str, tuple[Path, Sequence[str]]],
    before: DaemonStatus | None,
    bridges: Mapping[str, tuple[str, str]] | None = None,
) -> DaemonStatus:
    """The status of a daemon (re)starting: each memory (its path, its remotes' names),
    with compaction's record carried over from `before`, the last status: else a daemon
    restarted more often than `max_postpone_seconds` would never force a compaction."""
    now = now_us()
    status = DaemonStatus(
        pid=pid,
        replica=replica,
        started_at=now,
        updated_at=now,
        config=config,
        horizon_days=horizon_days,
        max_postpone_seconds=max_postpone_seconds,
        retired=retired,
    )
    for name, (path, remotes) in memories.items():
        ms = status.memories[name] = MemoryStatus(path=str(path))
        if before is not None and (old := before.memories.get(name)) is not None:
            ms.carry_compaction(old)
        ms.remotes.update((remote, RemoteStatus()) for remote in remotes)
    for bridged, (memory, fmt) in (bridges or {}).items():
        status.bridges[bridged] = BridgeStatus(memory=memory, format=fmt)
    return status


def status_line(status: DaemonStatus) -> str:
    """The daemon's one-line status (systemd's STATUS=): `in sync with N machines` per
    memory, or what is not (issue 21)."""
    parts = []
    for mname, mem in status.memories.items():
        for rname, r in mem.remotes.items():
            if r.last_error is not None:
                parts.append(f"{mname} <-> {rname}: failing")
            elif r.convergence is not None:
                parts.append(f"{mname} <-> {rname}: {r.convergence}")
    return "; ".join(parts) or "watching " + ", ".join(status.memories)


def write_status(state_dir: StateDir, status: DaemonStatus) -> None:
    """Write the status atomically (a reader sees the old or the new document)."""
    atomic_replace(state_dir.daemon_status, status.model_dump_json(indent=1).encode())


def read_status(state_dir: StateDir) -> DaemonStatus | None:
    """The last status written, or None when there is none (or it cannot be read)."""
    try:
        return DaemonStatus.model_validate_json(state_dir.daemon_status.read_bytes())
    except (FileNotFoundError, ValidationError, ValueError):
        return None


def daemon_running(state_dir: StateDir) -> int | None:
    """The pid of the daemon holding the state directory's PID lock, or None."""
    lock_file = state_dir.daemon_lock
    if not lock_file.exists():
        return None
    if is_locked(lock_file):
        try:
            return int(state_dir.daemon_pid.read_text().strip())
        except (OSError, ValueError):
            return -1
    return None


@dataclass(frozen=True)
class Verdict:
    """What `memsync status` concludes: the problems, each a sentence."""

    running: bool
    stale: bool
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def evaluate(status: DaemonStatus | None, running_pid: int | None, now: int) -> Verdict:
    """Judge a status document at `now`: not running, stale, or remotes failing too long."""
    problems: list[str] = []
    if running_pid is None:
        problems.append("the daemon is not running (start it: memsync daemon)")
    stale = status is not None and now - status.updated_at > STALE_AFTER
    if status is None:
        problems.append("no status has been written yet")
    elif stale and running_pid is not None:
        minutes = (now - status.updated_at) / SECOND / 60
        problems.append(f"the status is stale: last written {minutes:.0f} min ago")
    if status is not None:
        for mname, mem in status.memories.items():
            problems += _compaction_problems(status, mname, mem, now)
            for rname, remote in mem.remotes.items():
                since = remote.failing_since
                if since is not None and remote.error_kind == ReplicaClash.KIND:
                    # Stopped for good until the user acts: waiting would only hide it.
                    problems.append(
                        f"{mname} <-> {rname}: replica id clash, stopped until fixed: "
                        f"{remote.last_error}"
                    )
                elif since is not None and now - since > FAILING_TOO_LONG:
                    minutes = (now - since) / SECOND / 60
                    problems.append(
                        f"{mname} <-> {rname}: failing for {minutes:.0f} min: {remote.last_error}"
                    )
                problems += _replica_problems(status, mname, rname, remote, now)
                problems += _withheld_problems(mname, rname, remote, now)
        problems += bridge_problems(status.bridges)
    return Verdict(running_pid is not None, stale, problems)


def _withheld_problems(mname: str, rname: str, remote: RemoteStatus, now: int) -> list[str]:
    """Records withheld lately for looking like credentials: a person must look at them."""
    recent = [
        w
        for w in remote.withheld
        if now - int(str(w.get("at", 0))) < WITHHELD_PROBLEM_DAYS * 86_400 * SECOND
    ]
    if not recent:
        return []
    last = recent[-1]
    looks = last.get("looks_like")
    kinds = ", ".join(str(k) for k in looks) if isinstance(looks, list) else "a credential"
    where = f"{last.get('file')}:{last.get('line')}, id {last.get('id')} ({kinds})"
    problem = (
        f"{mname} <-> {rname}: {len(recent)} record(s) withheld, neither merged nor pushed, "
        f"because they look like credentials; the latest: {where}. Remove the secret where "
        "it was written: `memsync forget <id>` on that machine"
    )
    return [problem]


def _compaction_problems(
    status: DaemonStatus, mname: str, mem: MemoryStatus, now: int
) -> list[str]:
    """A compaction postponed for longer than the bound: the forced one (not waiting for
    the quiet period) should have run by then, so something else keeps it off (a process
    holding the file open for writing, another memsync process holding its lock)."""
    since = mem.postponed_since
    bound = status.max_postpone_seconds * SECOND
    if since is None or now - since <= bound + FAILING_TOO_LONG:
        return []
    hours = (now - since) / SECOND / 3600
    problem = (
        f"{mname}: compaction postponed {mem.postponements} time(s) over {hours:.1f} h "
        f"(max_postpone_seconds = {status.max_postpone_seconds:g}), the file grows: "
        f"{_why(mem)}"
    )
    return [problem]


def _why(mem: MemoryStatus) -> str:
    """Why the last attempt at compaction did not run."""
    return (mem.last_compaction_note or "").removeprefix("postponed: ")


def compaction_line(mname: str, mem: MemoryStatus, now: int) -> str | None:
    """What `memsync status` says of a memory's compaction, or None before the first."""
    if mem.last_compaction is None and mem.last_compaction_note is None:
        return None
    last = "never" if mem.last_compaction is None else format_ts(mem.last_compaction)
    line = f"compaction of {mname}: last run {last}"
    if mem.postponed_since is not None:
        minutes = (now - mem.postponed_since) / SECOND / 60
        line += f"; postponed {mem.postponements} time(s) over {minutes:.0f} min: {_why(mem)}"
    elif mem.last_compaction_note is not None:
        line += f" ({mem.last_compaction_note})"
    return line


def _replica_problems(
    status: DaemonStatus, mname: str, rname: str, remote: RemoteStatus, now: int
) -> list[str]:
    """Replicas silent for longer than the horizon, and retired ones that came back."""
    horizon = status.horizon_days * 86_400 * SECOND
    out = []
    for replica, seen in sorted(remote.replicas.items()):
        verdict = standing(seen, now=now, horizon=horizon, retired=replica in status.retired)
        if verdict == "back":
            out.append(
                f"{mname} <-> {rname}: retired replica {replica!r} is back (watermarks "
                "updated recently): tombstones it never read may have been compacted "
                "away, so entries deleted long ago may come back from it; check "
                "`memsync show`, and run `memsync forget-replica --undo` if it is in use"
            )
        elif verdict == "silent":
            days = "never" if seen is None else f"{(now - seen) / SECOND / 86_400:.0f} days ago"
            out.append(
                f"{mname} <-> {rname}: replica {replica!r} silent (watermarks {days}; horizon "
                f"{status.horizon_days:g} days): compaction keeps every tombstone it has not "
                f"read; if it is retired, run `memsync forget-replica {replica}`"
            )
    return out


def to_json(status: DaemonStatus | None, verdict: Verdict) -> str:
    """The `memsync status --json` document."""
    doc = {
        "running": verdict.running,
        "stale": verdict.stale,
        "ok": verdict.ok,
        "problems": verdict.problems,
        "status": None if status is None else json.loads(status.model_dump_json()),
    }
    return json.dumps(doc, indent=2)


def write_pid(state_dir: StateDir) -> None:
    atomic_replace(state_dir.daemon_pid, f"{os.getpid()}\n".encode())


def returns(
    memory: str,
    remote: str,
    before: dict[str, int | None],
    after: dict[str, int | None],
    now: int,
    horizon: float,
    retired: set[str],
) -> list[str]:
    """What to say loudly when a replica that had been silent for longer than the tombstone
    horizon publishes again (rule 15): its watermarks were updated at `before[name]` and are
    now at `after[name]`. Tombstones it never read are still here unless it was retired, in
    which case entries deleted long ago may come back from it."""
    out = []
    for name, seen in after.items():
        last = before.get(name)
        if last is None or not came_back(last, seen, now=now, horizon=horizon):
            continue
        days = (now - last) / SECOND / 86_400
        if name in retired:
            out.append(
                f"{memory} <-> {remote}: retired replica {name!r} is back after {days:.0f} "
                "days: tombstones it never read may be gone, so entries deleted meanwhile may "
                "come back from it; check `memsync show` (and `memsync forget-replica --undo "
                f"{name}`)"
            )
        else:
            out.append(
                f"{memory} <-> {remote}: replica {name!r} is back after {days:.0f} days "
                "(longer than the tombstone horizon); every tombstone it had not read was "
                "kept, so what it brings is merged against them"
            )
    return out
