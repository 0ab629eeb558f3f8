"""The daemon's own watchdog, where no service manager watches it (issue 23, item 4).

Under systemd with `WatchdogSec=`, a daemon that stops pinging is killed and restarted.
launchd has no such watchdog, nor has a daemon started by hand: there `SelfWatchdog`
looks, every `CHECK_SECONDS`, at when each piece of work in progress began (the main
loop's turn, each worker's request); once one has lasted `WORKER_STUCK_SECONDS`, the daemon
is stuck for good (every wait on a remote is bounded far below). It logs that, asks the
daemon to stop, and exits with `EXIT_STUCK` (non-zero, so that launchd's `KeepAlive`
restarts it): at once if the stop ends the daemon, else after a grace period, by
`os._exit` (a stuck thread never returns).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable

from memsync.local.logs import get_logger

__all__ = ["CHECK_SECONDS", "EXIT_STUCK", "SelfWatchdog", "longest_busy"]

logger = get_logger(__name__)

EXIT_STUCK = 70
"""The exit status of a daemon that stopped itself because it was stuck (EX_SOFTWARE)."""

CHECK_SECONDS = 60.0
"""How often the self-watchdog looks."""


def longest_busy(started: Iterable[float | None], now: float) -> float:
    """How long the oldest piece of work in progress has lasted (0 when all are idle)."""
    return max((now - t for t in started if t is not None), default=0.0)


class SelfWatchdog:
    """Stops the process when a piece of work has lasted `limit` seconds.

    Args:
        busy: when each piece of work in progress began (monotonic; None: idle).
        stop: asks the daemon to stop (its main loop returns `EXIT_STUCK`).
        limit: how long one piece of work may last.
        grace: how long the stop may take before the process exits anyway.
        exit_process: how the process exits (`os._exit`: a stuck thread never joins).
    """

    def __init__(
        self,
        busy: Callable[[], Iterable[float | None]],
        stop: Callable[[], None],
        *,
        limit: float,
        grace: float = 10.0,
        exit_process: Callable[[int], object] = os._exit,
    ) -> None:
        self._busy = busy
        self._stop = stop
        self._limit = limit
        self._grace = grace
        self._exit = exit_process
        self.tripped = False

    def check(self) -> bool:
        """Look once; whether the daemon is (now, or already) being stopped as stuck."""
        if self.tripped:
            return True
        longest = longest_busy(self._busy(), time.monotonic())
        if longest < self._limit:
            return False
        self.tripped = True
        logger.error(
            "one piece of work has lasted %.0f s: the daemon is stuck; exiting with status "
            "%d so that the service manager (launchd: KeepAlive) starts it again",
            longest,
            EXIT_STUCK,
        )
        timer = threading.Timer(self._grace, self._exit, args=(EXIT_STUCK,))
        timer.daemon = True
        timer.start()
        self._stop()
        return True
