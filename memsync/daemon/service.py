"""The daemon: keeps memory files in sync as agents write them. Thin wiring only.

watchfiles watches the folders (never the files: an atomic replace ends a file watch) of
the local memory files and of folder remotes; APScheduler (3.x) polls SSH remotes with
jitter, polls folder hubs too (inotify never sees other machines' writes on NFS or SMB),
runs a periodic reconciliation pass, the compaction schedule and the status heartbeat.
Reactions are idempotent: memsync's own writes wake the watcher, cost one cheap pass that
finds nothing new, and stop there.

Every reaction is a request carried out by a worker thread: one per remote (its polls and
passes, one at a time, so no two passes of a memory and a remote ever overlap), one for
compaction; the main loop itself only validates local files and reloads. A remote that
hangs (issue 13, item 15: an SSH server behind a dead VPN answers nothing, for as long as
the transport's timeout) holds up its own worker only: the other remotes go on syncing.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from memsync.config import Config, RemoteConfig, cron_trigger, load_config
from memsync.config.wiring import codec_for, open_remote, state_of
from memsync.core.timestamps import SECOND
from memsync.daemon import _systemd
from memsync.daemon._bridges import BRIDGES, Bridges
from memsync.daemon._selfwatch import CHECK_SECONDS, EXIT_STUCK, SelfWatchdog, longest_busy
from memsync.daemon._watch import same_path, watch_jsonl
from memsync.daemon._worker import Worker
from memsync.daemon.status import (
    DaemonStatus,
    MemoryStatus,
    RemoteStatus,
    read_status,
    returns,
    status_line,
    write_pid,
    write_status,
)
from memsync.errors import DaemonAlreadyRunning, MemsyncError, NotQuiet
from memsync.hub.codec import PlainCodec
from memsync.hub.compaction import compact_memory
from memsync.hub.state import resolve_replica, retired
from memsync.hub.sync import SyncReport, sync_once
from memsync.hub.transports import Transport
from memsync.local.fresh import now_us
from memsync.local.lock import held
from memsync.local.memory import Memory
from memsync.local.platforms import refuse_native_windows
from memsync.local.reading import BadLineWatch
from memsync.local.statedir import StateDir
from memsync.local.storage import private_dirs

__all__ = ["Daemon"]

logger = logging.getLogger(__name__)

BACKOFF_CAP = 300.0
"""The longest wait between two attempts at a failing remote, in seconds."""

HEARTBEAT_SECONDS = 30.0
"""How often the status is rewritten even when nothing happens."""

WATCHER_READY_SECONDS = 10.0
"""How long the start waits for the file watcher to watch before the first pass."""

WORKER_STUCK_SECONDS = 600.0
"""The systemd watchdog is no longer fed once one piece of work (a pass, a compaction, a
turn of the main loop) has lasted this long: the daemon is stuck, let systemd restart it.
A remote's every wait is bounded far below (`SSHTransport`: 10 s to connect, 30 s per
answer), so a hung remote never trips it."""

_COMPACT = "\0compact"  # the request to compact a memory, instead of a remote's name
_POLL = "\0poll"  # a worker's request to look at its hub, instead of a memory's name


@dataclass
class _Backoff:
    failures: int = 0
    next_try: float = 0.0
    last_error: str | None = None  # logged again only when the cause changes


@dataclass
class _Requests:
    """The main loop's queue: (memory, "") pairs, a validation of the local file each; a
    set, so a burst of events is one validation. (Passes go to the remotes' workers.)"""

    pending: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, memory: str, remote: str) -> None:
        with self.lock:
            self.pending.add((memory, remote))

    def take(self) -> set[tuple[str, str]]:
        with self.lock:
            taken, self.pending = self.pending, set()
            return taken


