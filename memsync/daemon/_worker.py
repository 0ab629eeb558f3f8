"""The daemon's queues of requests (`memsync.daemon`): the worker threads, each carrying
out its own requests one at a time, in order, so that one that waits (a hung remote) holds
up no other worker; and the main loop's own queue (`Requests`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["Requests", "Worker", "stop_workers"]


class Worker:
    """A thread that carries out the requests of one remote (or compaction), one at a time:
    `carry_out(item, name, stopped)` for each item asked for.

    `busy_since` is when the request in progress began (None when idle): the watchdog reads
    it. `stop()` lets the request in progress finish; nothing is carried out after it.
    """

    def __init__(self, name: str, carry_out: Callable[[str, str, threading.Event], None]) -> None:
        self.name = name
        self.busy_since: float | None = None
        self._carry_out = carry_out
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self.stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"memsync-{name.strip(chr(0))}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def add(self, item: str, *, wake: bool = True) -> None:
        """Ask for `item` (a memory's name, or `_POLL`); a set, so a burst is one request.
        `wake=False`: at the next turn (a request put back while its remote backs off)."""
        with self._lock:
            self._pending.add(item)
        if wake:
            self._wake.set()

    def stop(self) -> None:
        self.stopped.set()
        self._wake.set()

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the thread to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while not self.stopped.is_set():
            # A short wait even when woken: requests re-added while a remote backs off come
            # round 5 times a second, not in a busy loop.
            self._wake.wait(0.2)
            self._wake.clear()
            with self._lock:
                taken, self._pending = self._pending, set()
            for item in sorted(taken):
                if self.stopped.is_set():
                    return
                self.busy_since = time.monotonic()
                try:
                    self._carry_out(item, self.name, self.stopped)
                finally:
                    self.busy_since = None


def stop_workers(workers: Mapping[str, Worker], grace: float = 2.0) -> set[str]:
    """Stop every worker and wait up to `grace` seconds in all for them to end: a write in
    progress is finished (SIGTERM); one waiting on a remote that does not answer is not
    waited for beyond this (the workers are daemon threads). Returns the names of those
    that ended (their transports may be closed: no call of theirs is in progress)."""
    for worker in workers.values():
        worker.stop()
    deadline = time.monotonic() + grace
    for worker in workers.values():
        worker.join(max(0.0, deadline - time.monotonic()))
    return {name for name, worker in workers.items() if worker.join(0)}


@dataclass
class Requests:
    """The main loop's queue: (memory, "") pairs, a validation of the local file each; a
    set, so a burst of events is one validation. (Passes go to the remotes' workers.)"""

    pending: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, memory: str, remote: str) -> None:
        with self.lock:
            self.pending.add((memory, remote))

    def take(self) -> set[tuple[str, str]]:
        with self.lock:
            taken, self.pending = self.pending, set()
            return taken
