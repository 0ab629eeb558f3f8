"""The progress line of long operations (issue 14): records and bytes done, rate, time left.

The library reports progress through a `Progress` callback and never writes to a terminal
itself; the command line makes a `ProgressLine` (`progress_line`) only when stderr is a
terminal and `--quiet` was not given. The line appears once the operation has run for
`MEMSYNC_PROGRESS_AFTER` seconds (default 2), is redrawn in place with "\\r", and is erased
by `clear()` before anything else is written to stderr, so that the one-line
`memsync: ...` error contract stays intact.

Apart from the terminal check in `progress_line`, this module is formatting: `format_line`
is pure, and `ProgressLine` takes its clock and stream as arguments.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TextIO

__all__ = [
    "DEFAULT_AFTER",
    "Progress",
    "ProgressLine",
    "format_line",
    "progress_line",
]

Progress = Callable[[str, int, int, int], None]
"""`progress(what, records, done_bytes, total_bytes)`: called by long operations after
each chunk; `what` names the phase ("merge", "compact: reading"); `total_bytes` is 0 when
unknown. It must be cheap and must not raise."""

DEFAULT_AFTER = 2.0
"""Seconds an operation must have run before its progress line appears: a short command
stays silent. `MEMSYNC_PROGRESS_AFTER` overrides it (the tests set 0)."""

_REDRAW = 0.2  # seconds between redraws: a terminal need not be written 100 times a second
_MB = 1_000_000


def format_line(what: str, records: int, done: int, total: int, seconds: float) -> str:
    """One progress line, e.g. `merge: 312,000 records, 98.1 of 315.0 MB (31%), 45.2 MB/s,
    5 s left`. The rate is `done` over `seconds`; time left is shown when `total` is known.
    """
    parts = [f"{what}: {records:,} records"]
    if total > 0:
        pct = min(100, int(100 * done / total))
        parts.append(f"{done / _MB:.1f} of {total / _MB:.1f} MB ({pct}%)")
    else:
        parts.append(f"{done / _MB:.1f} MB")
    if seconds > 0 and done > 0:
        rate = done / seconds
        parts.append(f"{rate / _MB:.1f} MB/s")
        if total > done:
            parts.append(f"{_duration((total - done) / rate)} left")
    return ", ".join(parts)


def _duration(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class ProgressLine:
    """A `Progress` callback drawing one line, in place, on `stream` (a terminal).

    Nothing is drawn before `after` seconds from creation; then at most every `_REDRAW`
    seconds. Each phase (`what`) has its own rate, measured from its first report.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        after: float = DEFAULT_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._clock = clock
        self._started = clock()
        self._after = after
        self._phase = ""
        self._phase_started = self._started
        self._drawn = 0.0
        self._width = 0  # length of the line on screen; 0: nothing shown

    def __call__(self, what: str, records: int, done: int, total: int) -> None:
        now = self._clock()
        if what != self._phase:
            self._phase, self._phase_started = what, now
        elif now - self._drawn < _REDRAW:
            return
        if now - self._started < self._after:
            return
        line = format_line(what, records, done, total, now - self._phase_started)
        pad = " " * max(0, self._width - len(line))  # cover the rest of a longer line
        self._write("\r" + line + pad)
        self._width = len(line)
        self._drawn = now

    def clear(self) -> None:
        """Erase the line, if one is shown: called before any other output to stderr."""
        if self._width:
            self._write("\r" + " " * self._width + "\r")
            self._width = 0

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # a closed terminal must not fail the operation
            self._width = 0


def progress_line(stream: TextIO, *, quiet: bool = False) -> ProgressLine | None:
    """A progress line on `stream` when it is a terminal and not `quiet`; else None (then
    nothing is ever written: a pipe or a log file gets no progress)."""
    if quiet:
        return None
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    after = DEFAULT_AFTER
    knob = os.environ.get("MEMSYNC_PROGRESS_AFTER")
    if knob:
        # A malformed knob keeps the default rather than failing the command.
        with contextlib.suppress(ValueError):
            after = max(0.0, float(knob))
    return ProgressLine(stream, after=after)
