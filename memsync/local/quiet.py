"""Whether a file may be compacted now: the quiet check and a forced compaction's wait
(SEMANTICS rules 15 and 16), as `memsync.local.compaction` asks them.

Both refuse, with one line, while another process holds the file open for writing, and
also when no detector of `memsync.local.writers` can tell who does: "cannot tell" never
means "nobody" (issue 23, item 1), since a handle kept open across the rename would write
into the old inode after the drain.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from memsync.errors import NotQuiet
from memsync.local.writers import CANNOT_TELL, Writer, find_writers, who

__all__ = ["check_quiet", "wait_for_writers"]

_WRITERS_POLL = 0.05  # seconds between two looks in a forced compaction


def check_quiet(path: Path, st: os.stat_result, quiet_seconds: float) -> None:
    """Raise NotQuiet unless `path` (as `st`) has been unchanged for `quiet_seconds` and
    no other process holds it open for writing."""
    age = time.time() - st.st_mtime
    if age < quiet_seconds:
        raise NotQuiet(
            f"{path}: changed {max(age, 0.0):.0f} s ago; quiet period is {quiet_seconds:g} s"
        )
    busy = _writers(path, st)
    if busy:
        raise NotQuiet(f"{path}: open for writing by {who(busy)}; compaction would lose its writes")


def wait_for_writers(path: Path, st: os.stat_result, patience: float) -> None:
    """A forced compaction's check: no process holds the file open for writing, waited
    for up to `patience` seconds. An agent that appends with an open, write, close each
    time holds it for a moment only (and a write that races with the rename reaches the
    old inode, which the drain copies); one that keeps its handle open never lets go."""
    until = time.monotonic() + patience
    while busy := _writers(path, st):
        if time.monotonic() >= until:
            raise NotQuiet(
                f"{path}: open for writing by {who(busy)} for {patience:g} s; compaction "
                "would lose what it writes later"
            )
        time.sleep(_WRITERS_POLL)


def _writers(path: Path, st: os.stat_result) -> list[Writer]:
    found = find_writers(st.st_dev, st.st_ino)
    if found is None:
        raise NotQuiet(f"{path}: {CANNOT_TELL}; compaction would risk losing their writes")
    return found
