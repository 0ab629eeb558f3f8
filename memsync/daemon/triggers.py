"""What makes the daemon act, read from the config: the folders it watches, the requests a
change there makes, a poll's look at a hub, the jobs of its scheduler (polls,
reconciliation, the compaction schedule and its retries, the heartbeat, the watchdog), and
SIGHUP's new config.

`memsync.daemon.service` carries the requests out; this module only says when they come.
A request is a (memory, remote) pair: `remote` "" for a validation of the local file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memsync.config import CompactionConfig, Config, RemoteConfig, cron_trigger, load_config
from memsync.core.timestamps import SECOND
from memsync.daemon import _systemd
from memsync.daemon._selfwatch import SelfWatchdog, longest_busy
from memsync.daemon._watch import same_path
from memsync.errors import MemsyncError
from memsync.hub.transports import Transport
from memsync.local.logs import get_logger

__all__ = [
    "HEARTBEAT_SECONDS",
    "WATCHER_READY_SECONDS",
    "WORKER_STUCK_SECONDS",
    "compaction_retry_seconds",
    "poll_hub",
    "reloaded_config",
    "requests_for",
    "run_once",
    "start_scheduler",
    "start_watcher",
    "watch_paths",
    "watchdog_job",
]

logger = get_logger(__name__)

HEARTBEAT_SECONDS = 30.0
"""How often the status is rewritten even when nothing happens."""

WATCHER_READY_SECONDS = 10.0
"""How long the start waits for the file watcher to watch before the first pass."""

WORKER_STUCK_SECONDS = 600.0
"""The systemd watchdog is no longer fed once one piece of work (a pass, a compaction, a
turn of the main loop) has lasted this long: the daemon is stuck, let systemd restart it.
A remote's every wait is bounded far below (`SSHTransport`: 10 s to connect, 30 s per
answer), so a hung remote never trips it."""


def watch_paths(config: Config) -> list[Path]:
    """The folders to watch: each local file's, and each folder remote's memory folder
    (created 0700 when missing, so that a first push there is seen)."""
    paths = {m.path.parent for m in config.memory}
    for rc in config.remote:
        url = rc.parsed_url
        if url.scheme == "file" and Path(url.path).is_dir():
            for mem in config.memory:
                if rc in config.memory_remotes(mem):
                    folder = Path(url.path) / mem.name
                    folder.mkdir(mode=0o700, exist_ok=True)
                    paths.add(folder)
    return sorted(paths)


def start_watcher(
    paths: list[Path],
    watch: Callable[[list[Path], threading.Event, threading.Event], None],
    stop: threading.Event,
) -> threading.Thread:
    """Start `watch(paths, stop, ready)` in the watcher thread and return once it watches
    (it sets `ready`), has failed to start, or WATCHER_READY_SECONDS passed: polling covers
    what it would miss meanwhile."""
    ready = threading.Event()
    watcher = threading.Thread(
        target=watch, args=(paths, stop, ready), name="memsync-watch", daemon=True
    )
    watcher.start()
    if not ready.wait(WATCHER_READY_SECONDS):
        logger.warning(
            "file watching not ready after %g s; starting the first pass anyway",
            WATCHER_READY_SECONDS,
        )
    return watcher


def requests_for(config: Config, changed: set[Path]) -> list[tuple[str, str]]:
    """The requests a set of changed files makes: a changed local file, a validation and a
    pass with each of its remotes; a change in a folder remote's memory folder, a pass
    with that remote."""
    wanted: list[tuple[str, str]] = []
    for mem in config.memory:
        remotes = [rc.name for rc in config.memory_remotes(mem)]
        # Matched by canonical path or inode, not by equality (issue 23, item 3).
        if any(same_path(p, mem.path) for p in changed):
            wanted.append((mem.name, ""))
            wanted += [(mem.name, name) for name in remotes]
        for rc in config.memory_remotes(mem):
            url = rc.parsed_url
            if url.scheme == "file" and any(
                same_path(p.parent, Path(url.path) / mem.name) for p in changed
            ):
                wanted.append((mem.name, rc.name))
    return wanted


def poll_hub(
    transport: Transport,
    remote: str,
    memories: Sequence[str],
    failing: Callable[[str], bool],
    seen: dict[str, tuple[tuple[str, int], ...]],
) -> list[str]:
    """A poll (in the remote's worker): a cheap look at each memory folder of the hub, its
    files and sizes. Returns the memories that need a pass: those whose listing changed
    since `seen` (updated here), and those whose folder could not be listed (the pass
    reports the error and backs off). A memory `failing` is skipped: its pass comes back on
    its own after the back-off."""
    wanted: list[str] = []
    for memory in memories:
        if failing(memory):
            continue
        try:
            listing = tuple(sorted((f.name, f.size) for f in transport.list_files(memory)))
        except MemsyncError:
            wanted.append(memory)
            continue
        key = f"{remote}/{memory}"
        if listing != seen.get(key):
            wanted.append(memory)
        seen[key] = listing
    return wanted


def start_scheduler(
    config: Config,
    *,
    poll: Callable[[RemoteConfig], None],
    reconcile: Callable[[], None],
    heartbeat: Callable[[], None],
    compaction: Callable[[], None],
    watchdog: tuple[str, Callable[[], object], float],
) -> Any:
    """Start APScheduler's background scheduler with the daemon's jobs: `poll` for each
    remote (every `poll_seconds`, with jitter), `reconcile`, `heartbeat`, `compaction` on
    the cron schedule (local time), and `watchdog` (its job id, the job, its interval in
    seconds: systemd's, or the daemon's own). Returns it (apscheduler has no type hints)."""
    from apscheduler.schedulers.background import BackgroundScheduler

    sched = BackgroundScheduler(
        job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 60}
    )
    for rc in config.remote:
        sched.add_job(
            poll,
            "interval",
            args=[rc],
            seconds=rc.poll_seconds,
            jitter=max(1.0, rc.poll_seconds / 10),
            id=f"poll-{rc.name}",
        )
    sched.add_job(reconcile, "interval", seconds=config.daemon.reconcile_seconds, id="reconcile")
    sched.add_job(heartbeat, "interval", seconds=HEARTBEAT_SECONDS, id="heartbeat")
    trigger = cron_trigger(config.compaction.schedule, timezone=None)  # local time
    sched.add_job(compaction, trigger, id="compaction")
    job_id, job, seconds = watchdog
    sched.add_job(job, "interval", seconds=seconds, id=job_id)
    sched.start()
    return sched


def run_once(
    scheduler: Any, job_id: str, seconds: float, job: Callable[..., None], *args: str
) -> None:
    """Have `scheduler` run `job(*args)` once, `seconds` from now (local time), instead of
    any earlier such job of the same `job_id`."""
    when = datetime.now().astimezone() + timedelta(seconds=seconds)
    scheduler.add_job(job, "date", run_date=when, args=list(args), id=job_id, replace_existing=True)


def watchdog_job(
    busy_times: Callable[[], list[float | None]],
    stop_stuck: Callable[[], None],
    *,
    limit: float,
    every: float,
) -> tuple[str, Callable[[], object], float]:
    """The watchdog's job (id, job, interval): under systemd with `WatchdogSec=`, a ping
    while the main loop and every worker are alive (`busy_times`: when each piece of work
    in progress began; alive: for less than `limit` seconds); elsewhere (launchd, or by
    hand: no one else would notice a stuck daemon, issue 23) the daemon's own
    `SelfWatchdog`, every `every` seconds, which calls `stop_stuck`."""
    interval = _systemd.watchdog_interval()
    if interval is None:
        return "self-watchdog", SelfWatchdog(busy_times, stop_stuck, limit=limit).check, every

    def ping() -> None:
        if longest_busy(busy_times(), time.monotonic()) < limit:
            _systemd.notify("WATCHDOG=1")

    return "watchdog", ping, interval


def compaction_retry_seconds(cc: CompactionConfig, postponed_since: int | None, now: int) -> float:
    """How long to wait before trying a postponed compaction again: the quiet period, or
    less when the forced attempt at `max_postpone_seconds` comes sooner; 5 s at least."""
    wait = cc.quiet_seconds
    left = (
        None
        if postponed_since is None
        else (postponed_since - now) / SECOND + cc.max_postpone_seconds
    )
    if left is not None and left > 0:  # the forced attempt at the bound, not a wait later
        wait = min(wait, left)
    return max(5.0, wait)


def reloaded_config(running: Config, path: Path | None) -> Config | None:
    """SIGHUP: the config read again from `path`, or None (said in the log) when the
    running one stays: the embedded default, a config with a mistake, or one that moves
    the state directory (a restart's business)."""
    if path is None:
        logger.info("SIGHUP: running on the embedded default; nothing to reload")
        return None
    try:
        new = load_config(path)
    except MemsyncError as exc:
        logger.error("SIGHUP: keeping the running config: %s", exc)
        return None
    if new.state_dir != running.state_dir:
        logger.error(
            "SIGHUP: keeping the running config: state_dir cannot change "
            "while the daemon runs (restart it)"
        )
        return None
    logger.info("SIGHUP: config reloaded from %s", path)
    return new
