"""`memsync.local.viewbuild`: the build lock of a detached store writer, held by real
processes (issue 20)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memsync.local.located import located_index
from memsync.local.statedir import StateDir
from memsync.local.viewbuild import awaited, detached
from memsync.local.viewstore import ViewStore
from tests.helpers.imports import large_memory

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
        started = time.monotonic()
        assert awaited(state, path) is True
        assert time.monotonic() - started >= 0.3  # until the builder was gone
        holder.wait(timeout=10)
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


def test_while_another_holds_the_lock_the_caller_writes_the_store_itself(
    tmp_path: Path,
) -> None:
    """A writer holds the lock (slow, stopped, or of a file replaced since): `detached`
    starts no second one and says so, and the caller writes its store itself, so that a
    stuck writer cannot leave every fold without a store."""
    state, path = StateDir(tmp_path / "state"), tmp_path / "m.jsonl"
    holder = _held_by_another(state.view_build_lock(path), 60)
    ran: list[bool] = []
    try:
        assert detached(state, path, 3, lambda: ran.append(True)) is False
    finally:
        holder.kill()
        holder.communicate()
    assert ran == []


_WRITER = textwrap.dedent(
    """
    import fcntl, os, shutil, sys, time
    lock, source, target, seconds = sys.argv[1:]
    os.makedirs(target, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(float(seconds))
    for name in os.listdir(source):
        shutil.copy(os.path.join(source, name), target)
    """
)


@pytest.mark.parametrize("command_line", [True, False], ids=["command-line", "library"])
def test_a_command_line_fold_waits_for_the_writer_and_resumes_from_its_store(
    tmp_path: Path, command_line: bool
) -> None:
    """While a writer holds the file's build lock and there is no store yet, a command
    line's fold (`detach_from` set) waits, then resumes from the store the writer left
    (here one copied in before it lets go). A library's fold does not wait: it folds."""
    path = large_memory(tmp_path / "m.jsonl")
    reference, state = StateDir(tmp_path / "reference"), StateDir(tmp_path / "state")
    with located_index(path, ViewStore(reference)) as view:
        assert not view.resumed  # (a store written: the one the writer will copy in)
    source, target = reference.view_store(path).parent, state.view_store(path).parent
    lock = state.view_build_lock(path)
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(lock), str(source), str(target), "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "held\n"
        store = ViewStore(state, detach_from=1) if command_line else ViewStore(state)
        with located_index(path, store) as view:
            assert view.resumed is command_line
    finally:
        writer.kill()
        writer.communicate()
