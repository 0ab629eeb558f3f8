"""`memsync.local.viewbuild`: the build lock of a detached store writer, held by real
processes (issue 20)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memsync.local.located import located_index
from memsync.local.statedir import StateDir
from memsync.local.viewbuild import awaited, unlink_unheld
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
        assert awaited(state, path) is True
        # It returned once the lock was free (not before): an exclusive one is ours now.
        fd = os.open(state.view_build_lock(path), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
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


_SECOND_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from memsync.local.statedir import StateDir
    from memsync.local.viewbuild import detached

    state, path = StateDir(Path(sys.argv[1])), Path(sys.argv[2])
    marks, done = sys.argv[3], sys.argv[4]
    fd = os.open(path, os.O_RDONLY)

    def write():
        Path(marks, "written").write_text(str(time.monotonic()))

    started = time.monotonic()
    print(detached(state, path, fd, write, lambda: done == "done"), time.monotonic() - started)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("done", ["done", "not done"])
def test_while_another_writer_holds_the_lock_the_next_waits_for_it_detached(
    tmp_path: Path, done: str
) -> None:
    """Another command's writer holds the lock: `detached` returns at once (the command
    never waits); its writer waits for the other, then writes only what the store there
    does not hold yet (`done`), so that a stuck or replaced writer still leaves a store."""
    state, path = StateDir(tmp_path / "state"), tmp_path / "m.jsonl"
    path.write_bytes(b"")
    holder = _held_by_another(state.view_build_lock(path), 1.0)
    try:
        args = [str(state.root), str(path), str(tmp_path), done]
        finished = subprocess.run(
            [sys.executable, "-c", _SECOND_WRITER, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        started, seconds = finished.stdout.split()
        assert started == "True"
        assert float(seconds) < 0.9  # not held up by the other writer's second
        holder.wait(timeout=10)
        released = time.monotonic()
    finally:
        holder.kill()
        holder.communicate()
    written = tmp_path / "written"
    if done == "done":
        time.sleep(0.5)
        assert not written.exists()
    else:
        deadline = time.monotonic() + 30
        while not written.exists():
            assert time.monotonic() < deadline, "the waiting writer never wrote"
            time.sleep(0.02)
        assert float(written.read_text()) >= released - 0.5  # after the other let go


def test_a_build_lock_is_removed_only_when_nobody_holds_it(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    free = state.prepared(state.view_build_lock(tmp_path / "gone.jsonl"))
    free.touch()
    unlink_unheld(free)
    assert not free.exists()
    held = state.view_build_lock(tmp_path / "m.jsonl")
    holder = _held_by_another(held, 60)
    try:
        unlink_unheld(held)
        assert held.exists()  # a writer is at work: its lock stays
    finally:
        holder.kill()
        holder.communicate()


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
