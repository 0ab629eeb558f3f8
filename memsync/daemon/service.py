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

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from memsync.config import Config, RemoteConfig
from memsync.config.wiring import codec_for, open_remote, state_of
from memsync.core.timestamps import SECOND
from memsync.daemon import _systemd
from memsync.daemon._bridges import BRIDGES, Bridges
from memsync.daemon._selfwatch import CHECK_SECONDS, EXIT_STUCK
from memsync.daemon._watch import watch_jsonl
from memsync.daemon._worker import Requests, Worker, stop_workers
from memsync.daemon.status import (
    DaemonStatus,
    RemoteStatus,
    read_status,
    starting_status,
    status_line,
    write_pid,
    write_status,
)
from memsync.daemon.triggers import (
    WORKER_STUCK_SECONDS,
    compaction_retry_seconds,
    poll_hub,
    reloaded_config,
    requests_for,
    run_once,
    start_scheduler,
    start_watcher,
    watch_paths,
    watchdog_job,
)
from memsync.daemon.work import Backoff, compact, record_pass, validate
from memsync.errors import DaemonAlreadyRunning
from memsync.hub.codec import Codec, PlainCodec
from memsync.hub.state import resolve_replica, retired
from memsync.hub.sync import SyncReport, sync_once
from memsync.hub.transports import Transport, WriteMode
from memsync.local.fresh import now_us
from memsync.local.lock import held
from memsync.local.logs import get_logger
from memsync.local.memory import Memory
from memsync.local.platforms import refuse_native_windows
from memsync.local.reading import BadLineWatch
from memsync.local.statedir import StateDir
from memsync.local.storage import private_dirs

__all__ = ["Daemon"]

logger = get_logger(__name__)

