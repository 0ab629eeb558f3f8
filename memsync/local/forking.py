"""When a second process may be forked, and work handed to a detached one (issue 20).

A fork copies only the calling thread: with another thread running, a lock it held stays
held forever in the child. So memsync forks only while the process has one thread, and
only with a second core for the child (on one, the fork would slow the work it shares).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable

__all__ = ["fork_is_safe", "run_detached"]


def fork_is_safe() -> bool:
    """Whether this process may fork a child to share its work: `os.fork` exists, no other
    thread runs, there are two cores or more, and a child can be waited for (SIGCHLD not
    ignored, as a parent that ignored it passes on across `exec`: then no exit status
    tells whether a child succeeded)."""
    return (
        hasattr(os, "fork")
        and threading.active_count() == 1
        and (os.cpu_count() or 1) >= 2
        and signal.getsignal(signal.SIGCHLD) is not signal.SIG_IGN
    )


def run_detached(work: Callable[[], None], keep: Iterable[int] = ()) -> bool:
    """Run `work` in a detached process and return True at once; False, running nothing,
    where `fork_is_safe` says no or a kept descriptor is a standard stream's (0 to 2: the
    worker gives those up), and when the fork fails (`OSError`: no process or memory to
    spare). `work` may use the descriptors `keep`, no other.

    The process is nobody's child to wait for: its parent, forked for this alone, exits
    at once and is reaped here. It leads a session of its own (a Ctrl-C meant for the
    command does not reach it) and holds none of this process's standard streams (a
    caller reading the command's output through a pipe sees it end when the command
    exits, not when the work does), nor any other descriptor but `keep` (a lock this
    process holds stays this process's: a lock file's `flock` would otherwise outlive
    this process, killed, for as long as the work runs). It leaves by `os._exit`, running
    nothing of the caller's (no `atexit`, no buffers flushed twice); whatever `work`
    raises ends it silently, so `work` must be what only time depends on (a cache)."""
    wanted = set(keep)
    if not fork_is_safe() or min(wanted, default=3) < 3:
        return False
    kept = {0, 1, 2, *wanted}
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # (reaped already: as it exits at once, it forked)
            return True
        return os.waitstatus_to_exitcode(status) == 0  # 1: the worker's fork failed
    code = 1
    try:  # the first child: a session of its own, then the worker, then gone
        os.setsid()
        if os.fork() == 0:
            code = 0
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            _close_all_but(kept)
            work()
        code = 0
    finally:
        os._exit(code)


def _close_all_but(kept: set[int]) -> None:
    """Close every descriptor of this process but `kept`: those listed as open where the
    system lists them (one `close` each), else every number up to the limit."""
    try:
        listed = [int(name) for name in os.listdir("/dev/fd")]  # (Linux: /proc/self/fd)
    except (OSError, ValueError):
        listed = None
    if listed is not None:
        for fd in listed:
            if fd not in kept:
                with contextlib.suppress(OSError):  # (the listing's own, closed since)
                    os.close(fd)
        return
    low = 0
    for fd in sorted(kept):
        if fd > low:  # (an empty range is not nothing: CPython may close from `low` up)
            os.closerange(low, fd)
        low = fd + 1
    top = os.sysconf("SC_OPEN_MAX")
    os.closerange(low, max(top, low + 65536))
