"""The daemon watches before its first pass (issue 24, item 18).

Two daemons started together on a folder hub: a peer's push that landed between the first
pass and the start of the watcher waited for the next poll (30 s by default; in 2 of 9 runs
A's record had not reached B after 15 s). The daemon runs in this process here, so that the
race can be made to happen every time: the watcher is slow to start (as on a loaded
machine), and the peer pushes in the middle of the first pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsync.config import RemoteConfig, load_config
from memsync.config.wiring import open_remote
from memsync.daemon._watch import watch_jsonl
from memsync.daemon.service import Daemon
from memsync.hub.transports import Transport
from memsync.local.reading import view_of
from tests.helpers.daemons import wait_for
from tests.helpers.faults import BeforeFirstWrite
from tests.helpers.sync import Replica, make_replica

NEVER = 3600  # poll and reconcile: what arrives within the test came through the watcher


@pytest.fixture
def slow_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher thread takes 1.5 s to start watching (importing watchfiles and adding
    the inotify watches on a busy machine)."""

    def slow(*args: Any, **kwargs: Any) -> None:
        time.sleep(1.5)
        watch_jsonl(*args, **kwargs)

    monkeypatch.setattr("memsync.daemon.service.watch_jsonl", slow)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in started:
        daemon._stop_all()


def _replica(tmp_path: Path, name: str, hub: Path) -> Replica:
    node = make_replica(tmp_path, name, remotes={"hub": {"url": str(hub), "poll_seconds": NEVER}})
    with node.config.open("a", encoding="utf-8") as f:
        f.write(f"\n[daemon]\nreconcile_seconds = {NEVER}\n")
    return node


@pytest.mark.slow
def test_a_push_landing_during_the_first_pass_arrives_without_a_poll(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slow_watcher: None,
    daemons: list[Daemon],
) -> None:
    hub = tmp_path / "hub"
    hub.mkdir()
    a, b = _replica(tmp_path, "a", hub), _replica(tmp_path, "b", hub)
    a.memory().add("fact", "A was here first.")
    on_b = b.memory().add("fact", "B pushed while A's first pass ran.").id
    pushed = threading.Event()

    def b_pushes() -> None:
        [report] = b.sync_config()
        assert report.ok, report.error
        pushed.set()

    def opened(rc: RemoteConfig) -> Transport:
        return BeforeFirstWrite(open_remote(rc), b_pushes)

    monkeypatch.setattr("memsync.daemon.service.open_remote", opened)
    daemon = Daemon(load_config(a.config), a.config)
    daemons.append(daemon)
    daemon._start()
    wait_for(pushed.is_set, "B's push in the middle of A's first pass")
    wait_for(
        lambda: on_b in {r.id for r in view_of([a.path]).records},
        "B's record in A's file, through the watcher (poll and reconcile: an hour)",
        timeout=10,
    )
