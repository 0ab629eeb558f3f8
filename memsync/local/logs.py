"""The application's logging set-up, applied when memsync first logs (issue 20).

`import logging` (with `traceback`, `threading`, `string`) is about 4 ms of a command's
start-up, and `add`, `prompt`, `forget` and `recall` usually log nothing. So `cli.main`
hands its set-up to `configure`, which applies it at once if `logging` is imported already
and otherwise keeps it until a module asks `get_logger` for its logger: every memsync
module takes its logger there, never from `logging.getLogger`, so a set-up is always in
place before anything of memsync's is logged. A library caller that never configures
gets plain `logging.getLogger` loggers (STYLE guideline 10: the library configures
nothing).
"""

from __future__ import annotations

import _thread
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

__all__ = ["configure", "get_logger", "unconfigured"]

_pending: list[int] = []  # the verbosity of a set-up not applied yet (at most one)
_lock = _thread.allocate_lock()


def configure(verbose: int) -> None:
    """The CLI's set-up of the "memsync" logger: its lines on stderr as `memsync: ...`, at
    WARNING, INFO with `-v`, DEBUG with `-vv`; not passed on to the root logger."""
    _pending[:] = [verbose]
    if "logging" in sys.modules:
        _apply()


def unconfigured() -> None:
    """Drop a set-up nothing has logged under (`cli.main` at its end): the next `main` in
    the same process gives its own, and a library call after it configures nothing."""
    _pending.clear()


def get_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, after applying a set-up `configure` kept."""
    import logging

    if _pending:
        _apply()
    return logging.getLogger(name)


def _apply() -> None:
    import logging

    with _lock:  # two threads logging first at once: one applies, the other waits
        if not _pending:
            return
        verbose = _pending.pop()
        level = logging.WARNING - 10 * min(verbose, 2)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("memsync: %(message)s"))
        root = logging.getLogger("memsync")
        root.handlers[:] = [handler]
        root.setLevel(level)
        root.propagate = False
