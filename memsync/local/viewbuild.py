"""A persistent view written by a detached process, and the wait for it (issue 20).

The first command on a large memory file folds it (seconds at a million records), then
writes its store (`memsync.local.viewstore`), which costs about as much again. On the
command line (`ViewStore.detach_from`) a detached process writes the store instead, and
the command answers from its fold meanwhile. That process holds the file's build lock
(`StateDir.view_build_lock`, an `flock`) until it exits, however it exits: a command of
the command line that finds no valid store while the lock is held waits for it
(`awaited`, bounded) instead of folding the whole file again beside it, on the same
cores, then resumes from the new store. A fold that has a store to write while the lock
is held detaches its writer all the same: that one waits for the other, then writes
only what is still missing. A writer writes nothing for a file replaced since its fold
(`viewstore._replaced`).

Nothing here decides an answer: a store that is never written, or a builder killed at any
instant, costs the next command only time (the store is checked before each use).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from memsync.local.forking import run_detached
from memsync.local.statedir import StateDir

__all__ = ["BUILD_WAIT", "awaited", "detached", "unlink_unheld"]

BUILD_WAIT = 30.0
"""How long a command waits for a detached builder before it folds the file itself and
writes the store (a million records take the builder about 4 s; one that is stopped or
stuck must not stop every command for long)."""

_POLL = 0.02


def detached(
    state: StateDir,
    path: Path,
    fd: int,
    write: Callable[[], None],
    done: Callable[[], bool],
) -> bool:
    """Run `write` (the store of memory file `path`, open as `fd`: the one descriptor it
    reads) in a detached process that holds the file's build lock; whether it started
    (False: no process may be forked or none could be, `forking.run_detached`; the
    caller writes the store itself).

    When another process holds the lock (a writer of another command), the detached one
    first waits for it (at most `BUILD_WAIT`), then writes only if `done()` (the store
    there now covers this fold) is false: the command never waits for another's writer,
    two writers do not share the cores for one store, and a writer that is stuck, or of
    a file since replaced (a compaction), leaves this fold's store written all the same."""
    try:
        lock = os.open(
            state.prepared(state.view_build_lock(path)),
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
            0o600,
        )
    except OSError:
        return False  # (a state directory that cannot be written: the caller's save fails)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            ours = True
        except BlockingIOError:
            ours = False  # another writer's: the detached process waits for it
        except OSError:
            return False  # (no `flock` here: nobody could wait for a writer)

        def after_the_other() -> None:
            if not ours:
                # The other's writer done, or stuck (not taken): written all the same.
                _flock_within(lock, fcntl.LOCK_EX, BUILD_WAIT)
                if done():
                    return
            write()

        # The writer's copy of the descriptor keeps the lock until it exits; this one's
        # is closed below, unlocking nothing (an `flock` belongs to the open file).
        started = run_detached(after_the_other, keep=(fd, lock))
        if ours and not started:
            fcntl.flock(lock, fcntl.LOCK_UN)
        return started
    finally:
        os.close(lock)


def _flock_within(fd: int, op: int, seconds: float) -> tuple[bool, bool]:
    """Take the `flock` `op` (`LOCK_EX`, `LOCK_SH`) of `fd`, trying for at most `seconds`:
    whether it was taken, and whether another held it meanwhile."""
    deadline = time.monotonic() + seconds
    waited = False
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return True, waited
        except BlockingIOError:
            waited = True
            if time.monotonic() >= deadline:
                return False, True
            time.sleep(_POLL)
        except OSError:
            return False, waited  # (no `flock` on this file system)


def awaited(state: StateDir, path: Path, seconds: float = BUILD_WAIT) -> bool:
    """Wait while a detached process writes the store of memory file `path` (its build
    lock held), at most `seconds`; whether one was (then the store is worth reading
    again)."""
    try:
        fd = os.open(state.view_build_lock(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False  # never built by a detached process here
    try:
        taken, waited = _flock_within(fd, fcntl.LOCK_SH, seconds)
        if taken:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
        return waited
    finally:
        os.close(fd)


def unlink_unheld(lock: Path) -> None:
    """Remove the build lock `lock` (of a file whose store is gone) unless a writer holds
    it. (Taken meanwhile: a writer that starts now makes a new lock file; the worst is two
    writers of one store, only time.)"""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(lock)
    except OSError:
        return  # held: a writer is at work
    finally:
        os.close(fd)