class Daemon:
    """`memsync daemon`: `run()` blocks until SIGTERM or SIGINT, then returns 0 (or
    `EXIT_STUCK` when its self-watchdog stopped it, see `memsync.daemon._selfwatch`).

    Args:
        config: the configuration to run.
        config_path: where it was read from (SIGHUP reads it again), or None for the
            embedded default.
    """

    def __init__(self, config: Config, config_path: Path | None) -> None:
        self.config = config
        self.config_path = config_path
        self.state = state_of(config)  # fixed for the daemon's life (a reload keeps it)
        self.replica = ""
        self._stopping = False
        self._exit_code = 0
        self._reload = False
        self._wake = threading.Event()
        self._requests = _Requests()
        self._transports: dict[str, Transport] = {}
        self._backoff: dict[tuple[str, str], _Backoff] = {}
        self._validation: dict[str, BadLineWatch] = {}
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._scheduler: Any = None
        self._status: DaemonStatus | None = None
        self._busy_since: float | None = None
        self._hub_signature: dict[str, tuple[tuple[str, int], ...]] = {}
        self._workers: dict[str, Worker] = {}
        self._bridges = Bridges(config, "")  # issue 22; made again by `_start`
        # Guards what the workers share: the status, the back-off records, the validation
        # watches, the hub signatures (held for bookkeeping only, never during a pass).
        self._state_lock = threading.RLock()

    # The straight line

    def run(self, announce: Sequence[str] = ()) -> int:
        """Run until SIGTERM or SIGINT (then return 0), or until the self-watchdog finds
        it stuck (then `EXIT_STUCK`). `announce`: lines logged once the PID lock is held
        (what it watches), so that a second daemon refused the lock says only why.

        Raises MemsyncError on native Windows, before anything is touched (issue 23)."""
        refuse_native_windows()
        private_dirs(self.state.root)
        with self._pid_lock(self.state):
            for line in announce:
                logger.info("%s", line)
            self._install_signals()
            self._start()
            _systemd.notify("READY=1")
            _systemd.notify("STATUS=watching " + ", ".join(m.name for m in self.config.memory))
            try:
                self._loop()
            finally:
                _systemd.notify("STOPPING=1")
                logger.info("stopping")
                self._stop_all()
                with self._state_lock:
                    self._write_status()
        return self._exit_code

    @contextmanager
    def _pid_lock(self, state_dir: StateDir) -> Iterator[None]:
        with held(state_dir.daemon_lock, 0, lambda: DaemonAlreadyRunning(str(state_dir))):
            write_pid(state_dir)
            yield

    def _install_signals(self) -> None:
        # Handlers only set flags: the main loop does the work (never inside a handler).
        def stop(signum: int, frame: FrameType | None) -> None:
            self._stopping = True

        def reload(signum: int, frame: FrameType | None) -> None:
            self._reload = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, reload)

    def _start(self) -> None:
        cfg = self.config
        self.replica = resolve_replica(cfg.replica, self.state)
        self._bridges = Bridges(cfg, self.replica)
        # Compaction's record outlives a reload or restart: else a daemon restarted more
        # often than max_postpone_seconds would never force a compaction.
        before = self._status or read_status(self.state)
        self._status = DaemonStatus(
            pid=_pid(),
            replica=self.replica,
            started_at=now_us(),
            updated_at=now_us(),
            config=str(self.config_path) if self.config_path else "(embedded default)",
            horizon_days=cfg.compaction.tombstone_horizon_days,
            max_postpone_seconds=cfg.compaction.max_postpone_seconds,
            retired=sorted(retired(self.state)),
        )
        for mem in cfg.memory:
            Memory.open(mem.path)  # created 0600 with a header when missing
            ms = self._status.memories[mem.name] = MemoryStatus(path=str(mem.path))
            if before is not None and (old := before.memories.get(mem.name)) is not None:
                ms.carry_compaction(old)
            for rc in cfg.memory_remotes(mem):
                self._status.memories[mem.name].remotes[rc.name] = RemoteStatus()
            self._validate(mem.name)
        self._transports = {rc.name: open_remote(rc) for rc in cfg.remote}
        self._workers = {
            name: Worker(name, self._carry_out)
            for name in [*self._transports, _COMPACT, *([BRIDGES] if cfg.bridge else [])]
        }
        for worker in self._workers.values():
            worker.start()
        # Watching first, then the first pass (issue 24, item 18): a peer's push that lands
        # while the first pass runs wakes a second one, instead of waiting for a poll.
        self._start_watcher()
        for mem in cfg.memory:
            for rc in cfg.memory_remotes(mem):
                self.request(mem.name, rc.name)  # a first pass at start-up
        for name in self._bridges.memories():
            self.request(name, BRIDGES)
        self._start_scheduler()
        with self._state_lock:
            self._write_status()

    def _loop(self) -> None:
        while not self._stopping:
            if self._reload:
                self._reload = False
                self._do_reload()
            self._wake.wait(0.2)
            self._wake.clear()
            self._busy_since = time.monotonic()
            try:
                for memory, _ in sorted(self._requests.take()):
                    if self._stopping:
                        break
                    with self._state_lock:
                        self._validate(memory)
                        self._write_status()
            finally:
                self._busy_since = None

    def _stop_all(self) -> None:
        self._watch_stop.set()
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
        if self._watcher is not None:
            self._watcher.join(timeout=3)
            self._watcher = None
        workers, self._workers = self._workers, {}
        for worker in workers.values():
            worker.stop()
        # A write in progress is finished (SIGTERM); one waiting on a remote that does not
        # answer is not waited for beyond this (the workers are daemon threads).
        deadline = time.monotonic() + 2.0
        for worker in workers.values():
            worker.join(max(0.0, deadline - time.monotonic()))
        for name, t in self._transports.items():
            if workers[name].join(0):
                t.close()  # else still in a call: closing would wait for it
        self._transports = {}

    # Reacting

    def request(self, memory: str, remote: str) -> None:
        """Ask for a pass of `memory` with `remote`, a compaction (`_COMPACT`), or a validation
        of the local file (`""`). Thread-safe; carried out by the remote's worker, the
        compaction worker, or the main loop."""
        if remote == "":
            self._requests.add(memory, remote)
            self._wake.set()
        elif (worker := self._workers.get(remote)) is not None:
            worker.add(memory)

    def _carry_out(self, memory: str, remote: str, stopped: threading.Event) -> None:
        """One request, in `remote`'s worker (`remote` is `_COMPACT` in compaction's)."""
        try:
            if memory == _POLL:
                self._poll_now(remote, stopped)
            elif remote == _COMPACT:
                self._compact(memory)
            elif remote == BRIDGES:
                self._bridges.sync(memory)
            else:
                self._sync(memory, remote, stopped)
        except Exception:  # a bug must not stop the daemon; it is logged with its traceback
            logger.exception("unexpected error in %s %s", memory, remote)

    def _sync(self, memory: str, remote: str, stopped: threading.Event) -> None:
        with self._state_lock:
            backoff = self._backoff.setdefault((memory, remote), _Backoff())
        if time.monotonic() < backoff.next_try:
            # Not yet: ask again at the worker's next turn. Nothing was done, so the status
            # is not rewritten (this comes round 5 times a second while a remote backs off).
            if (worker := self._workers.get(remote)) is not None:
                worker.add(memory, wake=False)
            return
        mem = self.config.memory_named(memory)
        transport = self._transports.get(remote)
        if mem is None or transport is None:
            return
        report = sync_once(
            memory=memory,
            local=mem.path,
            remote=remote,
            transport=transport,
            replica=self.replica,
            state_dir=self.state,
            codec=self._codec(memory, remote),  # issue 12
        )
        if stopped.is_set():
            # Stopping or reloading: the status and back-off are no longer ours, and the
            # transport, left open by `_stop_all` while this pass ran, is closed here.
            transport.close()
            return
        with self._state_lock:
            self._after_pass(memory, remote, report, transport, backoff)
            self._write_status()

    def _after_pass(
        self,
        memory: str,
        remote: str,
        report: SyncReport,
        transport: Transport,
        backoff: _Backoff,
    ) -> None:
        """The bookkeeping of a pass: validation, status, log lines, back-off (under
        `_state_lock`)."""
        self._validate(memory)
        assert self._status is not None
        st = self._status.memories[memory].remotes.setdefault(remote, RemoteStatus())
        now = now_us()
        if report.ok:
            if backoff.failures:
                logger.info(
                    "%s <-> %s: working again after %d failed attempt(s)",
                    memory,
                    remote,
                    backoff.failures,
                )
            backoff.failures, backoff.next_try, backoff.last_error = 0, 0.0, None
            self._note_returns(memory, remote, st.replicas, report.replicas, now)
            st.note_pass(report, now)
            mem = self.config.memory_named(memory)
            if mem is not None:  # issue 21: who holds the same memory, for status and systemd
                st.note_convergence(self.state, memory, remote, mem.path, self.replica, now)
                _systemd.notify("STATUS=" + status_line(self._status))
            for w in report.withheld:  # issue 13, item 6: a person must look at these
                logger.warning(
                    "%s <-> %s: withheld %s:%s, id %s: it looks like a credential (%s); "
                    "neither merged nor pushed",
                    memory,
                    remote,
                    w["file"],
                    w["line"],
                    w["id"],
                    ", ".join(w["looks_like"]),
                )
            st.write_mode = getattr(transport, "mode", None) or st.write_mode  # S3 only
            if report.pulled_records or report.pushed_records:
                logger.info(
                    "%s <-> %s: %d in, %d out",
                    memory,
                    remote,
                    report.pulled_records,
                    report.pushed_records,
                )
        else:
            if backoff.failures == 0:  # logged when it starts failing, not at every attempt
                logger.warning(
                    "%s <-> %s: failing: %s (retrying with back-off)", memory, remote, report.error
                )
            elif report.error != backoff.last_error:  # and again when the cause changes
                logger.warning("%s <-> %s: still failing, now: %s", memory, remote, report.error)
            backoff.last_error = report.error
            backoff.failures += 1
            delay = min(BACKOFF_CAP, 2.0 ** min(backoff.failures, 12)) * random.uniform(0.8, 1.2)  # noqa: S311 (jitter)
            backoff.next_try = time.monotonic() + delay
            st.note_failure(report.error, now, report.error_kind)
            self.request(memory, remote)

    def _note_returns(
        self,
        memory: str,
        remote: str,
        before: dict[str, int | None],
        after: dict[str, int | None],
        now: int,
    ) -> None:
        """Say loudly when a replica silent for longer than the horizon publishes again."""
        horizon = self.config.compaction.tombstone_horizon_days * 86_400 * SECOND
        gone = retired(self.state)
        for message in returns(memory, remote, before, after, now, horizon, gone):
            logger.warning("%s", message)

    def _validate(self, memory: str) -> None:
        """Log each new bad line of a local file once (incremental: only new bytes)."""
        mem = self.config.memory_named(memory)
        if mem is None or not mem.path.exists():
            return
        watch = self._validation.setdefault(memory, BadLineWatch(mem.path))
        try:
            for bad in watch.new_bad_lines():
                logger.warning("%s:%d: bad line: %s", bad.file, bad.line, bad.reason)
        except MemsyncError as exc:
            logger.error("%s", exc)
        if self._status is not None:
            self._status.memories[memory].bad_lines = watch.bad

    def _compact(self, memory: str) -> None:
        mem = self.config.memory_named(memory)
        if mem is None:
            return
        cc = self.config.compaction
        remotes = [rc.name for rc in self.config.memory_remotes(mem)]
        # Agents writing continuously keep the file from ever being quiet: past the bound,
        # compact without the quiet period (the drain of rule 16 keeps their lines).
        with self._state_lock:
            assert self._status is not None
            ms = self._status.memories[memory]
            forced = ms.overdue(now_us(), cc.max_postpone_seconds)
            postponements = ms.postponements
        if forced:
            logger.warning(
                "%s: compaction postponed %d time(s) (max_postpone_seconds = %g): compacting "
                "anyway under the lock; lines appended meanwhile are copied into the new file",
                mem.path,
                postponements,
                cc.max_postpone_seconds,
            )
        try:
            done = compact_memory(
                mem.path,
                memory=memory,
                remotes=remotes,
                replica=self.replica,
                state_dir=self.state,
                transports=self._transports,
                codecs={name: self._codec(memory, name) for name in remotes},
                horizon_days=cc.tombstone_horizon_days,
                quiet_seconds=cc.quiet_seconds,
                force=forced,
            )
        except NotQuiet as exc:
            logger.info("%s: compaction postponed: %s", mem.path, exc)
            why = str(exc)
            self._note_compaction(memory, lambda ms: ms.note_postponed(why, now_us()))
            self._retry_compaction(memory)
            return
        except (MemsyncError, OSError) as exc:
            logger.error("%s: compaction failed: %s", mem.path, exc)
            note = f"failed: {exc}"
            self._note_compaction(memory, lambda ms: setattr(ms, "last_compaction_note", note))
            return
        self._note_compaction(memory, lambda ms: ms.note_compacted(now_us(), forced=forced))
        result = done.local
        logger.info(
            "%s: compacted, %d -> %d bytes", mem.path, result.size_before, result.size_after
        )
        for name in remotes:  # our own file in each hub, compacted the same way
            if (failure := done.hub_errors.get(name)) is not None:
                logger.warning("%s <-> %s: hub file not compacted: %s", memory, name, failure)
            elif (sizes := done.hub_files.get(name)) is not None:
                logger.info("%s <-> %s: hub file compacted, %d -> %d bytes", memory, name, *sizes)
        for rc in self.config.memory_remotes(mem):
            self.request(memory, rc.name)

    def _note_compaction(self, memory: str, update: Callable[[MemoryStatus], None]) -> None:
        """Apply `update` to the memory's status and write it (under `_state_lock`: the
        compaction worker is not the only writer)."""
        with self._state_lock:
            assert self._status is not None
            update(self._status.memories[memory])
            self._write_status()

    def _codec(self, memory: str, remote: str) -> PlainCodec:
        """The remote's hub codec (issue 12), its key file read again at each pass, so that
        a `memsync key import` or `rotate` needs no restart."""
        rc = next((r for r in self.config.remote if r.name == remote), None)
        return PlainCodec(remote, memory) if rc is None else codec_for(rc, self.config, memory)

    def _retry_compaction(self, memory: str) -> None:
        if self._scheduler is None:
            return
        cc = self.config.compaction
        wait = cc.quiet_seconds
        assert self._status is not None
        since = self._status.memories[memory].postponed_since
        left = None if since is None else (since - now_us()) / SECOND + cc.max_postpone_seconds
        if left is not None and left > 0:  # the forced attempt at the bound, not a wait later
            wait = min(wait, left)
        delay = timedelta(seconds=max(5.0, wait))
        when = datetime.now().astimezone() + delay
        self._scheduler.add_job(
            self.request,
            "date",
            run_date=when,
            args=[memory, _COMPACT],
            id=f"retry-{memory}",
            replace_existing=True,
        )

    # Watching and scheduling

    def _watch_paths(self) -> list[Path]:
        paths = {m.path.parent for m in self.config.memory}
        for rc in self.config.remote:
            url = rc.parsed_url
            if url.scheme == "file" and Path(url.path).is_dir():
                for mem in self.config.memory:
                    if rc in self.config.memory_remotes(mem):
                        folder = Path(url.path) / mem.name
                        folder.mkdir(mode=0o700, exist_ok=True)
                        paths.add(folder)
        return sorted(paths | self._bridges.folders())

    def _start_watcher(self) -> None:
        """Start the watcher thread and return once it watches (or has failed to start,
        or WATCHER_READY_SECONDS passed: polling covers what it would miss)."""
        paths = self._watch_paths()
        self._watch_stop = threading.Event()
        ready = threading.Event()
        self._watcher = threading.Thread(
            target=self._watch,
            args=(paths, self._watch_stop, ready),
            name="memsync-watch",
            daemon=True,
        )
        self._watcher.start()
        if not ready.wait(WATCHER_READY_SECONDS):
            logger.warning(
                "file watching not ready after %g s; starting the first pass anyway",
                WATCHER_READY_SECONDS,
            )

    def _watch(self, paths: list[Path], stop: threading.Event, ready: threading.Event) -> None:
        watch_jsonl(
            paths,
            stop,
            self.config.daemon.debounce_ms,
            self._on_changes,
            ready,
            also=self._bridges.wanted,
        )

    def _on_changes(self, changed: set[Path]) -> None:
        for name in self._bridges.memories_of(changed):
            self.request(name, BRIDGES)
        for mem in self.config.memory:
            remotes = [rc.name for rc in self.config.memory_remotes(mem)]
            # Matched by canonical path or inode, not by equality (issue 23, item 3).
            if any(same_path(p, mem.path) for p in changed):
                self.request(mem.name, "")
                for name in remotes:
                    self.request(mem.name, name)
            for rc in self.config.memory_remotes(mem):
                url = rc.parsed_url
                if url.scheme == "file" and any(
                    same_path(p.parent, Path(url.path) / mem.name) for p in changed
                ):
                    self.request(mem.name, rc.name)

    def _start_scheduler(self) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler

        cfg = self.config
        sched = BackgroundScheduler(
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 60}
        )
        for rc in cfg.remote:
            sched.add_job(
                self._poll,
                "interval",
                args=[rc],
                seconds=rc.poll_seconds,
                jitter=max(1.0, rc.poll_seconds / 10),
                id=f"poll-{rc.name}",
            )
        sched.add_job(
            self._reconcile, "interval", seconds=cfg.daemon.reconcile_seconds, id="reconcile"
        )
        sched.add_job(self._heartbeat, "interval", seconds=HEARTBEAT_SECONDS, id="heartbeat")
        trigger = cron_trigger(cfg.compaction.schedule, timezone=None)  # local time
        sched.add_job(self._schedule_compaction, trigger, id="compaction")
        interval = _systemd.watchdog_interval()
        if interval is not None:
            sched.add_job(self._watchdog, "interval", seconds=interval, id="watchdog")
        else:  # launchd, or by hand: no one else would notice a stuck daemon (issue 23)
            dog = SelfWatchdog(self._busy_times, self._stop_stuck, limit=WORKER_STUCK_SECONDS)
            sched.add_job(dog.check, "interval", seconds=CHECK_SECONDS, id="self-watchdog")
        sched.start()
        self._scheduler = sched

    def _poll(self, rc: RemoteConfig) -> None:
        """The scheduler's poll job: handed to the remote's worker, so that a scheduler
        thread never waits on a remote."""
        if (worker := self._workers.get(rc.name)) is not None:
            worker.add(_POLL)

    def _poll_now(self, remote: str, stopped: threading.Event) -> None:
        """A cheap look at a hub: the listing of each memory folder; a pass on change."""
        transport = self._transports.get(remote)
        rc = next((r for r in self.config.remote if r.name == remote), None)
        if transport is None or rc is None:
            return
        for mem in self.config.memory:
            if rc not in self.config.memory_remotes(mem):
                continue
            with self._state_lock:
                backoff = self._backoff.get((mem.name, remote))
            if backoff is not None and backoff.failures:
                continue  # failing: the pass comes back on its own after the back-off
            key = f"{remote}/{mem.name}"
            try:
                listing = tuple(sorted((f.name, f.size) for f in transport.list_files(mem.name)))
            except MemsyncError:
                self.request(mem.name, remote)  # the pass reports the error and backs off
                continue
            with self._state_lock:
                changed = listing != self._hub_signature.get(key)
                self._hub_signature[key] = listing
            if changed:
                self.request(mem.name, remote)
        if stopped.is_set():
            transport.close()  # as in `_sync`: `_stop_all` left it open while this ran

    def _reconcile(self) -> None:
        for name in self._bridges.memories():
            self.request(name, BRIDGES)
        for mem in self.config.memory:
            self.request(mem.name, "")
            for rc in self.config.memory_remotes(mem):
                self.request(mem.name, rc.name)

    def _schedule_compaction(self) -> None:
        for mem in self.config.memory:
            self.request(mem.name, _COMPACT)

    def _heartbeat(self) -> None:
        self._wake.set()
        with self._state_lock:
            self._write_status()

    def _watchdog(self) -> None:
        # Ping only while the main loop and every worker are alive: idle, or on one piece
        # of work for less than WORKER_STUCK_SECONDS. A remote that hangs is bounded by its
        # timeouts, far below: it does not stop the pings, a thread stuck for good does.
        if longest_busy(self._busy_times(), time.monotonic()) < WORKER_STUCK_SECONDS:
            _systemd.notify("WATCHDOG=1")

    def _busy_times(self) -> list[float | None]:
        """When the main loop's turn and each worker's request in progress began."""
        return [self._busy_since, *(w.busy_since for w in list(self._workers.values()))]

    def _stop_stuck(self) -> None:
        self._exit_code = EXIT_STUCK
        self._stopping = True
        self._wake.set()

    def _write_status(self) -> None:
        if self._status is None:
            return
        self._status.updated_at = now_us()
        try:
            write_status(self.state, self._status)
        except OSError as exc:
            logger.error("cannot write the status: %s", exc)

    # Reloading

    def _do_reload(self) -> None:
        if self.config_path is None:
            logger.info("SIGHUP: running on the embedded default; nothing to reload")
            return
        try:
            new = load_config(self.config_path)
        except MemsyncError as exc:
            logger.error("SIGHUP: keeping the running config: %s", exc)
            return
        if new.state_dir != self.config.state_dir:
            logger.error(
                "SIGHUP: keeping the running config: state_dir cannot change "
                "while the daemon runs (restart it)"
            )
            return
        logger.info("SIGHUP: config reloaded from %s", self.config_path)
        self._stop_all()
        self.config = new
        with self._state_lock:
            self._backoff.clear()
        self._start()


def _pid() -> int:
    return os.getpid()
