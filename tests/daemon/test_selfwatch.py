"""The daemon's self-watchdog where no service manager watches it (launchd; issue 23):
a piece of work stuck for good makes the process exit non-zero, so that launchd's
KeepAlive starts it again. A real worker thread is stuck in a real process (limits
shortened), and the daemon's scheduler gets the self-watchdog only without systemd's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsync.config import load_config
from memsync.daemon._selfwatch import EXIT_STUCK, SelfWatchdog, longest_busy
from memsync.daemon.service import Daemon

STUCK = """
import threading, time
from memsync.daemon._selfwatch import SelfWatchdog
from memsync.daemon._worker import Worker

forever = threading.Event()
worker = Worker("hub", lambda item, name, stopped: forever.wait())
worker.start()
worker.add("me")
stopping = threading.Event()
dog = SelfWatchdog(lambda: [worker.busy_since], stopping.set, limit=0.3, grace=0.5)
while not dog.check():
    time.sleep(0.05)
assert stopping.is_set()
print("stopping", flush=True)
forever.wait()  # the main loop is stuck too: only the exit ends the process
"""


@pytest.mark.slow
def test_a_stuck_worker_makes_the_process_exit_non_zero() -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", STUCK], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == EXIT_STUCK, done.stderr
    assert done.stdout == "stopping\n"
    assert "the daemon is stuck; exiting with status 70" in done.stderr
    assert time.monotonic() - started < 20


def test_work_in_progress_below_the_limit_is_not_stuck() -> None:
    now = time.monotonic()
    assert longest_busy([None, now - 5, None], now) == pytest.approx(5)
    assert longest_busy([None, None], now) == 0.0
    stopped: list[bool] = []
    exited: list[int] = []
    dog = SelfWatchdog(
        lambda: [now - 5, None],
        lambda: stopped.append(True),
        limit=600,
        exit_process=exited.append,
    )
    assert not dog.check()
    assert stopped == []
    assert exited == []


def _daemon(tmp_path: Path) -> Daemon:
    config = tmp_path / "config.toml"
    config.write_text(
        f'replica = "laptop"\nstate_dir = "{tmp_path / "state"}"\n'
        f'[[memory]]\nname = "me"\npath = "{tmp_path / "me.jsonl"}"\n',
        encoding="utf-8",
    )
    return Daemon(load_config(config), config)


@pytest.mark.parametrize("systemd", [False, True], ids=["launchd-or-by-hand", "systemd"])
def test_the_scheduler_watches_the_daemon_itself_only_without_systemd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, systemd: bool
) -> None:
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    if systemd:
        monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    else:
        monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    daemon = _daemon(tmp_path)
    daemon._start_scheduler()
    try:
        jobs = {job.id for job in daemon._scheduler.get_jobs()}
    finally:
        daemon._scheduler.shutdown(wait=False)
    assert ("self-watchdog" in jobs) is not systemd
    assert ("watchdog" in jobs) is systemd


DAEMON = """
import sys
import memsync.daemon.service as service
service.WORKER_STUCK_SECONDS = 0.0  # every look finds the daemon stuck
service.CHECK_SECONDS = 0.1
from memsync.cli import main
sys.exit(main(["daemon", "--config", sys.argv[1]]))
"""


@pytest.mark.slow
def test_the_daemon_stopped_by_its_self_watchdog_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memsync daemon` itself, with the limits shortened: it stops cleanly and exits with
    EXIT_STUCK (launchd's KeepAlive restarts it), its status file written on the way."""
    _daemon(tmp_path)  # writes the config
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    done = subprocess.run(
        [sys.executable, "-c", DAEMON, str(tmp_path / "config.toml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_STUCK, done.stderr[-2000:]
    assert "the daemon is stuck; exiting with status 70" in done.stderr
    assert (tmp_path / "state").is_dir()
