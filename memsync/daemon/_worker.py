"""The daemon's worker threads (`memsync.daemon`): each carries out its own requests, one
at a time, in order, so that one that waits (a hung remote) holds up no other worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Worker"]


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
