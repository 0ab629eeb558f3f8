"""`memsync.local.forking`: work handed to a detached process (issue 20), in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from memsync.local.forking import run_detached

_PROGRAM = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from memsync.local.forking import run_detached

    go, done = Path(sys.argv[1]), Path(sys.argv[2])
    kept = os.open(sys.argv[1] + ".kept", os.O_RDWR | os.O_CREAT)
    other = os.open(sys.argv[1] + ".other", os.O_RDWR | os.O_CREAT)

    def is_open(fd):
        try:
            os.fstat(fd)
        except OSError:
            return False
        return True

    def work():
        print("the worker's own output")  # to /dev/null, not the caller's pipe
        while not go.exists():  # until the test has seen the command end
            time.sleep(0.01)
        me = {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0)}
        me["open"] = [is_open(kept), is_open(other)]
        done.write_text(json.dumps(me))
        raise RuntimeError("a failure that ends the worker, and nothing else")

    print("detached" if run_detached(work, keep=(kept,)) else "here")
    print(json.dumps({"pid": os.getpid(), "sid": os.getsid(0)}))
    """
)


def _wait_for(path: Path, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"timed out after {seconds} s waiting for {path}"
        time.sleep(0.01)


@pytest.mark.slow
def test_the_command_ends_before_its_detached_work_and_its_output_ends_with_it(
    tmp_path: Path,
) -> None:
    """The caller's pipe closes when the command exits, though the worker still runs (it
    waits for a file the test makes only then); the worker is not the command's child,
    runs in a session of its own, holds only the descriptors it was given, and what it
    prints or raises reaches no one."""
    go, done = tmp_path / "go", tmp_path / "done"
    finished = subprocess.run(
        [sys.executable, "-c", _PROGRAM, str(go), str(done)],
        capture_output=True,
        text=True,
        timeout=60,  # a worker holding the pipe would hold this call until the timeout
        check=True,
    )
    first, second = finished.stdout.splitlines()
    assert first == "detached"
    assert finished.stderr == ""
    assert not done.exists()  # the worker is still waiting
    command = json.loads(second)
    go.touch()
    _wait_for(done)
    worker = json.loads(done.read_text())
    assert worker["pid"] != command["pid"]
    assert worker["ppid"] != command["pid"]  # reparented: nobody's child to wait for
    assert worker["sid"] != command["sid"]  # a Ctrl-C for the command does not reach it
    assert worker["open"] == [True, False]  # what it was given to keep, nothing else


def test_with_another_thread_running_nothing_is_forked_and_nothing_runs() -> None:
    """A fork copies only the calling thread: with another one running, `run_detached`
    says no and runs nothing (the caller does the work itself)."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    ran: list[int] = []
    try:
        assert run_detached(lambda: ran.append(os.getpid())) is False
    finally:
        stop.set()
        other.join()
    assert ran == []


def test_a_standard_stream_cannot_be_kept() -> None:
    """The worker gives up descriptors 0 to 2 (for /dev/null): a file open as one of them
    (a command started with its standard input closed) would be lost, so nothing runs."""
    ran: list[int] = []
    assert run_detached(lambda: ran.append(1), keep=(0,)) is False
    assert ran == []


@pytest.mark.slow
def test_no_fork_where_children_cannot_be_waited_for() -> None:
    """With SIGCHLD ignored (as a parent can pass on across exec), no exit status says
    whether a child succeeded: nothing is forked, the work is done in the process."""
    program = (
        "import signal; from memsync.local.forking import fork_is_safe; "
        "print(fork_is_safe()); signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
        "print(fork_is_safe())"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == [str((os.cpu_count() or 1) >= 2), "False"]


_SECOND_FORK_FAILS = textwrap.dedent(
    """
    import errno, os, sys, time
    from pathlib import Path
    from memsync.local.forking import run_detached

    me, real_fork = os.getpid(), os.fork

    def fork():
        if os.getpid() != me:  # the first child's fork, the worker's: no process to spare
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return real_fork()

    os.fork = fork
    print(run_detached(lambda: Path(sys.argv[1]).touch()))
    """
)


@pytest.mark.slow
def test_a_worker_that_could_not_be_forked_is_reported_as_not_started(tmp_path: Path) -> None:
    """The first fork succeeds, the worker's fails (no process to spare): `run_detached`
    says False, so that the caller does the work itself, instead of leaving it undone."""
    marker = tmp_path / "ran"
    done = subprocess.run(
        [sys.executable, "-c", _SECOND_FORK_FAILS, str(marker)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["False"]
    time.sleep(0.2)
    assert not marker.exists()
