"""What a compaction killed right after its rename leaves (rule 16, issue 13 item 8): the
file compacted in place, and beside it `.<name>.old-<pid>-<offset>`, a link to the old
inode holding the lines a lock-free writer appended after `offset`, before the drain that
would have copied them in."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEAD_PID", "leave_aside"]

DEAD_PID = 999_999
"""The killed compaction's pid in the link's name: no such process (a live one would be
left to finish its own drain)."""


def leave_aside(path: Path, late: bytes) -> Path:
    """Leave `path` as a compaction killed after its rename does, with the complete line
    `late` appended meanwhile reaching only the old inode; return the aside link."""
    old = path.read_bytes()
    aside = path.with_name(f".{path.name}.old-{DEAD_PID}-{len(old)}")
    os.link(path, aside)
    with open(path, "ab") as f:  # the writer's append reaches the old inode
        f.write(late)
    compacted = path.with_name(f"{path.name}.compacted")
    compacted.write_bytes(old)  # what the compaction renamed in: the same records
    os.replace(compacted, path)  # ... and then it was killed: no drain
    return aside
