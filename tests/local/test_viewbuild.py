"""`memsync.local.viewbuild`: the build lock of a detached store writer, held by real
processes (issue 20)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from memsync.local.statedir import StateDir
from memsync.local.viewbuild import awaited, detached

_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    """
)


def _held_by_another(lock: Path, seconds: float) -> subprocess.Popen[str]:
    """A process holding `lock`'s `flock` for `seconds`, once this returns."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(lock), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    return holder


def test_nothing_to_wait_for_without_a_builder(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    assert awaited(state, tmp_path / "m.jsonl") is False  # no lock file at all
    lock = state.prepared(state.view_build_lock(tmp_path / "m.jsonl"))
    lock.touch()
    assert awaited(state, tmp_path / "m.jsonl") is False  # one left by a builder now gone


def test_a_command_waits_for_the_builder_then_goes_on(tmp_path: Path) -> None:
    state, path = StateDir(tmp_path / "state"), tmp_path / "m.jsonl"
    holder = _held_by_another(state.view_build_lock(path), 0.5)
    try:
        assert awaited(state, path) is True
        assert holder.poll() is not None  # it returned once the builder was gone
    finally:
        holder.kill()
        holder.communicate()


def test_a_builder_that_does_not_end_is_waited_for_a_bounded_time(tmp_path: Path) -> None:
    state, path = StateDir(tmp_path / "state"), tmp_path / "m.jsonl"
    holder = _held_by_another(state.view_build_lock(path), 60)
    try:
        started = time.monotonic()
        assert awaited(state, path, seconds=0.2) is True
        assert time.monotonic() - started < 30  # not the builder's 60 s
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.communicate()


def test_a_store_another_process_is_writing_is_left_to_it(tmp_path: Path) -> None:
    """While another builder holds the lock, `detached` starts none (two writers of one
    store would share the cores for one result) and says the store is taken care of."""
    state, path = StateDir(tmp_path / "state"), tmp_path / "m.jsonl"
    holder = _held_by_another(state.view_build_lock(path), 60)
    ran: list[bool] = []
    try:
        assert detached(state, path, 0, lambda: ran.append(True)) is True
    finally:
        holder.kill()
        holder.communicate()
    assert ran == []