_COMPACT = "\0compact"  # the request to compact a memory, instead of a remote's name
_POLL = "\0poll"  # a worker's request to look at its hub, instead of a memory's name


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
        self._requests = Requests()
        self._transports: dict[str, Transport] = {}
        self._backoff: dict[tuple[str, str], Backoff] = {}
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
        # watches (held for bookkeeping only, never during a pass). The hub signatures
        # need none: each remote's worker reads and writes only its own keys.
        self._state_lock = threading.RLock()
        self._ready = threading.Event()  # READY=1 sent to systemd

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
            self._ready.set()  # the workers' STATUS= lines come after READY=1, not before
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
        self._status = starting_status(
            pid=_pid(),
            replica=self.replica,
            config=str(self.config_path) if self.config_path else "(embedded default)",
            horizon_days=cfg.compaction.tombstone_horizon_days,
            max_postpone_seconds=cfg.compaction.max_postpone_seconds,
            retired=sorted(retired(self.state)),
            memories={
                m.name: (m.path, [rc.name for rc in cfg.memory_remotes(m)]) for m in cfg.memory
            },
            before=self._status or read_status(self.state),
            bridges={str(b.path): (b.memory, b.format) for b in cfg.bridge},
        )
        for mem in cfg.memory:
            Memory.open(mem.path)  # created 0600 with a header when missing
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
        ended = stop_workers(workers)
        for name, t in self._transports.items():
            if name in ended:
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
                done = self._bridges.sync(memory)
                self._noted(lambda status: status.note_bridges(done, now_us()))
            else:
                self._sync(memory, remote, stopped)
        except Exception:  # a bug must not stop the daemon; it is logged with its traceback
            logger.exception("unexpected error in %s %s", memory, remote)

    def _sync(self, memory: str, remote: str, stopped: threading.Event) -> None:
        with self._state_lock:
            backoff = self._backoff.setdefault((memory, remote), Backoff())
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
        backoff: Backoff,
    ) -> None:
        """The bookkeeping of a pass (`work.record_pass`), under `_state_lock`; a failed
        one is asked for again (its back-off says when)."""
        self._validate(memory)
        assert self._status is not None
        st = self._status.memories[memory].remotes.setdefault(remote, RemoteStatus())
        now = now_us()
        record_pass(
            memory,
            remote,
            report,
            st,
            backoff,
            now=now,
            horizon=self.config.compaction.tombstone_horizon_days * 86_400 * SECOND,
            retired=retired(self.state),
            write_mode=transport.mode if isinstance(transport, WriteMode) else None,
        )
        mem = self.config.memory_named(memory)
        if report.ok and mem is not None:
            # Issue 21: who holds the same memory, for the status and systemd.
            st.note_convergence(self.state, memory, remote, mem.path, self.replica, now)
            if self._ready.is_set():
                _systemd.notify("STATUS=" + status_line(self._status))
        if not report.ok:
            self.request(memory, remote)

    def _validate(self, memory: str) -> None:
        """A validation of the local file (`work.validate`), its count in the status."""
        mem = self.config.memory_named(memory)
        if mem is None or not mem.path.exists():
            return
        bad = validate(self._validation.setdefault(memory, BadLineWatch(mem.path)))
        if self._status is not None:
            self._status.memories[memory].bad_lines = bad

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
        outcome = compact(
            mem,
            cc,
            remotes=remotes,
            replica=self.replica,
            state=self.state,
            transports=self._transports,
            codecs={name: self._codec(memory, name) for name in remotes},
            forced=forced,
            postponements=postponements,
        )
        self._noted(lambda status: outcome.note(status.memories[memory]))
        if outcome.postponed:
            self._retry_compaction(memory)
        if outcome.done:
            for rc in self.config.memory_remotes(mem):
                self.request(memory, rc.name)

    def _noted(self, update: Callable[[DaemonStatus], None]) -> None:
        """Apply `update` to the status and write it (under `_state_lock`: each worker
        writes it, the compaction's and the bridges' too)."""
        with self._state_lock:
            assert self._status is not None
            update(self._status)
            self._write_status()

    def _codec(self, memory: str, remote: str) -> Codec:
        """The remote's hub codec (issue 12), its key file read again at each pass, so that
        a `memsync key import` or `rotate` needs no restart."""
        rc = next((r for r in self.config.remote if r.name == remote), None)
        return PlainCodec(remote, memory) if rc is None else codec_for(rc, self.config, memory)

    def _retry_compaction(self, memory: str) -> None:
        if self._scheduler is None:
            return
        assert self._status is not None
        since = self._status.memories[memory].postponed_since
        seconds = compaction_retry_seconds(self.config.compaction, since, now_us())
        run_once(self._scheduler, f"retry-{memory}", seconds, self.request, memory, _COMPACT)

    # Watching and scheduling

    def _start_watcher(self) -> None:
        """Start the watcher thread; return once it watches (`triggers.start_watcher`)."""
        paths = sorted({*watch_paths(self.config), *self._bridges.folders()})
        self._watch_stop = threading.Event()
        self._watcher = start_watcher(paths, self._watch, self._watch_stop)

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
        for memory, remote in requests_for(self.config, changed):
            self.request(memory, remote)

    def _start_scheduler(self) -> None:
        self._scheduler = start_scheduler(
            self.config,
            poll=self._poll,
            reconcile=self._reconcile,
            heartbeat=self._heartbeat,
            compaction=self._schedule_compaction,
            watchdog=watchdog_job(
                self._busy_times, self._stop_stuck, limit=WORKER_STUCK_SECONDS, every=CHECK_SECONDS
            ),
        )

    def _poll(self, rc: RemoteConfig) -> None:
        """The scheduler's poll job: handed to the remote's worker, so that a scheduler
        thread never waits on a remote."""
        if (worker := self._workers.get(rc.name)) is not None:
            worker.add(_POLL)

    def _poll_now(self, remote: str, stopped: threading.Event) -> None:
        """A cheap look at a hub (`triggers.poll_hub`): a pass for each memory it changed."""
        transport = self._transports.get(remote)
        rc = next((r for r in self.config.remote if r.name == remote), None)
        if transport is None or rc is None:
            return

        def failing(memory: str) -> bool:  # the pass comes back on its own after the back-off
            with self._state_lock:
                backoff = self._backoff.get((memory, remote))
            return backoff is not None and backoff.failures > 0

        memories = [m.name for m in self.config.memory if rc in self.config.memory_remotes(m)]
        for memory in poll_hub(transport, remote, memories, failing, self._hub_signature):
            self.request(memory, remote)
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
        new = reloaded_config(self.config, self.config_path)
        if new is None:
            return
        self._stop_all()
        self.config = new
        with self._state_lock:
            self._backoff.clear()
        self._start()


def _pid() -> int:
    return os.getpid()
