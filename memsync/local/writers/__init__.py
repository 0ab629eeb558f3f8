"""Which processes hold a file open for writing, for compaction's quiet check and drain
(SEMANTICS rule 16).

An agent with a long-lived append handle would go on writing into the renamed-away inode
after a compaction (the logrotate problem), so compaction does not start while another
process holds the file open with `O_WRONLY` or `O_RDWR`, and keeps draining the old inode
until no process holds it.

`find_writers` asks the detectors of `DETECTORS` in turn (looked up at each call, so
that a test can choose one): `/proc` (Linux), libproc (macOS), then `lsof -F` (anywhere
it is installed). The first that can tell answers. When none can, the answer is None,
"cannot tell", which callers must never read as "nobody" (issue 23, item 1): compaction
then refuses to start, and a drain keeps its aside link.
"""

from __future__ import annotations

import ctypes

from memsync.local.logs import get_logger
from memsync.local.writers.base import Detector, Writer
from memsync.local.writers.libproc import LibProc
from memsync.local.writers.lsof import Lsof
from memsync.local.writers.procfs import ProcFs

__all__ = ["CANNOT_TELL", "DETECTORS", "Detector", "Writer", "find_writers", "who"]

logger = get_logger(__name__)

DETECTORS: tuple[Detector, ...] = (ProcFs(), LibProc(), Lsof())
"""The detectors, in the order they are tried."""


def find_writers(dev: int, ino: int) -> list[Writer] | None:
    """The other processes holding the file (`dev`, `ino`) open for writing, from the first
    detector that can tell; None when none can (which is not "nobody")."""
    for detector in DETECTORS:
        try:
            found = detector.writers(dev, ino) if detector.available() else None
        except (OSError, ValueError, ctypes.ArgumentError) as exc:  # a detector that breaks
            logger.debug("writer detector %s failed: %s", detector.name, exc)
            found = None  # cannot tell, as if it were not there
        if found is not None:
            return found
    return None


def who(found: list[Writer] | tuple[Writer, ...]) -> str:
    """`pid 12 (python3), pid 40 (node)`: the writers, for a message."""
    return ", ".join(map(str, found))


CANNOT_TELL = "cannot tell which processes hold it open for writing (no /proc, libproc or lsof)"
"""Why compaction refuses where no detector answers, for its one-line message."""
